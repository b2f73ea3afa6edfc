"""A resume's ``key=value`` overrides, read as ``harness.run`` reads them.

A resume applies its overrides to the run's own ``config.yaml``, not through
Hydra's composition, but in Hydra's override grammar all the same: the value
``prices.models={openai\\:m:{input:1.0,output:4.0}}`` that ``harness.run``
and ``ctl``'s refusal line take is a dict keyed ``openai:m`` here too (YAML's
reading made it ``{'input:1.0': None}`` under a key that kept its backslash),
and ``+key=``, ``++key=`` and ``~key`` add and delete as there.
"""

from __future__ import annotations

from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException

from harness.schema import ConfigError


def parsed(overrides: list[str]) -> list[tuple[str, Any, bool]]:
    """(dotted key, value, whether it deletes) per override, in order; one line
    naming the override when it does not parse or sweeps (a resume takes one value)."""
    out = []
    parser = OverridesParser.create()
    for text in overrides:
        try:
            (override,) = parser.parse_overrides([text])
        except HydraException as exc:
            raise ConfigError(f"{text}: {str(exc).strip().splitlines()[0]}") from None
        if override.is_sweep_override():
            raise ConfigError(f"{text}: a resume takes one value a key, not a sweep")
        deletes = override.is_delete()
        out.append((override.key_or_group, None if deletes else override.value(), deletes))
    return out


def keys(overrides: list[str]) -> list[str]:
    """The dotted keys ``overrides`` set or delete, each once, in order."""
    return list(dict.fromkeys(key for key, _, _ in parsed(overrides)))


def applied(config: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``config`` (a plain dict, left as it is) with ``overrides`` deleted or set;
    a set merges as a dotlist did (a dict value merges into the section it names)."""
    out = dict(config)
    for key, value, deletes in parsed(overrides):
        *path, last = key.split(".")
        if deletes and not isinstance(_at(out, path), dict):
            continue  # nothing there to delete
        node = out
        for part in path:  # copied on the way down: the caller's dicts stay as they were
            child = node.get(part)
            node[part] = node = dict(child) if isinstance(child, dict) else {}
        if deletes:
            node.pop(last, None)
        else:
            node[last] = _merged(node[last], value) if isinstance(node.get(last), dict) else value
    return out


def _at(node: Any, path: list[str]) -> Any:
    for part in path:
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _merged(base: dict[str, Any], patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(base)
    for k, v in patch.items():
        out[k] = _merged(out[k], v) if isinstance(out.get(k), dict) else v
    return out

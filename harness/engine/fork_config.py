"""A fork's config: its parent's ``config.yaml`` with only the fork's
overrides applied, never the defaults a fresh composition would bring.

Hydra composes the command line as for any run; this module finds the keys
each override touches (``touched``: a value override its key, a group
override its whole section, which the group's file replaces) and copies
their composed values onto the parent's config (``fork_config``). What a
fork may not touch is THE FORK CONTRACT (``harness.store.fingerprint``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from harness.config import replicate_seed
from harness.paths import conf_dir
from harness.schema import ConfigError
from harness.store.fingerprint import FORK_FIXED_GROUPS, FORK_FIXED_KEYS, flatten
from harness.store.reader import read_config

# Where a fork's folder goes, what it is filed under and how it shows progress:
# taken from the command line (or a sweep's cell), never from the parent.
PLACE_KEYS = ("fork", "runs_root", "run_name", "experiment_name", "progress", "resume")


def is_group(key: str) -> bool:
    return "." not in key and "/" not in key and (conf_dir() / key).is_dir()


def touched(overrides: list[str]) -> list[str]:
    """The dotted keys (a group: its section) the overrides set or delete, in order;
    a key the fork contract fixes is refused in one line naming it."""
    keys: list[str] = []
    for override in OverridesParser.create().parse_overrides(overrides):
        key = override.key_or_group
        if key.startswith("hydra") or key.split(".")[0] in PLACE_KEYS:
            continue
        if key in FORK_FIXED_GROUPS and is_group(key):
            raise ConfigError(f"{key}={override.value()}: a fork keeps its parent's {key} (docs/forks.md)")
        if key.split(".")[0] in FORK_FIXED_KEYS:
            raise ConfigError(f"{key}: cannot change mid-run; a fork keeps its parent's (docs/forks.md)")
        if override.is_delete():  # the schema's default would run, while the lineage said None
            raise ConfigError(
                f"~{key}: a fork sets keys and deletes none (its run would take the default); "
                f"give {key} the value it is to have (docs/forks.md)"
            )
        keys.append(key)
        if key == "replicate":  # a sweep's replicate derives the cell's seed (harness.sweep.cell)
            keys.append("seed")
    return list(dict.fromkeys(keys))


def _given(overrides: list[str], key: str) -> bool:
    return any(o.key_or_group == key for o in OverridesParser.create().parse_overrides(overrides))


def _set(node: dict[str, Any], key: str, value: Any, present: bool) -> None:
    *path, last = key.split(".")
    for part in path:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    if present:
        node[last] = copy.deepcopy(value)
    else:
        node.pop(last, None)


def _get(node: Any, key: str) -> tuple[Any, bool]:
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None, False
        node = node[part]
    return node, True


def fork_config(
    parent: dict[str, Any], composed: dict[str, Any], overrides: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fork's config, ``{dotted key: new value}`` for each leaf it changed).
    ``composed`` is the command line's config as Hydra composed it, resolved."""
    out = copy.deepcopy(parent)
    keys = touched(overrides)
    for key in keys:
        _set(out, key, *_get(composed, key))
    if "replicate" in keys and not _given(overrides, "seed"):  # from the parent's seed, not the default's
        out["seed"] = replicate_seed(int(parent.get("seed") or 0), int(composed.get("replicate") or 0))
    for key in PLACE_KEYS:
        _set(out, key, *_get(composed, key))
    before, after = flatten(parent), flatten(out)
    changed = {
        k: v for k, v in after.items() if k.split(".")[0] not in PLACE_KEYS and before.get(k, "<absent>") != v
    }
    changed.update({k: None for k in before if k not in after and k.split(".")[0] not in PLACE_KEYS})
    return out, changed


def fork_keeps(
    cfg: Mapping[str, Any], run_dir: Path, overrides: list[str], keys: tuple[str, ...]
) -> dict[str, Any]:
    """The top-level ``keys`` (``rounds``, ``seed``) the run ``cfg`` makes at ``run_dir``
    holds: ``cfg``'s own, but a fork's are its parent's unless its overrides set them,
    so from its config.yaml once made, else as ``fork_config`` will make it (a sweep's
    row of a fork said the default's 3 rounds of a parent's 5). A parent that cannot
    be read: ``cfg``'s (the fork itself says why, in its one line)."""
    own = {key: cfg.get(key) for key in keys}
    parent = (cfg.get("fork") or {}).get("parent")
    if not parent:
        return own
    try:
        if (run_dir / "config.yaml").is_file():
            kept = read_config(run_dir)
        else:
            composed = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
            kept = fork_config(read_config(Path(str(parent))), composed, overrides)[0]  # type: ignore[arg-type]
    except (OSError, ConfigError):  # RunFolderError among them
        return own
    return {key: kept.get(key, own[key]) for key in keys}

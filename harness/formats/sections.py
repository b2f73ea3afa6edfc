"""A composed config checked against the schema section by section, each
section's result kept for the next config that holds the same section.

OmegaConf's merge onto the structured ``Config`` cost 25-35 ms a config, and
every cell of a sweep validates its own: 64 cells spent more CPU on it than on
their model calls. The cells of a sweep differ in a few values
(``llm.temperature``, ``replicate``, ``run_name``), so most of their sections
are equal: a section seen before is copied (``copy.deepcopy``; later checks may
set fields), and only the rest is merged. Top-level values (``replicate``,
``roles``) are kept the same way, a new one checked alone against its own
field (``_top_values``), and so are a format's options (``structured_options``).

The result is what ``_structured(Config, data)`` makes, field by field, for the
configs it takes: a config holding an interpolation (``${...}``, which may
reach across sections) is merged whole, and any error in a section, or any
key or type the schema refuses, falls back to the whole merge, whose one-line
error is the one a user sees.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.schema import Config, _schema_node, _structured

# a section a config leaves out: Config's own default for it
_DEFAULTS: dict[str, Callable[[], Any]] = {
    f.name: f.default_factory for f in dataclasses.fields(Config) if callable(f.default_factory)
}
MEMO_SIZE = 512  # sections kept; a sweep of one shape needs a few per varying section
FEW = 3  # top-level values a config may miss and still have checked one by one
_memo: dict[tuple[str, str], Any] = {}
_ABSENT = object()  # a top-level value the config leaves out


@functools.cache
def _sections() -> dict[str, type]:
    """``Config``'s fields whose type is a dataclass, by name."""
    return {
        f.name: _hints()[f.name]
        for f in dataclasses.fields(Config)
        if dataclasses.is_dataclass(_hints()[f.name])
    }


def structured_config(data: DictConfig | dict[str, Any]) -> Config:
    """``data`` as a ``Config``; a one-line ``ConfigError`` (``harness.schema``) if the schema refuses it."""
    plain = OmegaConf.to_container(data, resolve=False) if isinstance(data, DictConfig) else data
    if not isinstance(plain, dict) or interpolates(plain):
        return _whole(data)
    try:
        return _by_section({str(k): v for k, v in plain.items()})
    except (OmegaConfBaseException, ValueError, TypeError, KeyError):
        return _whole(data)  # its error, in its words (or, should it take it, its result)


def interpolates(plain: dict[Any, Any]) -> bool:
    """Whether a config (as ``OmegaConf.to_container(..., resolve=False)`` gives it)
    holds an interpolation, or an escaped one: without, resolving it changes nothing."""
    return "${" in json.dumps(plain, default=str)


def _whole(data: Any) -> Config:
    obj = _structured(Config, data)
    assert isinstance(obj, Config)
    return obj


def _by_section(plain: dict[str, Any]) -> Config:
    sections = _sections()
    if any(name in plain and not isinstance(plain[name], dict) for name in sections):
        raise ValueError("a section that is no mapping")  # the whole merge says what of it
    values = _top_values({k: v for k, v in plain.items() if k not in sections})
    for name, value in plain.items():
        if name in sections:
            values[name] = _section(name, value)
    for name in sections.keys() - plain.keys():
        values[name] = _DEFAULTS[name]()
    return Config(**values)


def _section(name: str, value: dict[str, Any]) -> Any:
    return _kept(name, value, lambda: OmegaConf.to_object(OmegaConf.merge(_schema_node(Config)[name], value)))


def _top_values(given: dict[str, Any]) -> dict[str, Any]:
    """``Config``'s top-level values (``roles`` and ``format`` too), each kept once
    checked. A config missing more than ``FEW`` of them (a process's first) is
    merged onto the whole top-level schema at once; a sweep's next cells miss one
    or two, each checked alone against its own field: OmegaConf checks each field
    on its own, so either is what the whole merge makes of it. A value the merge
    would keep as it is (``_as_merged``: a cell's ``run_name``, ``replicate``,
    ``seed``) is taken as it is."""
    if given.keys() - _top_fields():
        raise KeyError("a key the schema does not know")  # the whole merge names it
    plain = {name: value for name, value in given.items() if _as_merged(name, value)}
    keys = {name: (name, _key(given.get(name, _ABSENT))) for name in _top_fields() if name not in plain}
    kept = {name: _memo.get(key, _ABSENT) for name, key in keys.items()}
    missing = [name for name, value in kept.items() if value is _ABSENT]  # a kept value may be None
    if len(missing) > FEW:
        top = OmegaConf.to_object(OmegaConf.merge(_top_node(), {n: given[n] for n in missing if n in given}))
        kept.update({name: getattr(top, name) for name in missing})
    else:
        for name in missing:
            alone = OmegaConf.merge(_field_node(name), {name: given[name]} if name in given else {})
            kept[name] = getattr(OmegaConf.to_object(alone), name)
    for name in missing:
        _remember(keys[name], kept[name])
    return {**plain, **{name: copy.deepcopy(value) for name, value in kept.items()}}


def _as_merged(name: str, value: Any) -> bool:
    """Whether the merge onto its field makes ``value`` itself, so it needs none: an int,
    str or bool of exactly the field's type (no bool for an int), or None where the field
    takes None, but never "???" (OmegaConf's missing value) or an interpolation. A new
    cell's ``run_name``, ``replicate`` and ``seed`` are such (each merge ~0.5 ms).
    test_run_start checks it against the merge, type by type."""
    hint = _hints()[name]
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        return type(None) in allowed
    if isinstance(value, str) and (value == "???" or "${" in value):
        return False
    return type(value) in allowed and type(value) in (int, str, bool)


def structured_options(schema: type, data: dict[str, Any], prefix: str) -> Any:
    """``_structured(schema, data, prefix)`` (a format's options), kept as a section is."""
    return _kept(
        f"{prefix}{schema.__module__}.{schema.__qualname__}", data, lambda: _structured(schema, data, prefix)
    )


def _kept(name: str, value: Any, make: Callable[[], Any]) -> Any:
    """``make()``'s result for this value of ``name``, kept; a copy each time (later checks may set fields)."""
    key = (name, _key(value))
    if (kept := _memo.get(key, _ABSENT)) is _ABSENT:
        kept = make()
        _remember(key, kept)
    return copy.deepcopy(kept)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _remember(key: tuple[str, str], value: Any) -> None:
    if len(_memo) >= MEMO_SIZE:
        _memo.clear()
    _memo[key] = value


@functools.cache
def _top_fields() -> tuple[str, ...]:
    """``Config``'s top-level values: its fields but the sections."""
    return tuple(f.name for f in dataclasses.fields(Config) if f.name not in _sections())


@functools.cache
def _top_node() -> DictConfig:
    """The schema of ``Config``'s top-level values: its fields but the sections."""
    fields = [(name, _hints()[name], _field_of(name)) for name in _top_fields()]
    return OmegaConf.structured(dataclasses.make_dataclass("Config", fields))


@functools.cache
def _field_node(name: str) -> DictConfig:
    """The schema of one of ``Config``'s top-level values alone."""
    return OmegaConf.structured(
        dataclasses.make_dataclass("Config", [(name, _hints()[name], _field_of(name))])
    )


def _field_of(name: str) -> Any:
    f = next(f for f in dataclasses.fields(Config) if f.name == name)
    return dataclasses.field(default=f.default, default_factory=f.default_factory)


@functools.cache
def _hints() -> dict[str, Any]:
    return typing.get_type_hints(Config)

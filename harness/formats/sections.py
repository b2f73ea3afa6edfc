"""A composed config checked against the schema section by section, each
section's result kept for the next config that holds the same section.

OmegaConf's merge onto the structured ``Config`` cost 25-35 ms a config, and
every cell of a sweep validates its own: 64 cells spent more CPU on it than on
their model calls. The cells of a sweep differ in a few values
(``llm.temperature``, ``replicate``, ``run_name``), so most of their sections
are equal: a section seen before is copied (``copy.deepcopy``; later checks may
set fields), and only the rest is merged. A top-level value (``replicate``)
is checked alone against its own field and kept the same way, as are the
values not of a dataclass type (``roles``) and a format's options
(``structured_options``): OmegaConf checks each field on its own.

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
_memo: dict[tuple[str, str], Any] = {}
_ABSENT = object()  # a top-level value the config leaves out


@functools.cache
def _sections() -> dict[str, type]:
    """``Config``'s fields whose type is a dataclass, by name."""
    hints = typing.get_type_hints(Config)
    return {
        f.name: hints[f.name] for f in dataclasses.fields(Config) if dataclasses.is_dataclass(hints[f.name])
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
    scalars = {k: v for k, v in plain.items() if k not in sections and not isinstance(v, dict)}
    if scalars.keys() - _top_fields():
        raise KeyError("a key the schema does not know")  # the whole merge names it
    values = {name: _top_value(name, scalars.get(name, _ABSENT)) for name in _top_fields()}
    for name, value in plain.items():
        if isinstance(value, dict):  # a section, or a mapping value (``roles``, ``format``)
            values[name] = _section(name, value)
    for name in sections.keys() - plain.keys():
        values[name] = _DEFAULTS[name]()
    return Config(**values)


def _section(name: str, value: dict[str, Any]) -> Any:
    if name in _sections():
        return _kept(
            name, value, lambda: OmegaConf.to_object(OmegaConf.merge(_schema_node(Config)[name], value))
        )
    return _top_value(name, value)


def _top_value(name: str, value: Any) -> Any:
    """One top-level value, checked alone against its field (``_ABSENT``: its default).
    OmegaConf checks each field on its own, so this is what the whole merge makes
    of it; a sweep's cells differ in a few of these (``replicate``, ``run_name``)."""
    if name not in _top_fields():
        raise KeyError(name)  # the whole merge names it
    given = {} if value is _ABSENT else {name: value}
    return _kept(
        name, value, lambda: getattr(OmegaConf.to_object(OmegaConf.merge(_top_node(name), given)), name)
    )


def structured_options(schema: type, data: dict[str, Any], prefix: str) -> Any:
    """``_structured(schema, data, prefix)`` (a format's options), kept as a section is."""
    return _kept(
        f"{prefix}{schema.__module__}.{schema.__qualname__}", data, lambda: _structured(schema, data, prefix)
    )


def _kept(name: str, value: Any, make: Callable[[], Any]) -> Any:
    """``make()``'s result for this value of ``name``, kept; a copy each time (later checks may set fields)."""
    key = (name, json.dumps(value, sort_keys=True, default=repr))
    if (kept := _memo.get(key, _ABSENT)) is _ABSENT:  # a kept value may be None
        kept = make()
        if len(_memo) >= MEMO_SIZE:
            _memo.clear()
        _memo[key] = kept
    return copy.deepcopy(kept)


@functools.cache
def _top_fields() -> tuple[str, ...]:
    """``Config``'s top-level values: its fields but the sections."""
    return tuple(f.name for f in dataclasses.fields(Config) if f.name not in _sections())


@functools.cache
def _top_node(name: str) -> DictConfig:
    """The schema of one of ``Config``'s top-level values (``_top_fields``)."""
    f = next(f for f in dataclasses.fields(Config) if f.name == name)
    field = dataclasses.field(default=f.default, default_factory=f.default_factory)
    return OmegaConf.structured(
        dataclasses.make_dataclass("Config", [(name, typing.get_type_hints(Config)[name], field)])
    )

"""A composed config checked against the schema section by section, each
section's result kept for the next config that holds the same section.

OmegaConf's merge onto the structured ``Config`` cost 25-35 ms a config, and
every cell of a sweep validates its own: 64 cells spent more CPU on it than on
their model calls. The cells of a sweep differ in a few values
(``llm.temperature``, ``replicate``, ``run_name``), so most of their sections
are equal: a section seen before is copied (``copy.deepcopy``; later checks may
set fields), and only the rest is merged. The top-level values and the
sections not of a dataclass type (``roles``, ``format``) are merged as before.

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
    if not isinstance(plain, dict) or "${" in json.dumps(plain, default=str):
        return _whole(data)
    try:
        return _by_section({str(k): v for k, v in plain.items()})
    except (OmegaConfBaseException, ValueError, TypeError, KeyError):
        return _whole(data)  # its error, in its words (or, should it take it, its result)


def _whole(data: Any) -> Config:
    obj = _structured(Config, data)
    assert isinstance(obj, Config)
    return obj


def _by_section(plain: dict[str, Any]) -> Config:
    sections = _sections()
    if any(name in plain and not isinstance(plain[name], dict) for name in sections):
        raise ValueError("a section that is no mapping")  # the whole merge says what of it
    scalars = {k: v for k, v in plain.items() if k not in sections and not isinstance(v, dict)}
    top = OmegaConf.to_object(OmegaConf.merge(_top_node(), scalars))  # checked as the whole merge checks them
    values = {f.name: getattr(top, f.name) for f in dataclasses.fields(top)}  # type: ignore[arg-type]
    for name, value in plain.items():
        if isinstance(value, dict):  # a section, or a mapping value (``roles``, ``format``)
            values[name] = _section(name, value)
    for name in sections.keys() - plain.keys():
        values[name] = _DEFAULTS[name]()
    return Config(**values)


def _section(name: str, value: dict[str, Any]) -> Any:
    key = (name, json.dumps(value, sort_keys=True, default=repr))
    if (kept := _memo.get(key)) is None:
        if name in _sections():
            kept = OmegaConf.to_object(OmegaConf.merge(_schema_node(Config)[name], value))
        else:
            kept = getattr(OmegaConf.to_object(OmegaConf.merge(_top_node(), {name: value})), name)
        if len(_memo) >= MEMO_SIZE:
            _memo.clear()
        _memo[key] = kept
    return copy.deepcopy(kept)


@functools.cache
def _top_node() -> DictConfig:
    """The schema of ``Config``'s top-level values: its fields but the sections."""
    hints = typing.get_type_hints(Config)
    fields = [
        (f.name, hints[f.name], dataclasses.field(default=f.default, default_factory=f.default_factory))
        for f in dataclasses.fields(Config)
        if f.name not in _sections()
    ]
    return OmegaConf.structured(dataclasses.make_dataclass("Config", fields))

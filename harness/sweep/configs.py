"""Each sweep cell's config, as the in-process launcher makes it (``CellConfigs``).

Its own module, under the launcher and under ``ctl``'s check of a key
(``harness.sweep.control``) and the plan (``harness.plan.cells``), none of
which may import the launcher: it imports the driver's steering, which
imports ``control``.
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType
from omegaconf import DictConfig, OmegaConf, open_dict


class CellConfigs:
    """Each cell's config, composed by Hydra once per shape of cell and then
    copied with the cell's own values set.

    Composing takes a tenth of a second or more, under one lock (Hydra's loader
    is not known to be thread-safe), so composing every cell staggers the
    starts of 64 cells over seconds. Cells of a sweep differ in values
    (``llm.temperature=0.7``, ``replicate=3``); a cell whose group choices and
    value keys match one already composed gets a copy of it with its values
    set, as Hydra would set them. Anything else (a group, ``+``/``~``, a dict
    or list value) is composed in full.
    """

    def __init__(self, loader: Any, master: DictConfig) -> None:
        self.loader, self.master = loader, master
        self.parser = OverridesParser.create()
        # each shape's config, pickled, and the values it was composed with (None: not to be compared)
        self.shapes: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[bytes, list[Any] | None]] = {}
        self.parsed: dict[str, Kind] = {}  # a sweep's cells repeat their overrides
        self.composed: dict[tuple[str, ...], DictConfig] = {}  # by the sweeper's check: used once
        self.lock = threading.Lock()

    def compose(self, overrides: list[str]) -> DictConfig:
        with self.lock:
            shape, values = self._split(overrides)
            if shape is not None and shape in self.shapes:
                blob, composed_with = self.shapes[shape]
                cfg = pickle.loads(blob)
                for i, (key, value) in enumerate(values):
                    if composed_with is None or not _same(composed_with[i], value):
                        OmegaConf.update(cfg, key, value, merge=False)
                return cfg
            cfg = self.composed.pop(tuple(overrides), None)
            if cfg is None:
                cfg = self.loader.load_sweep_config(self.master, overrides)
            with open_dict(cfg):
                del cfg["hydra"]  # the task's config, as run_job hands it over
            if shape is not None:
                self.shapes[shape] = (pickle.dumps(cfg), _apart(values))
            return cfg

    def shape(self, overrides: list[str]) -> Any:
        """What of ``overrides`` decides which keys a cell's config has (its group
        choices and value keys, not its values); None when only Hydra may compose it."""
        with self.lock:
            return self._split(overrides)[0]

    def _split(self, overrides: list[str]) -> tuple[Any, list[tuple[str, Any]]]:
        """(the cell's shape, its values), or (None, []) when only Hydra may compose it."""
        groups, values = [], []
        for line in overrides:
            if line not in self.parsed:
                self.parsed[line] = self._kind(line)
            kind = self.parsed[line]
            if kind is None:
                return None, []
            if kind[0] == "value":
                values.append((kind[1], kind[2]))
            else:
                groups.append(kind[1])
        return (tuple(groups), tuple(k for k, _ in values)), values

    def _kind(self, line: str) -> Kind:
        """What one override line is to ``_split``: a group choice, a value (its key and
        value: a scalar, the same object each time), or None. Kept by line: Hydra's
        parser takes ~0.2 ms an override, and the master config does not change."""
        override = self.parser.parse_overrides([line])[0]
        key, value = override.key_or_group, override.value()
        if override.type != OverrideType.CHANGE or override.package or key.startswith("hydra"):
            return None
        if "." in key or (key in self.master and not OmegaConf.is_config(self.master[key])):
            return None if isinstance(value, (dict, list)) else ("value", key, value)
        return ("group", line, None)  # Hydra's parser keeps the line as its input_line


# an override line to ``CellConfigs._split``: ("group", line, None), ("value", key, value), or None
Kind = tuple[str, str, Any] | None


def _apart(values: list[tuple[str, Any]]) -> list[Any] | None:
    """The values a shape was composed with, when each sets a key no other override
    touches (no key twice, none inside another): then a cell's value equal to the
    one the shape was composed with is in the copy already (Hydra set it once, and
    setting it again sets the same). None otherwise: every value is set."""
    keys = [key for key, _ in values]
    if len(set(keys)) < len(keys) or any(b.startswith(f"{a}.") for a in keys for b in keys):
        return None
    return [value for _, value in values]


def _same(a: Any, b: Any) -> bool:
    """The same value of the same type (1, 1.0 and True are equal but set differently)."""
    return type(a) is type(b) and a == b

"""Cells named by what varies. A cell's identity is its config hash (``cell``,
from ``tables.cell_of``); its label names the config keys that differ between
the runs analysed together, with short names: ``T=0.3 persona_drift_rate=0.05``.

- ``varying_keys(runs)``: the ``cfg.*`` columns whose value differs between
  runs, replicate and spending keys aside. A group choice stands for the keys
  its group sets that split the runs exactly as it does: ``model.spec`` for
  ``model.n_ctx`` when only the model changed it (``control`` for a control
  preset's ``critic.approve_all``). A section some
  runs lack altogether is one key, ``probes=on``/``probes=off``
  (``with_sections``); a key equal in every run that has it goes with the
  group choice or section that decides where it is (``format=grounded`` for
  that format's options).
- ``label_cells(runs, run_dirs)``: relabels every run. When every run is a
  cell of a sweep whose index (``sweep.json``) names overrides that explain
  every varying key, the label is those overrides as typed (``model=smollm2``);
  otherwise it is built from the varying keys. When nothing varies the label
  from ``cell_of`` stays. Two cells never share a label: a hash is added only
  if they would.
- ``cells_table(runs)``: one row per cell with its varying keys as columns,
  to pivot any per-cell table on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.tables import REPLICATE_KEYS, SPENDING
from harness.sweep.index import INDEX_JSON, read_index

# Group choices, in order, each with the keys its files set (conf/<group>/): a choice
# stands for those of its keys that split the runs exactly as it does.
GROUPS = {
    "cfg.format.name": ("cfg.format.", "cfg.roles.", "cfg.search.", "cfg.topic.", "cfg.rounds"),
    "cfg.model.spec": ("cfg.model.",),
    "cfg.critic.name": ("cfg.critic.",),
    "cfg.control": ("cfg.format.", "cfg.critic."),  # conf/experiment/control_*.yaml
}
# Shown first, in this order, and never stood for: what a reader looks for first.
FIRST = ("cfg.format.name", "cfg.model.spec", "cfg.llm.temperature", "cfg.critic.name", "cfg.control")
SHORT = {
    "cfg.llm.temperature": "T",
    "cfg.model.spec": "model",
    "cfg.critic.name": "critic",
    "cfg.format.name": "format",
}
GENERIC = frozenset({"name", "spec", "index", "file", "text", "path", "enabled", "use", "generate"})
# Never named: the replicate keys, and how many replicates a sweep made (not a
# condition, though part of the hash: a run alone and a sweep's are two cells).
UNNAMED = (*REPLICATE_KEYS, "cfg.replicates")
MAX_VALUE = 40  # characters of a value shown in a label (a motion's text is long)


def is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def value_text(value: Any, whole: bool = False) -> str:
    """A config value as a label shows it (``whole``: a float column of ints, see ``whole_floats``)."""
    if is_null(value):
        return "none"
    text = str(int(value)) if whole else str(value)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def whole_floats(column: pd.Series) -> bool:
    """Ints that pandas made floats because some run lacks the key: shown as ints."""
    return bool(column.dtype.kind == "f" and column.isna().any() and (column.dropna() % 1 == 0).all())


def texts_of(column: pd.Series) -> pd.Series:
    whole = whole_floats(column)
    return column.map(lambda v: value_text(v, whole))


def condition_keys(runs: pd.DataFrame) -> list[str]:
    """The config columns that define a cell: all but the replicate and spending keys."""
    return [
        c for c in runs.columns if c.startswith("cfg.") and c not in UNNAMED and not c.startswith(SPENDING)
    ]


def _rank(key: str) -> tuple[int, str]:
    return (FIRST.index(key) if key in FIRST else len(FIRST), key)


def with_sections(runs: pd.DataFrame) -> pd.DataFrame:
    """``runs`` with a column ``cfg.<section>`` (``on``/``off``) for each top-level
    config section that some runs lack altogether: a run that probes nothing keeps no
    ``probes`` section (nor one that interviews nobody ``interviews``), so its absence
    is one setting, not one missing value per key of the section."""
    heads: dict[str, list[str]] = {}
    for key in condition_keys(runs):
        parts = key.split(".")
        if len(parts) > 2:
            heads.setdefault(".".join(parts[:2]), []).append(key)
    added = {}
    for head, keys in heads.items():
        if head in runs.columns:
            continue  # a key of that name already (or this frame has its section columns)
        present = ~runs[keys].map(is_null).all(axis=1)
        if present.any() and not present.all():
            added[head] = present.map({True: "on", False: "off"}).astype(object)
    return pd.concat([runs, pd.DataFrame(added, index=runs.index)], axis=1) if added else runs


def section_keys(keys: Iterable[str]) -> list[str]:
    """The keys among ``keys`` that head others (``cfg.probes`` of ``cfg.probes.use``): sections."""
    keys = list(keys)
    return [k for k in keys if any(other.startswith(f"{k}.") for other in keys)]


def varying_keys(runs: pd.DataFrame) -> list[str]:
    """The config keys that differ between ``runs``, group choices standing for
    the keys they move, in a fixed order: format, model, T, critic, control, then by name.
    A section some runs lack is one key (``probes``: ``on``/``off``, see ``with_sections``).
    A key equal in every run that has it, missing from the others, is left to what
    decides where it is: the group choice that sets it (``format=grounded`` for the
    grounded format's own options) or its section (``probes=on``)."""
    runs = with_sections(runs)
    all_keys = condition_keys(runs)
    texts = {k: texts_of(runs[k]) for k in all_keys}
    keys = sorted((k for k, t in texts.items() if t.nunique() > 1), key=_rank)
    split = {k: tuple(pd.factorize(texts[k])[0]) for k in keys}  # equal tuples: the same partition
    sections = set(section_keys(all_keys)) & set(keys)
    # equal wherever it is set: only whether a run has it varies
    present_only = {k for k in keys if k not in sections and runs[k].map(is_null).any()}
    present_only = {k for k in present_only if texts[k][~runs[k].map(is_null)].nunique() == 1}

    def decides(head: str, key: str) -> bool:
        """Runs alike in ``head`` are alike in ``key``."""
        return bool(pd.Series(split[key]).groupby(list(split[head])).nunique().max() == 1)

    hidden: set[str] = set()
    for head, prefixes in GROUPS.items():
        if head in split and head not in hidden:
            for k in keys:
                if k == head or k in FIRST or not f"{k}.".startswith(prefixes):
                    continue
                if split[k] == split[head] or (k in present_only | sections and decides(head, k)):
                    hidden.add(k)
    for section in sections:
        hidden.update(k for k in present_only if k.startswith(f"{section}.") and decides(section, k))
    return [k for k in keys if k not in hidden]


def short_names(keys: Iterable[str]) -> dict[str, str]:
    """``cfg.model.persona_drift_rate`` -> ``persona_drift_rate``; a generic last
    part keeps its parent (``topic.index``); names that collide stay whole."""

    def short(key: str) -> str:
        parts = key.removeprefix("cfg.").split(".")
        return SHORT.get(key) or ".".join(parts[-2:] if parts[-1] in GENERIC else parts[-1:])

    first = {k: short(k) for k in keys}
    counts = Counter(first.values())
    return {k: s if counts[s] == 1 else k.removeprefix("cfg.") for k, s in first.items()}


def config_labels(runs: pd.DataFrame) -> pd.Series:
    """Each run's varying keys and values. A key no run of a format has is left
    out of that format's labels, a section's keys out of the runs without that
    section, and critic keys out of runs with no critic."""
    runs = with_sections(runs)
    keys = varying_keys(runs)
    names = short_names(keys)
    texts = pd.DataFrame({k: texts_of(runs[k]) for k in keys}, index=runs.index)
    fmt = runs["format"] if "format" in runs else pd.Series("", index=runs.index)
    absent = {f: {k for k in keys if runs.loc[fmt == f, k].map(is_null).all()} for f in fmt.unique()}
    critic = (
        runs["has_critic"].fillna(True).astype(bool) if "has_critic" in runs else pd.Series(True, runs.index)
    )
    sections = [s for s in section_keys(condition_keys(runs)) if s in runs and not runs[s].map(is_null).any()]
    labels = []
    for i in runs.index:
        lacks = tuple(f"{s}." for s in sections if runs.at[i, s] == "off")
        shown = [
            k
            for k in keys
            if k not in absent[fmt[i]]
            and (critic[i] or not k.startswith("cfg.critic."))
            and not (lacks and k.startswith(lacks))
        ]
        labels.append(" ".join(f"{names[k]}={texts.at[i, k]}" for k in shown))
    return pd.Series(labels, index=runs.index, dtype=object)


def _swept(folder: Path) -> dict[str, dict[str, str]] | None:
    """Each cell's varying overrides as typed, by run folder name, from a sweep's index."""
    if not (folder / INDEX_JSON).is_file():
        return None
    try:
        index = read_index(folder)
    except ValueError:
        return None  # an index this version cannot read: the configs still say what varies
    return {c.name: c.params for c in index.cells}


def sweep_labels(runs: pd.DataFrame, run_dirs: Mapping[str, Path]) -> pd.Series | None:
    """The overrides each run's sweep varied, as typed; None unless every run is a
    cell of one grid whose overrides explain every key that varies."""
    indexes: dict[Path, dict[str, dict[str, str]] | None] = {}
    params = []
    for rel in runs.run_id:
        run_dir = run_dirs.get(rel)
        if run_dir is None:
            return None
        if run_dir.parent not in indexes:
            indexes[run_dir.parent] = _swept(run_dir.parent)
        cell = (indexes[run_dir.parent] or {}).get(run_dir.name)
        if cell is None:
            return None
        params.append({k: v for k, v in cell.items() if f"cfg.{k}" not in UNNAMED})
    if len({tuple(p) for p in params}) != 1:
        return None  # several grids: only the configs compare them
    swept = tuple(params[0])
    varying = [k for k in condition_keys(runs) if texts_of(runs[k]).nunique() > 1]
    explained = all(any(k == f"cfg.{s}" or k.startswith(f"cfg.{s}.") for s in swept) for k in varying)
    if not explained:
        return None
    keys = [s for s in swept if len({p[s] for p in params}) > 1]
    names = short_names(f"cfg.{s}" for s in keys)
    return pd.Series(
        [" ".join(f"{names[f'cfg.{s}']}={value_text(p[s])}" for s in keys) for p in params],
        index=runs.index,
        dtype=object,
    )


def distinct(cells: pd.Series, labels: pd.Series) -> pd.Series:
    """One label per cell (its first run's), and a hash after any two cells would share."""
    first: dict[str, str] = {}
    for cell, label in zip(cells, labels, strict=True):
        first.setdefault(cell, label)
    counts = Counter(first.values())
    named = {cell: label if counts[label] == 1 else f"{label} [{cell[:6]}]" for cell, label in first.items()}
    return cells.map(named)


def label_cells(runs: pd.DataFrame, run_dirs: Mapping[str, Path] | None = None) -> pd.DataFrame:
    """``runs`` with each ``cell_label`` naming what varies among these runs. Done
    after the cache: a label depends on which runs were loaded together."""
    if runs.empty:
        return runs
    labels = sweep_labels(runs, run_dirs or {})
    labels = config_labels(runs) if labels is None else labels
    labels = labels.where(labels != "", runs.cell_label)  # nothing varies: cell_of's label
    return runs.assign(cell_label=distinct(runs.cell, labels))


def cells_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its hash, label, number of runs and each varying key."""
    runs = with_sections(runs)
    keys = varying_keys(runs)
    cells = runs.groupby("cell", sort=False).agg(cell_label=("cell_label", "first"), runs=("run_id", "size"))
    values = runs.drop_duplicates("cell").set_index("cell")[keys]
    return cells.join(values).reset_index()

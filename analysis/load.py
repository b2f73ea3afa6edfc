"""Load one run folder or a whole tree of runs into tidy tables, with a
Parquet cache per run that is rebuilt only when the run's files change.

The cache lives beside the runs, in ``<root>/_analysis/cache/<run>/``:
the run folders themselves are never written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from analysis.records_io import find_runs, fingerprint
from analysis.tables import TABLES, load_run_tables

CACHE_VERSION = 1  # bump when a table's columns or meaning change


@dataclass
class Tables:
    """The analysis tables of a set of runs; ``root`` is where they came from."""

    root: Path
    runs: pd.DataFrame
    turns: pd.DataFrame
    drafts: pd.DataFrame
    personas: pd.DataFrame
    events: pd.DataFrame
    cache_hits: int = 0
    run_dirs: dict[str, Path] = field(default_factory=dict)
    cache_dir: Path | None = None  # None: caching was off
    stamps: dict[str, dict] = field(default_factory=dict)  # per run: what its cache is keyed on

    def table(self, name: str) -> pd.DataFrame:
        return getattr(self, name)


def analysis_dir(path: Path) -> Path:
    """Where outputs and caches go: ``_analysis`` beside the runs."""
    root = path.parent if (path / "manifest.json").is_file() else path
    return root / "_analysis"


def cache_slot(cache_dir: Path, rel: str) -> Path:
    return cache_dir / rel.replace("/", "__")


def read_cached(slot: Path, stamp: dict, names: Iterable[str] = TABLES) -> dict[str, pd.DataFrame] | None:
    """The frames cached in ``slot`` if it was written for ``stamp``, else None."""
    try:
        if json.loads((slot / "meta.json").read_text()) != stamp:
            return None
        return {name: pq.read_table(slot / f"{name}.parquet").to_pandas() for name in names}
    except (OSError, ValueError, pa.ArrowException):
        return None  # missing or damaged cache: rebuild it


def write_cached(slot: Path, stamp: dict, tables: dict[str, pd.DataFrame]) -> None:
    slot.mkdir(parents=True, exist_ok=True)
    (slot / "meta.json").unlink(missing_ok=True)  # meta last: a torn write never looks valid
    for name, df in tables.items():
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), slot / f"{name}.parquet")
    (slot / "meta.json").write_text(json.dumps(stamp))


def run_stamp(run_dir: Path) -> dict:
    return {"version": CACHE_VERSION, "files": fingerprint(run_dir)}


def _concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if not f.empty] or list(frames)[:1]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_runs(path: str | Path, *, cache: bool = True, cache_dir: Path | None = None) -> Tables:
    """Every run folder at or under ``path``, as five concatenated tables.

    ``run_id`` is the run folder's path relative to the root (its name when
    ``path`` is a run folder). A partly written run loads with a warning.
    """
    path = Path(path)
    root = path.parent if (path / "manifest.json").is_file() else path
    cache_dir = cache_dir or analysis_dir(path) / "cache"
    per_table: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    hits, dirs, stamps = 0, {}, {}
    for run_dir in find_runs(path):
        rel = run_dir.relative_to(root).as_posix()
        dirs[rel] = run_dir
        stamp = stamps[rel] = run_stamp(run_dir)
        slot = cache_slot(cache_dir, rel)
        tables = read_cached(slot, stamp) if cache else None
        if tables is None:
            tables = load_run_tables(run_dir, rel)
            if cache:
                write_cached(slot, stamp, tables)
        else:
            hits += 1
        for name in TABLES:
            per_table[name].append(tables[name])
    frames = {name: _concat(per_table[name]) for name in TABLES}
    return Tables(
        root=root,
        cache_hits=hits,
        run_dirs=dirs,
        cache_dir=cache_dir if cache else None,
        stamps=stamps,
        **frames,
    )

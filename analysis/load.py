"""Load one run folder or a whole tree of runs into tidy tables, with a
Parquet cache that rebuilds a run only when its files change.

The cache lives beside the runs, in ``<root>/_analysis/cache/``: the run
folders themselves are never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.cache import cached_rows
from analysis.labels import label_cells
from analysis.records_io import find_runs, fingerprint, layout_of
from analysis.tables import TABLES, load_run_tables

# Bump when a table's columns or meaning change. 5: experiment_name splits no cell; 4: a killed
# run's counts; 3: lineage columns
CACHE_VERSION = 5


@dataclass
class Tables:
    """The analysis tables of a set of runs; ``root`` is where they came from."""

    root: Path
    runs: pd.DataFrame
    turns: pd.DataFrame
    drafts: pd.DataFrame
    personas: pd.DataFrame
    events: pd.DataFrame
    public: pd.DataFrame  # what roles with no seat wrote (panel summaries, decisions, synthesis)
    cache_hits: int = 0
    run_dirs: dict[str, Path] = field(default_factory=dict)
    cache_dir: Path | None = None  # None: caching was off
    stamps: dict[str, object] = field(default_factory=dict)  # per run: what its cache rows are keyed on

    def table(self, name: str) -> pd.DataFrame:
        return getattr(self, name)


def analysis_dir(path: Path) -> Path:
    """Where outputs and caches go: ``<root>/_analysis`` beside the runs, or
    ``<parent>/_analysis/<run>`` for one run folder, so that analysing one run
    never overwrites the analysis of the whole tree."""
    if (path / "manifest.json").is_file():
        return path.parent / "_analysis" / path.name
    return path / "_analysis"


def load_runs(path: str | Path, *, cache: bool = True, cache_dir: Path | None = None) -> Tables:
    """Every run folder at or under ``path``, as concatenated tables, of any format.

    ``run_id`` is the run folder's path relative to the root (its name when
    ``path`` is a run folder). A partly written run loads with a warning.
    """
    path = Path(path)
    root = path.parent if (path / "manifest.json").is_file() else path
    folder = (cache_dir or analysis_dir(path) / "cache") if cache else None
    dirs = {run_dir.relative_to(root).as_posix(): run_dir for run_dir in find_runs(path)}
    stamps: dict[str, object] = {
        rel: {"v": CACHE_VERSION, "files": fingerprint(d, layout_of(d))} for rel, d in dirs.items()
    }
    frames, hits = cached_rows(
        folder / "tables" if folder else None, TABLES, stamps, lambda rel: load_run_tables(dirs[rel], rel)
    )
    frames["runs"] = label_cells(frames["runs"], dirs)  # by what varies among the runs loaded together
    if "lineage.at_round" in frames["runs"]:  # int64, object (with runs that are no fork) or, cached, float64
        frames["runs"]["lineage.at_round"] = frames["runs"]["lineage.at_round"].astype("Int64")
    return Tables(root=root, cache_hits=hits, run_dirs=dirs, cache_dir=folder, stamps=stamps, **frames)

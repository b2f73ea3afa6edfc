"""A Parquet cache of per-run rows, kept per run but stored together.

Each cache folder holds one Parquet file per table (rows of many runs, tagged
``run_id``) and ``stamps.json``: for each run, the stamp its rows were built
from (file sizes and mtimes, versions). A run whose stamp changed is rebuilt
alone; the others are read back. Storing all runs in a few files, not a few
files per run, is what makes a warm load of 1,000 runs fast.

Writes are crash-safe: stamps go first to "none", the tables are replaced
atomically, then the stamps are written, so a torn write reads as a miss.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

Frames = dict[str, pd.DataFrame]


def _read(folder: Path, names: Iterable[str]) -> tuple[dict[str, object], Frames]:
    try:
        stamps = json.loads((folder / "stamps.json").read_text())
        return stamps, {n: pq.read_table(folder / f"{n}.parquet").to_pandas() for n in names}
    except (OSError, ValueError, pa.ArrowException):
        return {}, {}  # missing or damaged: everything is a miss


def _write(folder: Path, stamps: dict[str, object], frames: Frames) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "stamps.json").unlink(missing_ok=True)
    for name, df in frames.items():
        tmp = folder / f".{name}.parquet.tmp"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp)
        os.replace(tmp, folder / f"{name}.parquet")
    (folder / "stamps.json").write_text(json.dumps(stamps))


def cached_rows(
    folder: Path | None, names: tuple[str, ...], stamps: Mapping[str, object],
    build: Callable[[str], Frames],
) -> tuple[Frames, int]:  # fmt: skip
    """Frames for every run in ``stamps`` (in that order), and how many came from
    the cache. ``build(run_id)`` makes one run's frames on a miss. ``folder``
    None turns caching off."""
    old_stamps, old = _read(folder, names) if folder is not None else ({}, {})
    hits = [r for r in stamps if old_stamps.get(r) == stamps[r]]
    parts: dict[str, list[pd.DataFrame]] = {n: [] for n in names}
    if hits:
        for n in names:
            parts[n].append(old[n][old[n].run_id.isin(set(hits))])
    misses = [r for r in stamps if r not in set(hits)]
    for run_id in misses:
        built = build(run_id)
        for n in names:
            parts[n].append(built[n])
    frames = {n: _concat(parts[n]) for n in names}
    if folder is not None and (misses or set(old_stamps) != set(stamps)):
        _write(folder, {r: stamps[r] for r in stamps}, frames)
    order = {r: i for i, r in enumerate(stamps)}  # keep runs in discovery order
    for n in names:
        if not frames[n].empty:
            frames[n] = frames[n].sort_values(
                "run_id", key=lambda s: s.map(order), kind="stable", ignore_index=True
            )
    return frames, len(hits)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    non_empty = [f for f in frames if not f.empty]
    if non_empty:
        return pd.concat(non_empty, ignore_index=True)
    return frames[0].iloc[0:0].reset_index(drop=True) if frames else pd.DataFrame(columns=["run_id"])

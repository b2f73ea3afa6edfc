"""The analysis caches, under ``_analysis/cache/`` beside the runs.

``cached_rows``: a Parquet cache of per-run rows, kept per run but stored together.

Each cache folder holds one Parquet file per table (rows of many runs, tagged
``run_id``) and ``stamps.json``: for each run, the stamp its rows were built
from (file sizes and mtimes, versions). A run whose stamp changed is rebuilt
alone; the others are read back. Storing all runs in a few files, not a few
files per run, is what makes a warm load of 1,000 runs fast.

Writes are crash-safe: stamps go first to "none", the tables are replaced
atomically, then the stamps are written, so a torn write reads as a miss.

``VectorStore``: embeddings keyed by (model name, sha256 of the text), in one
SQLite file that processes analysing at once share (SQLite's locks and
journal make each write atomic). It holds at most ``max_rows`` vectors,
dropping the least recently used; a damaged file is deleted and rebuilt.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

Frames = dict[str, pd.DataFrame]
T = TypeVar("T")


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
    folder: Path | None,
    names: tuple[str, ...],
    stamps: Mapping[str, object],
    build: Callable[[str], Frames],
    prepare: Callable[[list[str]], None] | None = None,
) -> tuple[Frames, int]:
    """Frames for every run in ``stamps`` (in that order), and how many came from
    the cache. ``build(run_id)`` makes one run's frames on a miss; ``prepare``,
    if given, first sees every run that will be built (to batch their work).
    ``folder`` None turns caching off."""
    old_stamps, old = _read(folder, names) if folder is not None else ({}, {})
    hits = [r for r in stamps if old_stamps.get(r) == stamps[r]]
    order = {r: i for i, r in enumerate(stamps)}  # keep runs in discovery order
    if hits and len(hits) == len(old_stamps) == len(stamps) and all(_in_order(old[n], order) for n in names):
        return old, len(hits)  # an unchanged tree: the stored rows as they are
    parts: dict[str, list[pd.DataFrame]] = {n: [] for n in names}
    if hits:
        for n in names:
            parts[n].append(old[n][old[n].run_id.isin(set(hits))])
    misses = [r for r in stamps if r not in set(hits)]
    if prepare is not None and misses:
        prepare(misses)
    for run_id in misses:
        built = build(run_id)
        for n in names:
            parts[n].append(built[n])
    frames = {n: _concat(parts[n]) for n in names}
    for n in names:
        if not frames[n].empty:
            frames[n] = frames[n].sort_values(
                "run_id", key=lambda s: s.map(order), kind="stable", ignore_index=True
            )
    if folder is not None and (misses or set(old_stamps) != set(stamps)):
        _write(folder, {r: stamps[r] for r in stamps}, frames)  # sorted, so the next load takes them as is
    return frames, len(hits)


def _in_order(df: pd.DataFrame, order: Mapping[str, int]) -> bool:
    """Whether ``df``'s runs come in discovery order (each run's rows are contiguous)."""
    seen = [order.get(r, -1) for r in pd.unique(df.run_id)]
    return -1 not in seen and seen == sorted(seen)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    non_empty = [f for f in frames if not f.empty]
    if non_empty:
        return pd.concat(non_empty, ignore_index=True)
    return frames[0].iloc[0:0].reset_index(drop=True) if frames else pd.DataFrame(columns=["run_id"])


class VectorStore:
    """(model, key) -> float32 vector in the SQLite file ``path``."""

    def __init__(self, path: Path, max_rows: int = 100_000) -> None:
        self.path = path
        self.max_rows = max_rows

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60)  # a second writer waits for the first
        db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, key BLOB NOT NULL, vec BLOB NOT NULL,"
            " used REAL NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID"
        )
        return db

    def _run(self, op: Callable[[sqlite3.Connection], T], default: T) -> T:
        """``op`` in one transaction; a damaged file is rebuilt once, a busy one gives ``default``."""
        for attempt in (1, 2):
            db = None
            try:
                db = self._connect()
                with db:  # commits, or rolls back on an error
                    return op(db)
            except sqlite3.OperationalError as exc:  # locked past the timeout, disk full, read-only
                warnings.warn(f"{self.path}: embedding cache not used ({exc})", stacklevel=3)
                return default
            except sqlite3.DatabaseError:  # not a database, malformed: torn or overwritten
                if attempt == 2:
                    raise
                for suffix in ("", "-journal"):
                    Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            finally:
                if db is not None:
                    db.close()
        return default

    def get(self, model: str, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The stored vectors of those ``keys`` that are stored."""

        def op(db: sqlite3.Connection) -> dict[bytes, np.ndarray]:
            found: dict[bytes, np.ndarray] = {}
            for i in range(0, len(keys), 500):  # SQLite caps the parameters of one statement
                chunk = keys[i : i + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT key, vec FROM vectors WHERE model=? AND key IN ({marks})", [model, *chunk]
                )
                found.update((bytes(k), np.frombuffer(v, dtype=np.float32)) for k, v in rows)
            if found:
                db.executemany(
                    "UPDATE vectors SET used=? WHERE model=? AND key=?",
                    [(time.time(), model, k) for k in found],
                )
            return found

        return self._run(op, {})

    def put(self, model: str, vectors: Mapping[bytes, np.ndarray]) -> None:
        now = time.time()
        rows = [(model, k, np.asarray(v, dtype=np.float32).tobytes(), now) for k, v in vectors.items()]

        def op(db: sqlite3.Connection) -> None:
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)
            (count,) = db.execute("SELECT COUNT(*) FROM vectors").fetchone()
            if count > self.max_rows:
                db.execute(
                    "DELETE FROM vectors WHERE (model, key) IN"
                    " (SELECT model, key FROM vectors ORDER BY used LIMIT ?)",
                    (count - self.max_rows,),
                )

        self._run(op, None)

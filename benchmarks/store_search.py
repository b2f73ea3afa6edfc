"""Full-text search of the SQL store: index build and query time.

Makes N scripted runs (as ``store_build.py`` does: 3 drift runs of 2 rounds
for each panel run), builds the store cold, then times, side by side:

- the cold build, and the FTS5 index's own share of it (the same index
  rebuilt alone from its ``passages`` table);
- one run added to a built store (its passages appended; nothing rebuilt);
- ``harness.store.fts.search`` on a few queries (a common word, a phrase, a
  prefix, one kind only, a word that matches nothing), median of R calls each,
  opening the file each time as the CLI does. The goal is under 100 ms a query.

    .venv/bin/python benchmarks/store_search.py [--runs 1000] [--repeat 20] [--root DIR]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from store_build import make_runs  # noqa: E402

from harness.store.fts import search  # noqa: E402
from harness.store.sql import build_store  # noqa: E402

GOAL_S = 0.100
QUERIES = [
    ("a common word", "benefit", None),
    ("a phrase", '"weighs every evidence"', None),
    ("a prefix", "effic*", None),
    ("one kind only", "trust", "critique"),
    ("no match", "zzzunseen", None),
]


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def index_alone(db: Path) -> float:
    """Seconds to rebuild the FTS5 index from its content table (the index's share of a build)."""
    con = sqlite3.connect(db, isolation_level=None)
    try:
        started = time.perf_counter()
        con.execute("INSERT INTO passages_fts (passages_fts) VALUES ('rebuild')")
        return time.perf_counter() - started
    finally:
        con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--root", type=Path, help="make the runs here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="store-search-") as tmp:
        root = args.root or Path(tmp) / "runs"
        made_s = make_runs(root, args.runs - 1)
        print(f"made {args.runs - 1} scripted runs in {made_s:.1f} s; load {os.getloadavg()[0]:.2f}")
        started = time.perf_counter()
        report = build_store(root)
        cold_s = time.perf_counter() - started
        fts_s = index_alone(report.db)
        con = sqlite3.connect(report.db)
        passages = con.execute("SELECT count(*) FROM passages").fetchone()[0]
        con.close()
        make_runs(root / "added", 1)
        started = time.perf_counter()
        assert len(build_store(root).added) == 1
        one_s = time.perf_counter() - started
        print(f"  cold build:            {cold_s:8.3f} s   ({passages} passages)")
        print(f"  FTS5 index alone:      {fts_s:8.3f} s   ({fts_s / cold_s:.1%} of the cold build)")
        print(f"  one run added:         {one_s:8.3f} s   (cold / add-one: {cold_s / one_s:.0f}x)")
        for label, query, kind in QUERIES:
            found = search(report.db, query, kind=kind)
            med = timed(lambda q=query, k=kind: search(report.db, q, kind=k), args.repeat)
            print(
                f"  query, {label + ':':16} {med * 1e3:8.2f} ms  ({found.total} hits; "
                f"goal {GOAL_S * 1e3:.0f} ms: {med / GOAL_S:.2f}x of it)  {query}"
            )
        print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

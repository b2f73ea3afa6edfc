"""Loading 1,000 run folders: cold (parsing every JSONL record through
harness.store.records) against the per-run Parquet cache. Prints measured
figures and their ratio; asserts nothing.

    .venv/bin/python benchmarks/analysis_load.py [--runs 1000] [--rounds 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

from analysis import load_runs
from analysis.synthetic import write_run


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<40} {seconds:7.2f} s")
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-load-"))
    text = "Remote work saves hours of commuting, and the data suggests output holds up. " * 3
    for r in range(args.runs):
        write_run(
            root / f"run{r:04d}",
            [(k, t, f"{text} {r}.{k}") for k in range(1, args.rounds + 1) for t in ("pros", "cons")],
        )
    records = args.runs * args.rounds * 2 * 4
    print(f"{args.runs} run folders, {args.rounds} rounds each ({records:,} records)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a partial read would make the comparison meaningless
        first, _ = timed("cold, first read after writing", lambda: load_runs(root, cache=False))
        cold, _ = timed("cold (no cache), files in page cache", lambda: load_runs(root, cache=False))
        timed("first load, filling the cache", lambda: load_runs(root))
        warm, tables = timed("from the cache", lambda: load_runs(root))
    assert tables.cache_hits == args.runs
    print(f"cold / cached = {cold / warm:.1f}x (first read: {first / warm:.1f}x); "
          f"{len(tables.turns):,} turns, {len(tables.drafts):,} drafts")  # fmt: skip


if __name__ == "__main__":
    main()

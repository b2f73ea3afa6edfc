"""Re-analysing an unchanged tree, cold against cached.

1. Loading ``--runs`` run folders (default 300): cold (parsing every JSONL
   record through harness.store.records) against the per-run Parquet cache.
2. ``analyze`` of ``--analyse-runs`` runs of 200-word turns (no figures)
   with all-MiniLM-L6-v2, timed per stage (load, signals, the rest: scores,
   change points, trends, files): cold (no ``_analysis/``), again on the
   unchanged tree (every cache hits), and with the signals cache removed (as
   after a signals version bump), where every text comes from the embedding
   cache and the model is not called.

The model loads before any timing. Prints measured figures and their ratios;
asserts nothing. ``--quick`` is a short version (under a minute on 2 cores).

    .venv/bin/python benchmarks/analysis_load.py [--quick] [--runs 300] [--rounds 10] [--analyse-runs 10]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import matplotlib

import analysis.pipeline
from analysis import analyze, get_embedder, load_runs

# the run-folder writer is a test fixture, in tests/
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic import write_run  # noqa: E402


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<40} {seconds:7.2f} s")
    return seconds, result


class Stages:
    """Wall seconds spent in analyze's load and signals steps (wrapped by name)."""

    def __init__(self) -> None:
        self.seconds = {"load": 0.0, "signals": 0.0}
        for stage, name in (("load", "load_runs"), ("signals", "compute_signals")):
            setattr(analysis.pipeline, name, self._wrap(stage, getattr(analysis.pipeline, name)))

    def _wrap(self, stage, fn):  # type: ignore[no-untyped-def]
        def timed_fn(*args, **kwargs):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[stage] += time.perf_counter() - start

        return timed_fn

    def analyse(self, label: str, root: Path) -> float:
        self.seconds = dict.fromkeys(self.seconds, 0.0)
        start = time.perf_counter()
        analyze(root, figures=False, progress=False)
        total = time.perf_counter() - start
        load, signals = self.seconds["load"], self.seconds["signals"]
        print(
            f"{label:<40} {total:7.2f} s  (load {load:.2f}, signals {signals:.2f}, "
            f"rest {total - load - signals:.2f})"
        )
        return total


def write_tree(root: Path, runs: int, rounds: int, repeat: int = 3) -> None:
    """Turns of 13 words x ``repeat``, each made distinct by its run and round."""
    text = "Remote work saves hours of commuting, and the data suggests output holds up. " * repeat
    for r in range(runs):
        write_run(
            root / f"run{r:04d}",
            [(k, t, f"{text} {r}.{k}") for k in range(1, rounds + 1) for t in ("pros", "cons")],
        )


def reanalysis(runs: int, rounds: int) -> None:
    matplotlib.use("Agg")
    root = Path(tempfile.mkdtemp(prefix="bench-reanalyse-"))
    write_tree(root, runs, rounds, repeat=15)
    print(f"-- analyze, all-MiniLM-L6-v2, {runs} runs of {rounds} rounds, 200-word turns (no figures):")
    get_embedder().encode(["warm up"])  # the model loads outside the timing
    stages = Stages()
    warnings.filterwarnings("ignore", module="scipy")  # small-sample notes from the trend tests
    cold = stages.analyse("cold (no _analysis/)", root)
    cached = stages.analyse("unchanged tree, every cache hits", root)
    for folder in (root / "_analysis" / "cache").glob("signals-*"):
        shutil.rmtree(folder)
    embedded = stages.analyse("signals recomputed, embeddings cached", root)
    print(
        f"re-analysis cold / cached = {cold / cached:.1f}x; cold / embeddings cached = {cold / embedded:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--analyse-runs", type=int, default=10, help="runs analysed with MiniLM")
    parser.add_argument("--quick", action="store_true", help="100 runs loaded, 3 analysed")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.analyse_runs = 100, 3
    root = Path(tempfile.mkdtemp(prefix="bench-load-"))
    write_tree(root, args.runs, args.rounds)
    records = args.runs * args.rounds * 2 * 4
    print(f"{args.runs} run folders, {args.rounds} rounds each ({records:,} records)")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a partial read would make the comparison meaningless
        first, _ = timed("cold, first read after writing", lambda: load_runs(root, cache=False))
        cold, _ = timed("cold (no cache), files in page cache", lambda: load_runs(root, cache=False))
        timed("first load, filling the cache", lambda: load_runs(root))
        warm, tables = timed("from the cache", lambda: load_runs(root))
    assert tables.cache_hits == args.runs
    print(
        f"load cold / cached = {cold / warm:.1f}x (first read: {first / warm:.1f}x); "
        f"{len(tables.turns):,} turns, {len(tables.drafts):,} drafts"
    )
    reanalysis(args.analyse_runs, args.rounds)


if __name__ == "__main__":
    main()

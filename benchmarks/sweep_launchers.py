"""Sweep wall time under the basic launcher versus joblib, as the researcher
runs it: the real ``python -m harness.run -m ...`` command, end to end
(interpreter start, joblib's worker start-up and model loads included).

Two workloads, each a 4-cell grid (2 temperatures x 2 critics):

- ``scripted``: the scripted model with a fixed per-call latency, so the
  cells wait rather than compute; joblib with 2 workers should approach 2x
  (goal: >= 1.7x on 2 cores). Its fixed cost (driver start ~3 s, two workers
  importing the harness ~8 s on 2 cores) is why the cells run ~30 s each.
- ``smollm2``: the embedded SmolLM2 on llama.cpp under the thread rule
  (workers x threads <= cores: basic runs 1 cell with all cores, joblib runs
  2 cells with half the cores each). CPU-bound, so expect far less than 2x.

    python benchmarks/sweep_launchers.py scripted [--latency 0.12] [--rounds 40]
    python benchmarks/sweep_launchers.py smollm2 [--rounds 1] [--max-tokens 64] [key=value ...]

A real model's replies decide how many calls a cell makes (schema repairs,
critic iterations), and llama.cpp's output shifts with its thread count, so
for a like-for-like SmolLM2 figure fix the calls per cell:
``critic.max_iterations=1 structured.max_repairs=0`` (6 calls per cell).

Prints each launcher's wall time, the sweep span from the first cell's start
to the last cell's end, and the speedup. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.sweep.cell_status import read_cell_record
from harness.sweep.index import read_index

REPO = Path(__file__).resolve().parents[1]
GRID = ["llm.temperature=0.2,1.0", "critic=lenient,strict"]
LAUNCHERS = {"basic": [], "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]}


def run_sweep(overrides: list[str], launcher: list[str]) -> tuple[float, float]:
    """(wall seconds of the command, seconds from first cell start to last cell end)."""
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        cmd = [sys.executable, "-m", "harness.run", "-m", f"runs_root={tmp}", "progress=false"]
        env = {k: v for k, v in os.environ.items() if k != "DRIFT_WORKERS"}  # the callback sets it
        started = time.perf_counter()
        out = subprocess.run(
            [*cmd, *overrides, *GRID, *launcher], cwd=REPO, env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - started
        if out.returncode != 0:
            sys.exit(f"sweep failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        (sweep_dir,) = Path(tmp).glob("sweep-*")
        records = [read_cell_record(sweep_dir, c.name) for c in read_index(sweep_dir).cells]
        starts = [r.started_at for r in records if r]
        ends = [r.ended_at for r in records if r and r.ended_at]
        return wall, (max(ends) - min(starts)).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload", choices=["scripted", "smollm2"])
    parser.add_argument("--latency", type=float, default=0.12, help="scripted: seconds per model call")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per cell (40 scripted, 1 smollm2)")
    parser.add_argument("--max-tokens", type=int, default=64, help="smollm2: llm.max_tokens")
    parser.add_argument(
        "overrides", nargs="*", help="more overrides for every cell, e.g. critic.max_iterations=1"
    )
    args = parser.parse_args()
    if args.workload == "scripted":
        rounds = args.rounds or 40
        overrides = ["model=scripted", f"model.latency_s={args.latency}", f"rounds={rounds}"]
    else:
        rounds = args.rounds or 1
        overrides = ["model=smollm2", f"rounds={rounds}", f"llm.max_tokens={args.max_tokens}"]
    overrides += args.overrides
    print(f"4 cells ({' x '.join(GRID)}), {' '.join(overrides)}, {os.cpu_count()} cores")
    walls = {}
    for name, launcher in LAUNCHERS.items():
        wall, span = run_sweep(overrides, launcher)
        walls[name] = wall
        print(f"  {name:<7} wall {wall:7.1f} s   cells span {span:7.1f} s", flush=True)
    print(f"  speedup joblib(2) over basic: {walls['basic'] / walls['joblib']:.2f}x")


if __name__ == "__main__":
    main()

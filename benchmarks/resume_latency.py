"""Resume latency: time from ``resume_run`` starting to its first new model
call (the scripted model has no load time), for runs stopped after round 5
and after round 500, plus snapshot bytes per round at both points.

Each run is made by a real debate on the zero-latency scripted model, then
left as ``kill -9`` leaves it (status ``running``, the round in flight lost),
and resumed with one more round to go. Figures are printed side by side;
nothing is asserted.

    python benchmarks/resume_latency.py [--rounds 5 500] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import run_debate
from harness.models.scripted import ScriptedModel
from harness.resume import resume_run
from harness.store.memory import RunMemory
from harness.store.snapshot import snapshot_path

CONF = Path(__file__).resolve().parents[1] / "conf"


def make_run(root: Path, rounds: int) -> Path:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", [f"rounds={rounds}", "model=scripted", f"runs_root={root}", "progress=false"])
    raw = OmegaConf.to_container(cfg, resolve=True)
    return run_debate(resolve(cfg), raw).run_dir  # type: ignore[arg-type]


def as_killed(run_dir: Path) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))


def time_to_first_call(run_dir: Path, rounds: int) -> float:
    """Seconds from resume_run() to the first model call; the call then aborts."""
    started = time.perf_counter()
    seen: list[float] = []
    original = ScriptedModel.complete

    def first_call(self, request):  # type: ignore[no-untyped-def]
        seen.append(time.perf_counter() - started)
        raise KeyboardInterrupt  # stop here: we only time the way in

    ScriptedModel.complete = first_call  # type: ignore[method-assign]
    try:
        resume_run(run_dir, overrides=[f"rounds={rounds + 1}"])
    except KeyboardInterrupt:
        pass
    finally:
        ScriptedModel.complete = original  # type: ignore[method-assign]
    return seen[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, nargs="+", default=[5, 500])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="resume-bench-"))
    rows = []
    try:
        for rounds in args.rounds:
            t0 = time.perf_counter()
            run_dir = make_run(root / str(rounds), rounds)
            made = time.perf_counter() - t0
            times = []
            for _ in range(args.repeats):
                as_killed(run_dir)
                times.append(time_to_first_call(run_dir, rounds))
            t0 = time.perf_counter()
            RunMemory.of_run(run_dir)  # for contrast: loading every log from the start
            full_load = time.perf_counter() - t0
            snap = snapshot_path(run_dir, rounds).stat().st_size
            folder = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
            rows.append((rounds, statistics.median(times), min(times), full_load, snap, folder, made))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{'stopped after':>14} {'resume->1st call (median)':>26} {'(min)':>8} "
        f"{'full log load':>14} {'snapshot bytes':>15} {'folder MB':>10} {'made in':>8}"
    )
    for r, med, low, full, snap, folder, made in rows:
        print(
            f"{r:>14} {med * 1000:>23.1f} ms {low * 1000:>5.1f} ms {full * 1000:>11.1f} ms "
            f"{snap:>15} {folder / 1e6:>10.2f} {made:>7.1f}s"
        )
    if len(rows) >= 2:
        print(
            f"ratio of resume latency, round {rows[-1][0]} / round {rows[0][0]}: {rows[-1][1] / rows[0][1]:.2f}x"
        )
        print(f"snapshot bytes, round {rows[-1][0]} / round {rows[0][0]}: {rows[-1][4] / rows[0][4]:.3f}x")


if __name__ == "__main__":
    sys.exit(main())

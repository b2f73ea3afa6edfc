"""Harness overhead per model call, early and late in one long debate.

Runs a debate (the drift format, or with ``--format panel`` a panel with the
judge off, so it runs every round) on the zero-latency scripted model for
LATE+HALF+1 rounds and times every model call. A round's overhead per call
is the time the round took minus the time spent inside the model, divided by
its calls: memory appends and fsyncs, prompt building, validation, the graph,
snapshots. Each figure is the median over the rounds in a window centred on
round EARLY or round LATE, so both come from the same run and a stray slow
fsync does not decide them; the goal is late/early <= 1.2.

Wall time includes waiting on the disk (fsync) and on other processes; CPU
time (this process only) does not, so it shows growth in the harness's own
work even on a busy machine. Both are printed, for runs as they are and for
runs with fsync made a no-op (which takes the shared disk's latency, the
noisiest part on a busy machine, out of the wall figure).

It also reports the run folder's bytes per round at both points: the bytes
that round added, and the folder's average so far.

Then memory: one more run per path, each in a child process of its own (so
no run's peak is another's), with fsync on, as run, and prompts logged
(``memory.log_prompts`` as configured: true). The child reads its peak RSS
(``VmHWM``) as rounds 100, 1,000 and LATE begin (those the run reaches): a
peak so far, so the figure at round N is the peak of a run of N rounds.
Beside it, from the same run, the overhead per call at round EARLY and at
round LATE. The paths: logs that keep the format's window of rounds in
memory (as run), and every record kept (the harness before logs evicted;
``--keep-all-rounds`` caps that run, 1,000 by default, 0 skips it). Goals:
peak at LATE <= 1.2x the peak at round 1,000, overhead at LATE <= 1.2x at EARLY.

    .venv/bin/python benchmarks/overhead.py [--format drift|panel] [--early 10] [--late 200] [--repeats 3]
    .venv/bin/python benchmarks/overhead.py --late 10000    # the long run: memory section only

A LATE over 1,000 skips the repeated runs (``--repeats`` 0 unless given):
each is as long as the memory run, and there are six of them.

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import run_debate
from harness.models import build_model
from harness.models.base import ChatModel, Completion, ModelRequest
from harness.schema import ModelConfig

CONF = Path(__file__).resolve().parents[1] / "conf"
ENGINE: Any = importlib.import_module("harness.engine.execute")  # the module; the package exports a function
# what each format needs on top of the scripted model; the panel runs every round
FORMATS = {"drift": [], "panel": ["format=panel", "format.judge=false"]}


MEMORY_MARKS = (100, 1000)  # rounds at whose start the peak RSS is read, besides LATE


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def peak_rss_kb() -> int:
    """This process's peak resident set so far (VmHWM), in KiB."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))


@dataclass
class Probe:
    """Shared by every wrapped model: call times per round, folder sizes."""

    watch: set[int]  # rounds at whose first call the folder is measured
    runs_root: Path  # holds this run's folder only
    model_wall: dict[int, float] = field(default_factory=dict)  # round -> seconds inside the model
    model_cpu: dict[int, float] = field(default_factory=dict)
    ncalls: dict[int, int] = field(default_factory=dict)
    first_call: dict[int, tuple[float, float]] = field(default_factory=dict)  # wall, cpu clocks
    sizes: dict[int, int] = field(default_factory=dict)  # round -> bytes before it
    walks: dict[int, float] = field(default_factory=dict)  # round -> seconds spent measuring
    marks: set[int] = field(default_factory=set)  # rounds at whose first call the peak RSS is read
    peaks: dict[int, int] = field(default_factory=dict)  # round -> peak RSS (KiB) before it

    def before(self, round_: int) -> None:
        if round_ in self.first_call:
            return
        if round_ in self.marks:
            self.peaks[round_] = peak_rss_kb()
        self.first_call[round_] = (time.perf_counter(), time.process_time())
        if round_ in self.watch:
            started = time.perf_counter()
            self.sizes[round_] = folder_bytes(self.runs_root)
            self.walks[round_] = time.perf_counter() - started


class Timed:
    """A ChatModel wrapper that reports each call to the probe."""

    def __init__(self, inner: ChatModel, probe: Probe) -> None:
        self.inner, self.probe, self.spec = inner, probe, inner.spec

    def complete(self, request: ModelRequest) -> Completion:
        round_ = int(request.tags.get("round", 0))
        self.probe.before(round_)
        wall, cpu = time.perf_counter(), time.process_time()
        out = self.inner.complete(request)
        p = self.probe
        p.model_wall[round_] = p.model_wall.get(round_, 0.0) + time.perf_counter() - wall
        p.model_cpu[round_] = p.model_cpu.get(round_, 0.0) + time.process_time() - cpu
        p.ncalls[round_] = p.ncalls.get(round_, 0) + 1
        return out

    def model_files(self) -> dict[str, str]:
        return self.inner.model_files()


def window_overhead(probe: Probe, first: int, last: int) -> tuple[float, float]:
    """Median over rounds first..last of harness seconds per call: (wall, cpu)."""
    walls, cpus = [], []
    for r in range(first, last + 1):
        (w0, c0), (w1, c1) = probe.first_call[r], probe.first_call[r + 1]
        walk = probe.walks.get(r, 0.0)  # measuring the folder is not harness work
        walls.append((w1 - w0 - walk - probe.model_wall[r]) / probe.ncalls[r])
        cpus.append((c1 - c0 - walk - probe.model_cpu[r]) / probe.ncalls[r])
    return statistics.median(walls), statistics.median(cpus)


def one_run(
    early: int,
    late: int,
    half: int,
    runs_root: Path,
    fsync: bool = True,
    fmt: str = "drift",
    marks: tuple[int, ...] = (),
    keep_all: bool = False,
) -> dict[str, Any]:
    """One timed run; ``marks``: rounds to read the peak RSS at; ``keep_all``:
    every log keeps every record in memory (no ``keep_rounds``)."""
    rounds = late + half + 1
    probe = Probe(watch={early, early + 1, late, late + 1}, runs_root=runs_root, marks=set(marks))

    def build(model_cfg: ModelConfig) -> ChatModel:
        return Timed(build_model(model_cfg), probe)

    real_fsync, real_memory = os.fsync, ENGINE.RunMemory
    if not fsync:
        os.fsync = lambda fd: None
    if keep_all:
        ENGINE.RunMemory = lambda *a, keep_rounds=None, **k: real_memory(*a, **k)
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(
                "config",
                overrides=[
                    "model=scripted",
                    *FORMATS[fmt],
                    f"rounds={rounds}",
                    f"runs_root={runs_root}",
                    "progress=false",
                ],
            )
        raw: Any = OmegaConf.to_container(cfg, resolve=True)
        started = time.perf_counter()
        result = run_debate(resolve(cfg), raw, build=build)
        total_s = time.perf_counter() - started
    finally:
        os.fsync, ENGINE.RunMemory = real_fsync, real_memory
    assert result.manifest.status == "completed"
    early_wall, early_cpu = window_overhead(probe, early - half, early + half)
    late_wall, late_cpu = window_overhead(probe, late - half, late + half)
    return {
        "early_us": early_wall * 1e6,
        "late_us": late_wall * 1e6,
        "ratio": late_wall / early_wall,
        "early_cpu_us": early_cpu * 1e6,
        "late_cpu_us": late_cpu * 1e6,
        "cpu_ratio": late_cpu / early_cpu,
        "calls_per_round": statistics.mean(n for r, n in probe.ncalls.items() if r >= 1),
        "early_round_bytes": probe.sizes[early + 1] - probe.sizes[early],
        "late_round_bytes": probe.sizes[late + 1] - probe.sizes[late],
        "early_avg_bytes": probe.sizes[early + 1] / early,
        "late_avg_bytes": probe.sizes[late + 1] / late,
        "total_s": total_s,
        "rounds": rounds,
        "peaks_kb": probe.peaks,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", choices=sorted(FORMATS), default="drift")
    parser.add_argument("--early", type=int, default=10)
    parser.add_argument("--late", type=int, default=200)
    parser.add_argument("--half", type=int, default=5, help="window = round +- half")
    parser.add_argument("--repeats", type=int, default=None, help="3, or 0 for a LATE over 1,000")
    parser.add_argument("--keep-all-rounds", type=int, default=1000, help="cap on the keep-all run (0: none)")
    parser.add_argument(
        "--no-fsync", action="store_true", help="memory runs: fsync a no-op (quicker on a busy disk)"
    )
    args = parser.parse_args(argv)
    if args.early - args.half < 1 or args.late <= args.early:
        parser.error("need 1 <= early - half and early < late")
    if args.repeats is None:
        args.repeats = 3 if args.late <= 1000 else 0
    if args.repeats:
        measure(args, args.format, report)
    footprint(args)


def measure(
    args: argparse.Namespace,
    fmt: str,
    show: Callable[[list[dict[str, float]], argparse.Namespace, str], None],
) -> None:
    """``args.repeats`` runs of ``fmt`` with fsync on, then off; ``show`` prints each set."""
    load_before = os.getloadavg()[0]
    for fsync in (True, False):
        with tempfile.TemporaryDirectory(prefix=f"{fmt}-overhead-") as tmp:
            runs = [
                one_run(args.early, args.late, args.half, Path(tmp) / f"runs-{i}", fsync, fmt)
                for i in range(args.repeats)
            ]
        show(runs, args, "fsync on (as run)" if fsync else "fsync off (disk latency removed)")
    print(f"  load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def report(runs: list[dict[str, float]], args: argparse.Namespace, label: str) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    e, l_ = args.early, args.late
    model = (
        "scripted model" if args.format == "drift" else f"{args.format} format (judge off), scripted model"
    )
    print(
        f"{label}: {model}, latency 0, {runs[0]['rounds']:.0f} rounds x {args.repeats} runs "
        f"(median), windows: rounds {e}+-{args.half} and {l_}+-{args.half}; "
        f"{med('calls_per_round'):.1f} model calls per round"
    )
    print(
        f"  harness overhead per model call, wall  round {e}: {med('early_us'):7.0f} us   "
        f"round {l_}: {med('late_us'):7.0f} us   ratio {l_}/{e}: {med('late_us') / med('early_us'):.2f}x (goal <= 1.2x)"
    )
    print(
        f"  harness overhead per model call, CPU   round {e}: {med('early_cpu_us'):7.0f} us   "
        f"round {l_}: {med('late_cpu_us'):7.0f} us   ratio {l_}/{e}: {med('late_cpu_us') / med('early_cpu_us'):.2f}x"
    )
    ratios = ", ".join(f"{r['ratio']:.2f} wall / {r['cpu_ratio']:.2f} CPU" for r in runs)
    print(f"    per-run ratios: {ratios}")
    print(
        f"  run-folder bytes added by the round    round {e}: {med('early_round_bytes'):8.0f} B    "
        f"round {l_}: {med('late_round_bytes'):8.0f} B"
    )
    print(
        f"  run-folder bytes per round, average    round {e}: {med('early_avg_bytes'):8.0f} B    "
        f"round {l_}: {med('late_avg_bytes'):8.0f} B"
    )
    print(f"  whole run: {med('total_s'):.1f} s wall")


def in_child(**kwargs: Any) -> dict[str, Any]:
    """``one_run`` in a fresh process, so its peak RSS is its own."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(one_run, **kwargs).result()


def footprint(args: argparse.Namespace) -> None:
    """Peak memory and overhead per call, from one run per path, side by side."""
    load_before = os.getloadavg()[0]
    paths = [("window (as run)", args.late, False)]
    if args.keep_all_rounds > args.early + args.half:  # the shorter run first: its line prints sooner
        paths.insert(0, ("keep-all (before)", min(args.late, args.keep_all_rounds), True))
    marks = sorted({*(m for m in MEMORY_MARKS if m < args.late), args.late})
    fsync = "off" if args.no_fsync else "on"
    print(
        f"memory: {args.format}, scripted model, fsync {fsync}, memory.log_prompts=true; one child "
        f"process per path; peak RSS (VmHWM) as the round begins",
        flush=True,
    )
    header = "".join(f"{'round ' + str(m):>13}" for m in marks)
    print(
        f"  {'path':<18}{header}   {'peak growth':>19}   overhead/call round {args.early}"
        f"   round LATE   ratio   run"
    )
    for label, late, keep_all in paths:
        with tempfile.TemporaryDirectory(prefix=f"{args.format}-memory-") as tmp:
            r = in_child(
                early=args.early,
                late=late,
                half=args.half,
                runs_root=Path(tmp) / "runs",
                fsync=not args.no_fsync,
                fmt=args.format,
                marks=tuple(m for m in marks if m <= late),
                keep_all=keep_all,
            )
        peaks = {m: kb / 1024 for m, kb in r["peaks_kb"].items()}
        cells = "".join(f"{f'{peaks[m]:.1f} MB' if m in peaks else '-':>13}" for m in marks)
        got = sorted(peaks)
        growth = f"{peaks[got[-1]] / peaks[got[-2]]:.2f}x ({got[-1]}/{got[-2]})" if len(got) > 1 else "-"
        print(
            f"  {label:<18}{cells}   {growth:>19}   {r['early_us']:11.0f} us   round {late}: "
            f"{r['late_us']:6.0f} us   {r['ratio']:.2f}x   {r['total_s']:.0f} s"
            f"  (CPU {r['early_cpu_us']:.0f} -> {r['late_cpu_us']:.0f} us, {r['cpu_ratio']:.2f}x)",
            flush=True,
        )
    print(
        f"  goals: peak at round {marks[-1]} <= 1.2x the peak at round {marks[-2] if len(marks) > 1 else '-'}; "
        f"overhead at round {args.late} <= 1.2x round {args.early}"
    )
    print(f"  load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

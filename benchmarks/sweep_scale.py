"""Sweeps of many cells: what the harness itself costs as a sweep grows.

Runs one N-cell scripted sweep (``model=scripted rounds=2 replicates=N``, so
the cells differ only in seed) under the basic launcher and one under joblib
(2 workers), each as the real ``python -m harness.run -m ...`` command, and
prints:

- planning: Hydra's sweep expansion plus the harness's cell plan, timed
  in-process, and the wall time from the command's start to the first cell's;
- the index: how many full rewrites of ``sweep.json`` the driver made, their
  bytes and seconds, and its seconds reading the cells' states (the driver
  writes these to ``DRIFT_SWEEP_STATS`` when the sweep ends);
- ``python -m harness.sweep status`` latency, on the finished sweep and, for
  the basic launcher, on the sweep killed part-way (goal: < 1 s at 1,000 cells);
- resume: the basic sweep is SIGKILLed once ``--kill-at`` cells (default N/2)
  are done, then ``python -m harness.sweep resume`` is timed to the end, and
  the index is checked: N cells, N distinct names, all completed, one run
  folder each;
- ``python -m harness.store`` build time and ``analysis.load_runs`` time
  (tables only, no cache) over the finished sweep;
- per-cell overhead: the median gap between consecutive cell starts (from
  the cell log) in a window of cells (10 at 100 cells, 50 at 1,000) near
  cell 10 and near cell N (and, for basic, just before the kill), and the
  median time inside each of those cells
  (the harness and its 2-round debate; the rest of the gap is Hydra composing
  the job's config); goal: the ratio at N over 10 <= 1.2. With a kill, the
  cells near N ran in the resumed process.

    python benchmarks/sweep_scale.py                 # 100 cells
    python benchmarks/sweep_scale.py --full          # 1,000 cells
    python benchmarks/sweep_scale.py --quick         # 30 cells: a smoke run (make bench)
    python benchmarks/sweep_scale.py --cells 500 --launchers basic

The in-process launcher (``sweep.concurrency=N``, every cell in flight at
once unless ``--concurrency`` says fewer) runs API-like cells instead:
``rounds=1`` and ``model.latency_s`` (``--latency``, default 1 s a call), so
that its cells wait rather than compute. It runs two sweeps: one fresh to
the end, and one SIGKILLed once half its cells have started, then resumed.
For each launch (one driver process) it prints when its first cell started
after the command, how long after the first its last one started, and the
median gap between cell starts near that launch's 10th, 100th and last
start; goals: first start within 5 s, last / 10th <= 1.2. (All cells share
the driver's GIL: each new cell's start competes with the setup, ~0.1 s of
CPU, of the cells started before it, so the first few start faster than
the rest; last / 100th is printed too.) Then the index check, and the
driver's CPU seconds per cell. With
``--starts-only`` each launch (the fresh one, then its resume of every cell)
is SIGKILLed once all its cells have started; give a ``--latency`` longer
than a launch, and the gaps are the launcher's and each cell's setup alone,
without the debates' CPU.

    python benchmarks/sweep_scale.py --full --launchers inprocess
    python benchmarks/sweep_scale.py --full --launchers inprocess --starts-only --latency 600

Nothing is asserted except the index check after the resume.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.sweep.cell_status import CellEvent

REPO = Path(__file__).resolve().parents[1]
LAUNCHERS = {"basic": [], "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"], "inprocess": []}
WINDOW = 10


def environment(stats: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DRIFT_WORKERS"}  # the callback sets it
    return {**env, "DRIFT_SWEEP_STATS": str(stats)}


def sweep_command(runs_root: Path, cells: int, launcher: str, extra: list[str] | None = None) -> list[str]:
    """The sweep; ``extra`` replaces ``rounds=2`` (the in-process launcher's API-like cells)."""
    return [
        sys.executable,
        "-m",
        "harness.run",
        "-m",
        f"runs_root={runs_root}",
        "model=scripted",
        "progress=false",
        *(extra or ["rounds=2"]),
        f"replicates={cells}",
        *LAUNCHERS[launcher],
    ]


def planning_s(cells: int) -> float:
    """In-process: Hydra's expansion of ``replicate=0,...,N-1`` into jobs, named and checked."""
    from harness.sweep.grid import plan_cells

    started = time.perf_counter()
    plan_cells(["model=scripted", "rounds=2", "replicate=" + ",".join(map(str, range(cells)))])
    return time.perf_counter() - started


def index_tick(cells: int, tmp: Path) -> str:
    """In-process, no debates: what the driver's once-a-second look at the index costs at
    ``cells`` cells, all ended. Before the cell log: read every cell's status file and
    manifest, then rewrite sweep.json; now: read the log's new line, replay, and rewrite
    sweep.json only every ``cells / COMPACTIONS`` events (its cost shared among them)."""
    from harness.sweep.callback import IndexKeeper
    from harness.sweep.cell_status import EVENTS_JSONL, CellRecord, write_cell_record
    from harness.sweep.grid import plan_cells
    from harness.sweep.index import INDEX_COST, SweepIndex, refresh_index, write_index

    sweep_dir = tmp / "index-tick"
    sweep_dir.mkdir()
    plan = plan_cells(["replicate=" + ",".join(map(str, range(cells)))])
    index = SweepIndex(name="tick", launcher="basic", task_overrides=[], hydra_overrides=[], cells=plan)
    for cell in plan:
        write_cell_record(sweep_dir, cell.name, CellRecord(status="completed", rounds=2).with_counts(None))
    write_index(sweep_dir, index, parquet=False)
    started = time.process_time()
    write_index(sweep_dir, refresh_index(sweep_dir, index, final=False), parquet=False)
    old = time.process_time() - started
    keeper = IndexKeeper(sweep_dir, index)
    keeper.tick()  # the log so far
    written, new = INDEX_COST.bytes, 0.0
    for _ in range(keeper.every):  # one compaction's worth of ticks, one new event each
        write_cell_record(sweep_dir, plan[0].name, CellRecord(status="completed", rounds=2).with_counts(None))
        started = time.process_time()
        keeper.tick()
        new += time.process_time() - started
    new /= keeper.every
    per_tick = (INDEX_COST.bytes - written) / keeper.every  # sweep.json only
    status_cmd = [sys.executable, "-m", "harness.sweep", "status", str(sweep_dir)]
    log_status = timed(status_cmd)[0]
    (sweep_dir / EVENTS_JSONL).rename(sweep_dir / "aside.jsonl")  # status falls back to every cell's files
    walk_status = timed(status_cmd)[0]
    print(
        f"status at {cells} cells (no run folders): reading every cell's files {walk_status}, the log {log_status}"
    )
    return (
        f"index tick at {cells} cells, cpu: before {old * 1000:.0f} ms ({len(index.model_dump_json(indent=2)) / 1e3:.0f} kB "
        f"rewritten), now {new * 1000:.1f} ms ({per_tick / 1e3:.1f} kB of sweep.json on average)"
    )


def cells_started(runs_root: Path) -> int:
    """Cells whose status file exists (cheap: one directory listing, no reads)."""
    found = list(runs_root.glob("sweep-*/cells"))
    return sum(1 for e in os.scandir(found[0]) if e.name.endswith(".json")) if found else 0


def run_sweep(
    runs_root: Path,
    cells: int,
    launcher: str,
    stats: Path,
    kill_at: int | None,
    extra: list[str] | None = None,
) -> float:
    """Start the sweep; SIGKILL it once more than ``kill_at`` cells have started (basic runs one
    cell at a time, so ``kill_at`` are done). Returns the start time (epoch)."""
    started = time.time()
    proc = subprocess.Popen(
        sweep_command(runs_root, cells, launcher, extra),
        cwd=REPO,
        env=environment(stats),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if kill_at is None:
        _, err = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"{launcher} sweep failed ({proc.returncode}):\n{err[-2000:]}")
        return started
    while proc.poll() is None and cells_started(runs_root) <= kill_at:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return started


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], stats: Path | None = None) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Run ``cmd``; "<wall> s (cpu <user+sys> s)": on a shared machine the CPU seconds are steadier."""
    env = environment(stats) if stats else {k: v for k, v in os.environ.items() if k != "DRIFT_WORKERS"}
    started, cpu = time.perf_counter(), children_cpu_s()
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    return f"{time.perf_counter() - started:.2f} s (cpu {children_cpu_s() - cpu:.2f} s)", out


def status_s(sweep_dir: Path) -> str:
    """The median of three ``python -m harness.sweep status`` calls (interpreter start included)."""
    cmd = [sys.executable, "-m", "harness.sweep", "status", str(sweep_dir)]
    return sorted(timed(cmd)[0] for _ in range(3))[1]


def cell_events(sweep_dir: Path) -> list[CellEvent]:
    """The cell log (``cells.jsonl``), which keeps every status write. Not the status
    files: a resume rewrites a finished cell's file with a ``skip`` record stamped at
    the resume, which would mix skips in with the cells that ran."""
    from harness.sweep.cell_status import EVENTS_JSONL, CellEvent

    lines = (sweep_dir / EVENTS_JSONL).read_text().splitlines()
    return [CellEvent.model_validate_json(line) for line in lines]


def window(cells: int) -> int:
    """Cells per window: 10 at 100 cells, 50 at 1,000. A shared machine has slow
    stretches of a few dozen cells; a wider window and its median ride them out."""
    return max(WINDOW, min(50, cells // 20))


def starts(events: list[CellEvent]) -> list[datetime]:
    """When each launch began working on a cell (a resumed cell has two starts)."""
    return sorted(e.started_at for e in events if e.status == "running")


def inside_s(ran: list[CellEvent], around: int, width: int) -> float:
    """Median seconds inside ``run_cell`` (the harness and the 2-round debate) over the
    ``width`` cells that ran, in start order, ending at ``around``: the rest of a gap is
    Hydra's (composing the job's config, setting up its job)."""
    end = min(max(around, width), len(ran))
    return statistics.median((e.ended_at - e.started_at).total_seconds() for e in ran[end - width : end])


def gap_s(times: list[datetime], around: int, width: int) -> float:
    """Median seconds between consecutive cell starts over the ``width`` gaps ending at ``around``."""
    end = min(max(around, width + 1), len(times))
    starts = times[end - width - 1 : end]
    return statistics.median((b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False))


def check_index(sweep_dir: Path, cells: int) -> str:
    from harness.sweep.index import read_index

    index = read_index(sweep_dir)
    names = [c.name for c in index.cells]
    done = sum(c.status == "completed" for c in index.cells)
    folders = sum(1 for n in names if (sweep_dir / n / "manifest.json").is_file())
    ok = len(names) == len(set(names)) == cells == done == folders
    bad = next((f"; {c.name} {c.status}: {c.error}" for c in index.cells if c.status != "completed"), "")
    return f"{'ok' if ok else 'WRONG'}: {len(names)} cells, {len(set(names))} names, {done} completed, {folders} run folders{bad}"


def report_index(label: str, stats: Path) -> None:
    if not stats.is_file():
        print(f"  {label}: no index stats (the driver did not reach the end)")
        return
    s = json.loads(stats.read_text())
    print(
        f"  index ({label}): {s['writes']} full rewrites, {s['bytes'] / 1e6:.1f} MB, {s['write_s']:.2f} s "
        f"writing; {s['refreshes']} reads of every cell, {s['refresh_s']:.2f} s"
    )


def bench(launcher: str, cells: int, kill_at: int | None, tmp: Path) -> None:
    runs_root, stats = tmp / launcher, tmp / f"{launcher}-stats.json"
    print(f"{launcher}: {cells} cells" + (f", killed after {kill_at}" if kill_at else ""), flush=True)
    began = run_sweep(runs_root, cells, launcher, stats, kill_at)
    (sweep_dir,) = runs_root.glob("sweep-*")
    first = starts(cell_events(sweep_dir))[0].timestamp() - began
    print(f"  first cell started {first:.2f} s after the command", flush=True)
    if kill_at is not None:
        print(f"  status, killed part-way: {status_s(sweep_dir)}", flush=True)
        resume_s, out = timed([sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)], stats)
        print(f"  resume to the end: {resume_s} (exit {out.returncode}); {out.stdout.splitlines()[0]}")
    total = time.time() - began
    print(f"  index check: {check_index(sweep_dir, cells)}")
    report_index("resume" if kill_at else "sweep", stats)
    print(f"  status, finished: {status_s(sweep_dir)}", flush=True)
    events = cell_events(sweep_dir)
    times = starts(events)
    ran = sorted((e for e in events if e.action != "skip" and e.ended_at), key=lambda e: e.started_at)
    near = [10, *([kill_at] if kill_at else []), cells]
    width = window(cells)
    gaps = {n: gap_s(times, n, width) for n in near}
    shown = "  ".join(f"near {n}: {g:.3f}" for n, g in gaps.items())
    print(
        f"  s between cell starts (median of {width}), {shown}  ->  {cells} / 10: {gaps[cells] / gaps[10]:.2f}x"
    )
    inside = {n: inside_s(ran, n, width) for n in near}
    shown = "  ".join(f"near {n}: {g:.3f}" for n, g in inside.items())
    print(
        f"  s inside each cell (harness + debate), {shown}  ->  {cells} / 10: {inside[cells] / inside[10]:.2f}x"
    )
    store_s, out = timed(
        [sys.executable, "-m", "harness.store", str(sweep_dir), "--db", str(tmp / f"{launcher}.sqlite")]
    )
    print(f"  harness.store build: {store_s} ({out.stdout.splitlines()[0] if out.stdout else out.stderr})")
    from analysis.load import load_runs

    started, cpu = time.perf_counter(), time.process_time()
    tables = load_runs(sweep_dir, cache=False)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(f"  analysis.load_runs: {wall:.1f} s (cpu {cpu:.1f} s, {len(tables.runs)} runs)")
    print(f"  wall, sweep to status: {total:.0f} s", flush=True)


def launches(events: list[CellEvent]) -> list[list[datetime]]:
    """Each launch's cell starts, in order; a launch is one driver process (its pid),
    whose cells are its threads."""
    by_pid: dict[int, list[datetime]] = {}
    for event in sorted(events, key=lambda e: e.started_at):
        if event.status == "running":
            by_pid.setdefault(event.pid, []).append(event.started_at)
    return list(by_pid.values())


def launch_line(label: str, times: list[datetime], began: float) -> str:
    """First start after the command, the last start after the first, and median start
    gaps near the 10th, 100th and last start: their ratios to the last (the goal is
    on last / 10th; last / 100th leaves out the first cells, which start before the
    setup of those before them has the GIL busy)."""
    width = window(len(times))
    near = sorted({min(n, len(times)) for n in (10, 100, len(times))})
    gaps = {n: gap_s(times, n, width) for n in near}
    shown = "  ".join(f"near {n}: {g * 1000:.1f} ms" for n, g in gaps.items())
    ratios = " and ".join(f"{gaps[near[-1]] / gaps[n]:.2f}x" for n in near[:-1] if gaps[n])
    return (
        f"  {label}: {len(times)} starts, first {times[0].timestamp() - began:.2f} s after the command, "
        f"last {(times[-1] - times[0]).total_seconds():.0f} s after the first; start gaps (median of "
        f"{width}) {shown}  ->  last / 10th and / 100th: {ratios}; load {load()}"
    )


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def started(runs_root: Path) -> int:
    """Cell starts in the sweep's cell log so far, every launch's (counted, not parsed)."""
    logs = list(runs_root.glob("sweep-*/cells.jsonl"))
    return logs[0].read_bytes().count(b'"status":"running"') if logs else 0


def run_until_started(cmd: list[str], runs_root: Path, starts: int) -> float:
    """Run ``cmd`` (a sweep or its resume) and SIGKILL it and its children once the
    cell log holds ``starts`` starts. Returns when it began (epoch)."""
    began = time.time()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=environment(runs_root / "stats.json"),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while proc.poll() is None and started(runs_root) < starts:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return began


def bench_starts(cells: int, extra: list[str], tmp: Path) -> None:
    """Starts only: a launch killed once every cell has started, then its resume (every
    cell resumed) killed alike. Cells wait on their first call meanwhile, so the gaps
    are the launcher's and each cell's setup, not the debates'."""
    runs_root = tmp / "inprocess-starts"
    began = run_until_started(sweep_command(runs_root, cells, "inprocess", extra), runs_root, cells)
    (sweep_dir,) = runs_root.glob("sweep-*")
    (fresh,) = launches(cell_events(sweep_dir))
    print(launch_line("fresh, starts only", fresh, began), flush=True)
    resume = [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)]
    began = run_until_started(resume, runs_root, 2 * cells)
    *_, again = launches(cell_events(sweep_dir))
    print(launch_line("resume, starts only", again, began), flush=True)


def bench_inprocess(cells: int, concurrency: int, latency: float, starts_only: bool, tmp: Path) -> None:
    """A fresh sweep to the end, then another SIGKILLed at half its starts and resumed
    (or, ``starts_only``, ``bench_starts``)."""
    extra = ["rounds=1", f"model.latency_s={latency}", f"sweep.concurrency={concurrency}"]
    print(f"inprocess: {cells} cells, {concurrency} in flight, rounds=1, {latency} s a call; load {load()}")
    if starts_only:
        bench_starts(cells, extra, tmp)
        return
    runs_root, stats = tmp / "inprocess", tmp / "inprocess-stats.json"
    cpu = children_cpu_s()
    began = run_sweep(runs_root, cells, "inprocess", stats, None, extra)
    wall, cpu = time.time() - began, children_cpu_s() - cpu
    (sweep_dir,) = runs_root.glob("sweep-*")
    (fresh,) = launches(cell_events(sweep_dir))
    print(launch_line("fresh", fresh, began), flush=True)
    print(f"  wall {wall:.0f} s, driver cpu {cpu:.0f} s ({cpu / cells * 1000:.0f} ms a cell)")
    print(f"  index check: {check_index(sweep_dir, cells)}", flush=True)
    runs_root = tmp / "inprocess-resume"
    run_sweep(runs_root, cells, "inprocess", stats, cells // 2, extra)
    (sweep_dir,) = runs_root.glob("sweep-*")
    resumed = time.time()
    resume_s, out = timed([sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)], stats)
    print(f"  killed after {cells // 2} starts; resume to the end: {resume_s} (exit {out.returncode})")
    *_, again = launches(cell_events(sweep_dir))
    print(launch_line("resume", again, resumed))
    print(f"  index check: {check_index(sweep_dir, cells)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", type=int, default=100, help="cells per sweep (default 100)")
    parser.add_argument("--full", action="store_true", help="1,000 cells")
    parser.add_argument("--quick", action="store_true", help="30 cells (make bench)")
    parser.add_argument(
        "--launchers", default="basic,joblib,inprocess", help="comma list of " + ", ".join(LAUNCHERS)
    )
    parser.add_argument("--kill-at", type=int, help="basic: cells done before the kill (default N/2)")
    parser.add_argument("--concurrency", type=int, help="inprocess: cells in flight (default: all)")
    parser.add_argument(
        "--latency", type=float, default=1.0, help="inprocess: seconds a model call (default 1)"
    )
    parser.add_argument(
        "--starts-only", action="store_true", help="inprocess: kill each launch once all its cells started"
    )
    args = parser.parse_args()
    cells = 1000 if args.full else 30 if args.quick else args.cells
    print(f"{cells} cells, model=scripted rounds=2, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"planning {cells} cells in-process: {planning_s(cells):.2f} s")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-scale-") as tmp:
        print(index_tick(cells, Path(tmp)), flush=True)
        for launcher in args.launchers.split(","):
            if launcher == "inprocess":
                bench_inprocess(cells, args.concurrency or cells, args.latency, args.starts_only, Path(tmp))
                continue
            kill_at = (args.kill_at or cells // 2) if launcher == "basic" else None
            bench(launcher, cells, kill_at, Path(tmp))
    print(f"total {time.perf_counter() - began:.0f} s, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

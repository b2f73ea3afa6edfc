"""The Hydra callback that turns a multirun into a sweep (see ``harness.sweep.index``).

Configured under ``hydra.callbacks`` in ``conf/config.yaml``; it acts in the
driver process only (``on_multirun_start`` / ``on_multirun_end``):

- expands ``replicates=N`` into ``replicate=0,...,N-1`` cells;
- plans every cell and writes ``sweep.json`` before any cell starts;
- sets ``DRIFT_WORKERS`` to the number of cells that run at once on this
  machine, so llama.cpp threads x workers never oversubscribe the cores;
- while the sweep runs, reads the cell log's new lines (``IndexKeeper``),
  prints cells done / running / failed, and compacts them into ``sweep.json``
  now and then; at the end reads every cell's files, writes ``sweep.json`` and
  ``sweep.parquet``, prints a table of cell statuses, then exits non-zero if
  any cell did not complete.

The progress thread lives in a module global, not on the callback, because
launchers pickle the callback object to send it to their workers.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TextIO

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from harness.cli.errors import BAD_INPUT, FAILED, HeldStderr
from harness.schema import ConfigError
from harness.sweep.cell_status import EVENTS_JSONL, CellLog, utcnow
from harness.sweep.control import driver_lock
from harness.sweep.grid import Cell, plan_cells
from harness.sweep.index import (
    COMPACTIONS,
    INDEX_COST,
    INDEX_JSON,
    RESUME_ENV,
    RESUME_MUTABLE,
    SweepIndex,
    progress_line,
    read_index,
    refresh_index,
    replay_index,
    status_table,
    write_index,
)
from harness.sweep.processes import worker_share
from harness.sweep.ray_workers import need_ray

_PROGRESS: dict[str, Any] = {}


def _fail(message: str) -> None:
    # under harness.run's cli stderr is held until the first cell, and said as "error: <it>"
    print(message if isinstance(sys.stderr, HeldStderr) else f"error: {message}", file=sys.stderr)
    sys.exit(BAD_INPUT)


def replicate_override(arguments: list[str]) -> list[str]:
    """``replicates=3`` -> ``["replicate=0,1,2"]``: replicates are cells differing only in seed."""
    values = [o.split("=", 1)[1] for o in arguments if o.split("=", 1)[0].lstrip("+") == "replicates"]
    if not values:
        return []
    if any(o.split("=", 1)[0].lstrip("+") == "replicate" for o in arguments):
        _fail("replicate: set by replicates=N in a sweep; give one or the other")
    if not values[-1].isdigit() or int(values[-1]) < 1:
        _fail(f"replicates: must be a whole number >= 1 (one value, not a sweep), got {values[-1]!r}")
    count = int(values[-1])
    return [] if count == 1 else ["replicate=" + ",".join(map(str, range(count)))]


def concurrent_workers(launcher: DictConfig, cells: int) -> int:
    """How many cells run at once on one machine under this launcher."""
    target = str(launcher.get("_target_", ""))
    if "joblib" in target:
        n_jobs = int(launcher.get("n_jobs", -1))
        cores = os.cpu_count() or 1
        return max(1, min(cells, n_jobs if n_jobs > 0 else cores + 1 + n_jobs))
    if "submitit" in target and "LocalLauncher" in target:  # all local jobs start together
        return max(1, min(cells, int(launcher.get("array_parallelism", cells) or cells)))
    if "RayLauncher" in target and not launcher.ray.init.get("address"):
        # a local Ray cluster started here: as many cells at once as cores / num_cpus per task
        per_task = float(launcher.ray.remote.get("num_cpus", 1) or 1)
        return max(1, min(cells, int((os.cpu_count() or 1) // per_task)))
    # basic: one at a time; in-process: embedded-model cells take turns (API cells
    # need no cores); Slurm, a Ray cluster: each job has its own CPUs
    return 1


def fixed(overrides: list[str]) -> list[str]:
    """The overrides that say which cell a job is."""
    return [o for o in overrides if not o.startswith(RESUME_MUTABLE)]


def check_sweep_folder(sweep_dir: Path) -> None:
    """One line, before anything is written, when the sweep's folder cannot be a folder."""
    for path in (sweep_dir, *sweep_dir.parents):
        if path.exists():
            if not path.is_dir():
                _fail(f"hydra.sweep.dir: {path} is a file, not a folder (sweep folder {sweep_dir})")
            return


def start_index(sweep_dir: Path, config: DictConfig, arguments: list[str]) -> SweepIndex:
    check_sweep_folder(sweep_dir)
    cells = plan_cells(arguments)
    if not cells:  # a sweep over nothing (range(0,0)) once made an empty sweep and exited 0
        _fail(f"{' '.join(arguments)}: this grid has no cells (a sweep over no values)")
    task = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task)]  # type: ignore[union-attr]
    if os.environ.get(RESUME_ENV):
        if not (sweep_dir / INDEX_JSON).is_file():
            _fail(f"{RESUME_ENV} is set but {sweep_dir} holds no {INDEX_JSON} to resume")
        index = read_index(sweep_dir)
        if not same_cells(index, cells):
            _fail(f"{sweep_dir}: these overrides plan different cells than its {INDEX_JSON}")
        # a raised budget is the same sweep: its cells carry the overrides they now run with
        for kept, planned in zip(index.cells, cells, strict=True):
            kept.overrides = planned.overrides
        index.task_overrides = task
        index.history.append(f"resume {utcnow().isoformat()}")  # not the last launch's last write
        return index
    if (sweep_dir / INDEX_JSON).exists():
        _fail(held_already(sweep_dir, cells, task))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    hydra_overrides = OmegaConf.to_container(config.hydra.overrides.hydra)
    return SweepIndex(
        name=sweep_dir.name,
        launcher=str(config.hydra.launcher.get("_target_", "")),
        task_overrides=task,
        hydra_overrides=[str(o) for o in hydra_overrides],  # type: ignore[union-attr]
        history=["start"],
        cells=cells,
    )


def same_cells(index: SweepIndex, cells: list[Cell]) -> bool:
    """Whether ``cells`` are the sweep's own (a budget aside, which a resume may raise)."""
    return [(c.name, fixed(c.overrides)) for c in index.cells] == [
        (c.name, fixed(c.overrides)) for c in cells
    ]


def held_already(sweep_dir: Path, cells: list[Cell], task: list[str]) -> str:
    """Why a new launch may not use a folder that holds a sweep, and what to do: the same
    grid continues with ``resume`` (with the budgets typed); another grid, which that
    resume would refuse, wants a folder of its own."""
    try:
        index: SweepIndex | None = read_index(sweep_dir)
    except ValueError:  # an index no resume can read either
        index = None
    if index is not None and same_cells(index, cells):
        budgets = [o for o in task if o.startswith(RESUME_MUTABLE) and o not in index.task_overrides]
        resume = " ".join(["python -m harness.sweep resume", str(sweep_dir), *budgets])
        return f"{sweep_dir} already holds this sweep; continue it with: {resume}"
    held = f" of other cells ({' '.join(index.task_overrides)})" if index is not None else ""
    return (
        f"{sweep_dir} already holds a sweep{held}; a new grid wants a new hydra.sweep.dir "
        f"(python -m harness.sweep resume {sweep_dir} continues the one there)"
    )


class IndexKeeper:
    """The driver's view of a running sweep: reads the cell log's new lines, reports
    progress and failures, and rewrites ``sweep.json`` after every ``every`` events
    (a tenth of the cells'), so each cell costs the index a constant number of bytes."""

    def __init__(self, sweep_dir: Path, index: SweepIndex) -> None:
        self.sweep_dir, self.index = sweep_dir, index  # the rows as of the last tick
        self.log = CellLog(sweep_dir)
        self.every = max(1, math.ceil(len(index.cells) / COMPACTIONS))
        self.unwritten = 0  # events read since sweep.json was last written
        self.reported: set[str] = set()
        self.last_line = ""

    def tick(self) -> list[str]:
        """The lines to print now: new failures, then progress if it changed."""
        events = self.log.read()
        self.unwritten += len(events)
        # only cells with news, and running ones (whose process may have died), change
        changed = {e.cell for e in events} | {c.name for c in self.index.cells if c.status == "running"}
        current = self.index = replay_index(self.sweep_dir, self.index, self.log.latest, changed)
        lines = []
        for cell in current.cells:
            if cell.status == "failed" and cell.name not in self.reported:
                self.reported.add(cell.name)
                lines.append(f"[sweep] {cell.name} failed: {cell.error}")
        progress = progress_line(current.cells)
        if progress != self.last_line:
            self.last_line = progress
            lines.append(progress)
        if self.unwritten >= self.every:
            write_index(self.sweep_dir, current, parquet=False)
            self.unwritten = 0
        return lines


def _watch(keeper: IndexKeeper, stop: threading.Event, console: TextIO, every_s: float) -> None:
    while not stop.wait(every_s):
        # harness.run holds stderr (a buffer) until the first cell: in order, behind what it
        # holds, until then; the console after (the buffer, taken once, kept every line unseen)
        out = sys.stderr if isinstance(sys.stderr, HeldStderr) else console
        for line in keeper.tick():
            print(line, file=out, flush=True)


class SweepIndexCallback(Callback):
    def __init__(self, progress_every_s: float = 1.0, driver_env: dict[str, str] | None = None) -> None:
        self.progress_every_s = progress_every_s
        self.driver_env = dict(driver_env or {})  # e.g. RAY_AUTH_MODE=token, read by ray.init here

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ.update({k: str(v) for k, v in self.driver_env.items() if v is not None})
        if config.hydra.launcher.get("engine") == "ray":  # sweep.engine=ray, before any folder
            try:
                need_ray()
            except ConfigError as exc:  # Hydra turns a callback's exception into a warning
                _fail(str(exc))
        task = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task)]  # type: ignore[union-attr]
        # the basic sweeper puts hydra.sweeper.params (conf/sweep presets) before the command line's
        params = [f"{k}={v}" for k, v in (config.hydra.sweeper.get("params") or {}).items()]
        expanded = task + replicate_override(params + task)
        sweep_dir = Path(str(config.hydra.sweep.dir))
        if worker_share():  # a worker of sweep.processes=P: the index is its driver's
            with read_write(config.hydra), open_dict(config.hydra):
                config.hydra.overrides.task = expanded
            return
        _let_go()  # what a multirun of this process that ended by an exception still holds
        _PROGRESS["made"] = not sweep_dir.exists()  # this command's folder (discard_unstarted)
        index = start_index(sweep_dir, config, params + expanded)
        _PROGRESS["lock"] = _locked(sweep_dir, str(config.hydra.launcher.get("_target_", "")))
        write_index(sweep_dir, index, parquet=False)
        (sweep_dir / EVENTS_JSONL).touch()  # its presence says: status may read the log
        with read_write(config.hydra), open_dict(config.hydra):
            config.hydra.overrides.task = expanded  # what the sweeper splits into cells
        workers = concurrent_workers(config.hydra.launcher, len(index.cells))
        os.environ.setdefault("DRIFT_WORKERS", str(workers))
        print(
            f"[sweep] {len(index.cells)} cells -> {sweep_dir} (DRIFT_WORKERS={os.environ['DRIFT_WORKERS']})",
            file=sys.stderr,
            flush=True,
        )
        stop = threading.Event()
        console = sys.stderr.real if isinstance(sys.stderr, HeldStderr) else sys.stderr  # not a cell's log
        args = (IndexKeeper(sweep_dir, index), stop, console, self.progress_every_s)
        thread = threading.Thread(target=_watch, args=args, name="sweep-progress", daemon=True)
        thread.start()
        _PROGRESS.update(stop=stop, thread=thread, index=index, sweep_dir=sweep_dir)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if not _PROGRESS:  # a worker's (see on_multirun_start)
            return
        _stop_progress()
        sweep_dir: Path = _PROGRESS["sweep_dir"]
        try:
            index = refresh_index(sweep_dir, _PROGRESS["index"], final=True)
            write_index(sweep_dir, index)
        finally:
            _let_go()
        INDEX_COST.dump()
        print(progress_line(index.cells), file=sys.stderr, flush=True)
        print(status_table(index), flush=True)
        print(sweep_dir, flush=True)
        if any(c.status != "completed" for c in index.cells):
            sys.exit(FAILED)


def end_stopped_launch() -> None:
    """Ctrl-C or SIGTERM stopped this driver's launch (its SystemExit goes through Hydra,
    which then skips ``on_multirun_end``): ``sweep.json`` and ``sweep.parquet`` from every
    cell's own files all the same, as at any end (they said the stopped cells running)."""
    if "lock" not in _PROGRESS:  # no launch of this process, or it ended and let go
        return
    _stop_progress()
    sweep_dir: Path = _PROGRESS["sweep_dir"]
    try:
        write_index(sweep_dir, refresh_index(sweep_dir, _PROGRESS["index"], final=True))
    except KeyboardInterrupt:  # a second Ctrl-C: the index as it was; status reads the cell log
        pass
    finally:
        _let_go()


def discard_unstarted() -> None:
    """A launch that ended before any cell ran (``-m rounds2=1,2``: a key with no place
    fails the first cell's composition, in one line) leaves no sweep folder it made:
    it held only the index of cells that never ran, and a second command found it
    there. A folder made before (a resume's), or holding a folder of its own, stays."""
    if "lock" not in _PROGRESS:  # no launch of this process
        return
    _stop_progress()
    _let_go()
    sweep_dir = _PROGRESS.get("sweep_dir")
    if (
        _PROGRESS.pop("made", False)
        and sweep_dir is not None
        and not any(p.is_dir() for p in sweep_dir.iterdir())
    ):
        shutil.rmtree(sweep_dir)


def _locked(sweep_dir: Path, launcher: str) -> ExitStack:
    """The sweep's ``driver.lock``, held from before the driver writes its index until
    after its last write, whatever the launcher: two drivers on one sweep once ran
    its cells side by side, and raced on ``sweep.parquet``."""
    held = ExitStack()
    try:
        held.enter_context(driver_lock(sweep_dir, launcher))
    except RuntimeError as exc:
        _fail(f"{exc}; wait for it, or stop it (Ctrl-C) and resume")
    return held


def _stop_progress() -> None:
    """Stop the progress thread and wait for its last write, if it was started."""
    if (stop := _PROGRESS.get("stop")) is not None:
        stop.set()
        _PROGRESS["thread"].join()


def _let_go() -> None:
    """Release the driver's lock and stop its progress thread, if still held."""
    if (stop := _PROGRESS.get("stop")) is not None:
        stop.set()
    if (held := _PROGRESS.pop("lock", None)) is not None:
        held.close()

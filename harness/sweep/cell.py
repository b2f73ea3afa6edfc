"""One sweep cell, run in whichever process the launcher chose (the driver, a
joblib worker, a Slurm job, a Ray worker).

``harness.run.main`` hands a multirun job to ``run_cell``, which makes the
cell's run happen exactly once across launches and resumes:

- a cell whose run folder is completed is skipped;
- a cell whose run folder exists but did not complete is resumed
  (``harness.resume.resume_run``);
- otherwise the debate runs fresh, into ``<sweep_dir>/<cell name>``.

Its output goes to ``cell.log`` in its run folder, never to the console, and
every failure is recorded in ``cells/<name>.json`` instead of ending the
process, so one bad cell never stops the others.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, redirect_stderr, redirect_stdout
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from harness.cli.errors import BUDGET_STOPPED, FAILED, INTERRUPTED, exit_code
from harness.config import replicate_seed
from harness.engine.fork_config import fork_keeps
from harness.runtime.budget import in_sweep_budget
from harness.store.reader import ledger
from harness.store.records import utcnow
from harness.streams import RoutedStream
from harness.sweep.cell_status import CELLS_DIR, CellRecord, write_cell_record
from harness.sweep.grid import Cell
from harness.sweep.index import CELL_LOG, INDEX_JSON, _manifest, read_index

_CELL: ContextVar[str | None] = ContextVar("drift_sweep_cell", default=None)
_CELL_OVERRIDES: ContextVar[list[str] | None] = ContextVar("drift_sweep_cell_overrides", default=None)
# a budget stopped the run (harness.cli.report), resumable; the sweep goes on
_EXIT_STATUS = {0: "completed", INTERRUPTED: "interrupted", BUDGET_STOPPED: "interrupted"}
_PLAN: dict[tuple[int, int, int, int], list[Cell]] = {}  # find_cell's: the last sweep.json read, by stat
_PLAN_LOCK = threading.Lock()


def is_sweep_job() -> bool:
    """True for a multirun job not yet inside ``run_cell``."""
    if _CELL.get() is not None or not HydraConfig.initialized():
        return False
    return HydraConfig.get().mode == RunMode.MULTIRUN


def in_cell() -> bool:
    """Whether this thread runs a sweep's cell (inside ``run_cell``)."""
    return _CELL.get() is not None


def task_overrides() -> list[str]:
    """The overrides of the run in this thread, as typed: its sweep cell's (cells
    as threads share one Hydra config), else its Hydra job's (a fork reads them)."""
    cell = _CELL_OVERRIDES.get()
    if cell is not None:
        return list(cell)
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _planned(sweep_dir: Path) -> list[Cell]:
    """The sweep's cells, parsed once per process and again only when ``sweep.json`` is
    rewritten (a few times a sweep): parsing it for every cell would grow with the cells."""
    stat = (sweep_dir / INDEX_JSON).stat()
    # the file's identity (device, inode) names the sweep: no path to resolve, which took four
    # stats, and a cell is found three or four times (steer, launcher, run_cell)
    key = (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
    with _PLAN_LOCK:  # cells as threads of one process share the cache
        if key not in _PLAN:
            _PLAN.clear()
            _PLAN[key] = read_index(sweep_dir).cells
        return _PLAN[key]


def find_cell(sweep_dir: Path, num: int, overrides: list[str]) -> Cell:
    """This job's planned cell: by job number, checked against its overrides."""
    cells = _planned(sweep_dir)
    if 0 <= num < len(cells) and cells[num].overrides == overrides:
        return cells[num]
    for cell in cells:
        if cell.overrides == overrides:
            return cell
    raise RuntimeError(f"job {num} ({' '.join(overrides)}) is not a cell of {sweep_dir}/sweep.json")


def cell_config(cfg: DictConfig, sweep_dir: Path, name: str, *, owned: bool = False) -> DictConfig:
    """The cell's config: its run lands in the sweep folder, and a replicate gets its seed.
    ``owned``: ``cfg`` was made for this cell alone, so it is changed in place (a copy
    of a whole config costs milliseconds of CPU, a lot with 1,000 cells on one GIL)."""
    out = cfg if owned else copy.deepcopy(cfg)
    with open_dict(out):
        out.runs_root = str(sweep_dir)
        out.run_name = name  # the planned folder name, which says what varies
        seed, replicate = out.get("seed"), out.get("replicate", 0)
        if isinstance(seed, int) and isinstance(replicate, int) and replicate > 0:
            out.seed = replicate_seed(seed, replicate)  # config.yaml keeps the derived seed
    return out


@contextmanager
def cell_output(sweep_dir: Path, name: str) -> Iterator[Path]:
    """Send stdout/stderr to the cell's log. Until the engine makes the run folder
    the log lives in ``cells/<name>.log``; it then moves into the run folder."""
    run_dir, pending = sweep_dir / name, pending_log(sweep_dir, name)
    _adopt_log(pending, run_dir)
    path = run_dir / CELL_LOG if run_dir.is_dir() else pending
    with open(path, "a", encoding="utf-8", buffering=1) as log, redirected(log):
        workers = os.environ.get("DRIFT_WORKERS", "1")
        print(f"=== cell {name} at {utcnow().isoformat()} (pid {os.getpid()}, DRIFT_WORKERS={workers}) ===")
        yield path
    _adopt_log(pending, run_dir)


@contextmanager
def redirected(log: TextIO) -> Iterator[None]:
    """This cell's output to ``log``: only this thread's when the streams are
    routed (cells as threads of one process), else the whole process's."""
    out, err = sys.stdout, sys.stderr
    if isinstance(out, RoutedStream) and isinstance(err, RoutedStream):
        out.route(log)
        err.route(log)
        try:
            yield
        finally:
            out.route(None)
            err.route(None)
    else:
        with redirect_stdout(log), redirect_stderr(log):
            yield


def pending_log(sweep_dir: Path, name: str) -> Path:
    """Where a cell's output goes until its run folder exists."""
    return sweep_dir / CELLS_DIR / f"{name}.log"


def _adopt_log(pending: Path, run_dir: Path) -> None:
    """Append a log left in ``cells/`` (by a run that died early) to the run folder's."""
    if not pending.is_file() or not run_dir.is_dir():
        return
    with open(run_dir / CELL_LOG, "a", encoding="utf-8") as out:
        out.write(pending.read_text(encoding="utf-8"))
    pending.unlink()


def _set_aside(run_dir: Path) -> None:
    """A folder without a manifest died before its first write: keep it, but out of the way."""
    n = 1
    while (aside := run_dir.with_name(f"{run_dir.name}.incomplete-{n}")).exists():
        n += 1
    run_dir.rename(aside)


# A run's own budget, which a sweep's resume may raise (its sweep budget is the cell's
# config's, read by sweep_budget_of): passed on to the cell's resume.
RUN_BUDGET_KEYS = ("budget.usd", "budget.tokens")


def _resume(run_dir: Path, overrides: list[str]) -> int:
    """Continue the cell's run from its own folder (durable runs), as
    ``python -m harness.resume`` would: same messages, same exit codes; with the
    run budget the sweep's resume gave, which the run's own config did not hold."""
    from harness.resume import main as resume_main

    raised = [o.lstrip("+") for o in overrides if o.lstrip("+").partition("=")[0] in RUN_BUDGET_KEYS]
    return resume_main([str(run_dir), *raised])


def _invoke(
    single_run: Callable[[DictConfig], None], cfg: DictConfig, run_dir: Path, resume: list[str] | None
) -> int:
    """The cell's exit code; nothing a cell does may end the sweep except Ctrl-C.
    ``resume``: the cell's overrides, to continue its run (None: start it)."""
    try:
        if resume is not None:
            return _resume(run_dir, resume)
        single_run(cfg)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt as exc:
        print("error: interrupted", file=sys.stderr)
        return exit_code(exc)
    except Exception as exc:  # a bug in one cell must not take the others down
        traceback.print_exc()
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return FAILED


def sweep_note(error: str | None, sweep_dir: Path, run_dir: Path) -> str | None:
    """A cell's error as its note: a run's own resume command (``python -m harness.resume
    <run>``) there becomes the sweep's, which resumes the cell and keeps the sweep's
    index; the run's alone left the cell ``failed`` in the table once it had completed."""
    if error is None:
        return None
    return error.replace(f"python -m harness.resume {run_dir}", f"python -m harness.sweep resume {sweep_dir}")


def _last_error(log: Path, offset: int) -> str | None:
    with open(log, encoding="utf-8", errors="replace") as fh:
        fh.seek(offset)
        errors = [line[7:].strip() for line in fh if line.startswith("error: ")]
    return errors[-1] if errors else None


def sweep_budget_of(cfg: DictConfig, sweep_dir: Path) -> AbstractContextManager[object]:
    """The budget every cell of this sweep in this process shares, if it has one;
    charged at first with what the sweep's runs had already spent (a resume)."""
    budget = cfg.get("budget") or {}
    usd, tokens = budget.get("sweep_usd"), budget.get("sweep_tokens")
    if usd is None and tokens is None:
        return nullcontext()

    def spent() -> tuple[float, int]:
        paid = [ledger(run) for run in sweep_dir.iterdir() if (run / "manifest.json").is_file()]
        return sum(p.cost_usd or 0.0 for p in paid), sum(p.input_tokens + p.output_tokens for p in paid)

    return in_sweep_budget(str(sweep_dir.resolve()), usd, tokens, spent)


@dataclass(frozen=True)
class SweepJob:
    """Which job of which sweep: from Hydra's per-job config in a process of
    its own, or handed over by the in-process launcher (whose threads share one;
    its job's config is composed for the cell alone: ``owned``)."""

    sweep_dir: Path
    num: int
    overrides: list[str]
    owned: bool = False

    @classmethod
    def current(cls) -> SweepJob:
        hydra = HydraConfig.get()
        return cls(Path(hydra.sweep.dir), int(hydra.job.num), list(hydra.overrides.task))


def run_cell(cfg: DictConfig, single_run: Callable[[DictConfig], None], job: SweepJob | None = None) -> None:
    """Run (or skip, or resume) this job's cell; record how it ended; never exit."""
    job = job or SweepJob.current()
    sweep_dir = job.sweep_dir
    cell = find_cell(sweep_dir, job.num, job.overrides)
    run_dir = sweep_dir / cell.name
    manifest = _manifest(run_dir)
    if manifest is not None and manifest.status == "completed":
        # a launch killed as the cell ended (its run done, its log not yet moved) left the log aside
        _adopt_log(pending_log(sweep_dir, cell.name), run_dir)
        kept = fork_keeps(cfg, run_dir, job.overrides, ("rounds",))  # a fork's: its parent's, unless set
        skip = CellRecord(status="completed", action="skip", rounds=kept["rounds"], seed=manifest.seed)
        write_cell_record(sweep_dir, cell.name, skip.with_counts(manifest))
        return
    if manifest is None and run_dir.exists():
        _set_aside(run_dir)
    cell_cfg = cell_config(cfg, sweep_dir, cell.name, owned=job.owned)
    kept = whole_numbers(fork_keeps(cell_cfg, run_dir, job.overrides, ("rounds", "seed")))
    record = CellRecord(
        status="running",
        action="run" if manifest is None else "resume",
        rounds=kept["rounds"],
        seed=kept["seed"],
    )
    write_cell_record(sweep_dir, cell.name, record)
    token, given = _CELL.set(cell.name), _CELL_OVERRIDES.set(job.overrides)
    try:
        with cell_output(sweep_dir, cell.name) as log, sweep_budget_of(cell_cfg, sweep_dir):
            offset = log.stat().st_size
            code = _invoke(single_run, cell_cfg, run_dir, job.overrides if manifest is not None else None)
    finally:
        _CELL.reset(token)
        _CELL_OVERRIDES.reset(given)
    log = run_dir / CELL_LOG if run_dir.is_dir() else log
    record.status = _EXIT_STATUS.get(code, "failed")  # type: ignore[assignment]
    # as made, or refused
    kept = whole_numbers(fork_keeps(cell_cfg, run_dir, job.overrides, ("rounds", "seed")))
    record.rounds, record.seed = kept["rounds"], kept["seed"]
    record.exit_code, record.ended_at = code, utcnow()
    manifest = _manifest(run_dir)
    record.error = sweep_note(_last_error(log, offset), sweep_dir, run_dir) if code else None
    if record.status == "interrupted" and record.error is None and manifest is not None:
        record.error = manifest.stop_reason  # why it stopped (a budget, a ctl cancel), for the table's note
    write_cell_record(sweep_dir, cell.name, record.with_counts(manifest))
    if code == INTERRUPTED:  # Ctrl-C or SIGTERM stops the whole sweep, once this cell is recorded
        if not job.owned:  # the in-process launcher says it once a sweep (a ctl cancel stops one cell)
            print(resume_line(sweep_dir), file=sys.stderr)
        raise SystemExit(INTERRUPTED)


def whole_numbers(values: dict[str, Any]) -> dict[str, int | None]:
    """``rounds`` and ``seed`` as the cell's row holds them: a value that is no whole
    number (``-m rounds=1,abc``) is None there, and the cell fails in its one line
    (the config's check names the key); as it was, the row's own check ended the sweep."""
    return {k: v if isinstance(v, int) and not isinstance(v, bool) else None for k, v in values.items()}


def resume_line(sweep_dir: Path) -> str:
    return f"interrupted; continue with: python -m harness.sweep resume {sweep_dir}"

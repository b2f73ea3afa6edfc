"""Many sweep cells in flight in one process: ``sweep.concurrency=N``.

An API-bound sweep waits on the provider, not on the cores. A process per
cell (joblib) pays seconds of imports and about 110 MB for each cell in
flight; here the cells are threads of the driver, sharing its imports, its
compiled schemas and one rate limiter per endpoint (``harness.models.limiter``).

Each cell's config is made when the cell starts, not all up front: Hydra's
sweeper composes only the first job to validate the command line
(``FirstJobValidation``; the first cell takes that config), and a cell
composes by Hydra once per shape of cell and otherwise copies that config
with its own values set (``CellConfigs``).
The cell then runs exactly as under any launcher
(``harness.sweep.cell.run_cell``: skip, resume or run; its output routed to
its own log), given its job explicitly because Hydra's per-job config is a
process-wide singleton.

The cells start from a queue (``harness.sweep.steer``) that ``python -m
harness.sweep ctl <sweep>`` steers while the sweep runs: pause and resume,
``sweep.concurrency``, ``model.max_concurrency``, ``budget.sweep_usd`` and
``budget.sweep_tokens``, cancel and requeue one cell (``harness.sweep.control``:
the channel).

Cells on an embedded model (``local:*``) take turns: a llama.cpp model wants
every core, so they run one at a time, while API cells go on around them.

The first SIGINT or SIGTERM asks every cell to stop after its node in flight
(each is left ``interrupted``, resumable) and starts no new cell; the sweep
then exits 130, as the other launchers do.

With ``sweep.processes=P`` the cells split over P driver processes, each
running its share here, with the model's limits divided (``harness.sweep.processes``).

While the cells run, the cyclic garbage collector runs less often
(``fewer_collections``): 1,000 cells in flight hold millions of objects, and
at Python's default thresholds the collector took about a third of the
driver's CPU (a 1,000-cell wave of starts: 167 s, 124 s with this).
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from harness.cli.errors import INTERRUPTED, release_stderr
from harness.models.limiter import JsonlSink, set_sink
from harness.runtime.interrupt import STOP_SIGNALS, clear_stop, request_stop
from harness.slots import slot
from harness.streams import RoutedStream
from harness.sweep.cell import SweepJob, find_cell, resume_line, run_cell
from harness.sweep.cell_status import CellRecord, write_cell_record
from harness.sweep.concurrency import check_concurrency
from harness.sweep.configs import CellConfigs
from harness.sweep.index import LIMITS_JSONL
from harness.sweep.processes import Processes, check_engine, check_engine_args, check_processes, engine_of
from harness.sweep.ray_workers import check_ray
from harness.sweep.steer import Steering

_LOCAL_MODEL = threading.Lock()


def uses_local_model(cfg: DictConfig) -> bool:
    """Whether any role of this cell runs on an embedded llama.cpp model."""
    specs = [cfg.get("model", {}).get("spec")]
    specs += [role.get("spec") for role in (cfg.get("roles") or {}).values() if role]
    return any(str(spec).startswith("local:") for spec in specs if spec)


class FirstJobValidation:
    """Hydra's sweeper composes every job before the launch to find a bad override
    early (``validate_batch_is_legal``): at 1,000 cells, minutes before the first
    cell starts. Through this loader it composes the first job only. Every cell
    composes its own config when it starts, and one that does not compose fails
    alone, in its record, as a cell rejected by validation does."""

    def __init__(self, loader: Any, configs: CellConfigs) -> None:
        self.loader, self.configs = loader, configs
        self.validated = False

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        if self.validated:
            return master_config  # the sweeper discards what it composes
        self.validated = True
        cfg = self.loader.load_sweep_config(master_config, sweep_overrides)
        self.configs.composed[tuple(sweep_overrides)] = cfg  # the first cell's, not composed twice
        return cfg

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class InProcessLauncher(Launcher):
    """Hydra's launcher for cells as threads (see the module docstring)."""

    def __init__(
        self, concurrency: int = 8, processes: int = 1, engine: str = "local", ray: Any = None
    ) -> None:
        self.concurrency = check_concurrency(concurrency)
        self.engine = check_engine(engine)  # ray: the shares on Ray (harness.sweep.ray_workers)
        self.processes = check_processes(processes, self.engine)  # > 1: harness.sweep.processes
        self.ray = check_ray(ray)  # where the Ray workers run, when engine=ray
        self.share: Processes | None = None
        self.config: DictConfig | None = None
        self.loader: Any = None
        self.configs: CellConfigs | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.stopped = threading.Event()
        self.steering: Steering  # made at each launch: the queue ctl steers

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function = config, task_function
        self.loader = hydra_context.config_loader
        self.configs = CellConfigs(self.loader, config)
        # the sweeper shares this context: its up-front validation composes one job, not all
        hydra_context.config_loader = FirstJobValidation(self.loader, self.configs)  # type: ignore[assignment]
        self.hydra_context = hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        release_stderr()  # what Hydra said before the first cell, held by harness.run.cli
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        jobs = [(initial_job_idx + i, list(o)) for i, o in enumerate(job_overrides)]
        self.share = share = Processes(sweep_dir, self.processes, self.stopped, self.engine, self.ray)
        with (
            routed_streams(),
            stop_on_signal(self.stopped),
            limits_kept_in(sweep_dir),
            fewer_collections() as ended,
        ):
            self.steering = Steering(sweep_dir, share.in_flight(self.concurrency), self.stopped, ended)
            # processes.lock, and the workers if processes > 1 (driver.lock is the index callback's)
            with share.held(self.config):
                self.steering.drive(
                    share.mine(jobs), lambda num, overrides: self._run(sweep_dir, num, overrides)
                )
        if self.stopped.is_set():  # every cell in flight was left interrupted, resumable
            print(resume_line(sweep_dir), file=sys.stderr, flush=True)
            raise SystemExit(INTERRUPTED)
        # a cell's outcome is in its record; these only tell Hydra each job ran
        return [JobReturn(overrides=o, status=JobStatus.COMPLETED) for _, o in jobs]

    def _run(self, sweep_dir: Path, num: int, overrides: list[str]) -> None:
        """One cell in this thread; never raises (a cell's failure is in its record)."""
        if self.stopped.is_set():  # stopping: a cell not started stays pending
            return
        assert self.configs is not None
        try:
            job_cfg = self.configs.compose(overrides)
            self.steering.configure(job_cfg)  # what ctl set since the sweep started
            if self.share is not None:
                self.share.divide(job_cfg)  # this process's part of the model's limits
        except Exception as exc:  # a value Hydra cannot compose: this cell fails, not the sweep
            fail_cell(SweepJob(sweep_dir, num, overrides), exc)
            return
        with _LOCAL_MODEL if uses_local_model(job_cfg) else nullcontext(), slot():
            try:  # the config is this cell's own copy: run_cell sets its values in place
                run_cell(job_cfg, self._single_run, SweepJob(sweep_dir, num, overrides, owned=True))
            except SystemExit as exc:  # run_cell's way of saying: Ctrl-C, stop the sweep
                cancelled = self.steering.was_cancelled(find_cell(sweep_dir, num, overrides).name)
                if exc.code == INTERRUPTED and not cancelled:  # ctl cancel stops one cell only
                    self.stopped.set()
                    request_stop("SIGINT")

    def _single_run(self, cfg: DictConfig) -> None:
        assert self.task_function is not None
        self.task_function(cfg)

    def __repr__(self) -> str:
        return f"InProcessLauncher(concurrency={self.concurrency}, processes={self.processes}, engine={self.engine})"


def fail_cell(job: SweepJob, exc: Exception) -> None:
    """Record a cell whose config did not compose as failed, in one line."""
    from harness.cli.errors import one_line

    cell = find_cell(job.sweep_dir, job.num, job.overrides)
    error = one_line(str(exc)) or type(exc).__name__
    write_cell_record(
        job.sweep_dir, cell.name, CellRecord(status="failed", action="run", exit_code=2, error=error)
    )


class EndedCells:
    """One full collection each time as many cells have ended as run at once, while
    more wait to start. An ended cell's objects are cyclic garbage (its config holds
    its parents; its run's logs and records hang off its graph), and under
    ``fewer_collections`` no collection reached them before the sweep's end: a
    256-cell sweep, 64 in flight, grew ~30 MB a wave (150 -> 241 MB) and freed it
    all in one collection at its end (0.85 s of CPU). With this its memory stays
    near what the cells in flight hold. A sweep whose cells all run at once
    (nothing queued) leaves its garbage to the exit, as before. At least ``least``
    cells apart: a collection also walks what the SDKs imported after the launch's
    freeze (~40 ms with the OpenAI client), too much for each cell of a sweep that
    runs one at a time."""

    def __init__(self, least: int = 32) -> None:
        self.since, self.least = 0, least  # cells ended since the last collection

    def __call__(self, ended: int, concurrency: int, queued: bool) -> None:
        self.since += ended
        if queued and self.since >= max(concurrency, self.least):
            self.since = 0
            gc.collect()


@contextmanager
def fewer_collections(young: int = 50_000) -> Iterator[EndedCells]:
    """The cyclic collector, less often, while cells run. What exists at the launch
    (modules, the master config) is frozen out of every collection, and a young
    collection waits for ``young`` new objects instead of 700, so that objects
    living as long as a cell are not scanned again and again; the cells' garbage
    goes in the collections ``EndedCells`` makes as they end."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(young, 20, 20)
    try:
        yield EndedCells()
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


@contextmanager
def limits_kept_in(sweep_dir: Path) -> Iterator[None]:
    """Every change of a shared limiter's limit, appended to the sweep's ``limits.jsonl``."""
    set_sink(JsonlSink(sweep_dir / LIMITS_JSONL))
    try:
        yield
    finally:
        set_sink(None)


@contextmanager
def routed_streams() -> Iterator[None]:
    """Each cell thread's print to its own log; the driver's to the console."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RoutedStream(out), RoutedStream(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


@contextmanager
def stop_on_signal(stopped: threading.Event) -> Iterator[None]:
    """The first signal stops every cell after its node and starts no new one."""

    def handle(signum: int, frame: Any) -> None:
        stopped.set()
        request_stop(signal.Signals(signum).name)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        clear_stop()


def launcher_overrides(argv: list[str]) -> list[str]:
    """``sweep.concurrency=N`` on the command line picks this launcher with N
    cells in flight, so a user needs no second key; checked before anything starts."""
    out = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        key = key.lstrip("+")
        if key not in ("sweep.concurrency", "sweep.processes", "sweep.engine") or not sep:
            out.append(arg)
            continue
        if "-m" not in argv and "--multirun" not in argv:
            from harness.schema import ConfigError

            raise ConfigError(f"{key}: sets how a sweep's cells run; add -m")
        if key == "sweep.processes":
            out.append(f"hydra.launcher.processes={check_multi_process(argv, value)}")
        elif key == "sweep.engine":
            out.append(f"hydra.launcher.engine={check_engine_args(argv, value)}")
        else:
            out += ["hydra/launcher=inprocess", f"hydra.launcher.concurrency={check_concurrency(value)}"]
            other = [a for a in argv if a.startswith("hydra/launcher=") and a != "hydra/launcher=inprocess"]
            if other:  # Hydra then said it "could not override 'hydra.launcher.concurrency'"
                from harness.schema import ConfigError

                raise ConfigError(
                    f"sweep.concurrency: runs the cells on the in-process launcher; drop {other[0]}, "
                    "or set that launcher's own parallelism (joblib: hydra.launcher.n_jobs)"
                )
    check_sweep_budget(argv)
    return out


def check_multi_process(argv: list[str], value: str) -> int:
    """``sweep.processes=P``: the in-process launcher's cells in P processes, whose limits
    are divided; a sweep budget is one process's, so more than one refuses it."""
    from harness.schema import ConfigError

    processes = check_processes(value, engine_of(argv))
    if not any(a.lstrip("+").startswith("sweep.concurrency=") for a in argv):
        raise ConfigError(
            "sweep.processes: runs the in-process launcher's cells in P processes; add sweep.concurrency=N"
        )
    budget = [a.split("=", 1)[0].lstrip("+") for a in argv if a.lstrip("+").startswith("budget.sweep_")]
    if processes > 1 and budget:
        raise ConfigError(
            f"{budget[0]}: a sweep budget is one process's; not with sweep.processes={processes}"
        )
    return processes


def check_sweep_budget(argv: list[str]) -> None:
    """A sweep budget is one object shared by the cells of one process: it needs
    this launcher (process launchers would each count their own). Its limit is
    checked here, before any cell starts: each cell's own check would fail it
    alone, and a resumed cell (whose config is its folder's) would take the limit
    unchecked and stop at once."""
    from harness.schema import ConfigError

    given = [a.lstrip("+").partition("=") for a in argv if a.lstrip("+").startswith("budget.sweep_")]
    in_process = any(
        a.lstrip("+").startswith(("sweep.concurrency=", "hydra/launcher=inprocess")) for a in argv
    )
    if given and not in_process:
        multirun = "-m" in argv or "--multirun" in argv
        raise ConfigError(
            f"{given[0][0]}: a sweep budget is shared by the cells of one process; "
            f"add {'' if multirun else '-m and '}sweep.concurrency=N (or use budget.usd / budget.tokens per run)"
        )
    for key, _, value in given:
        if key in ("budget.sweep_usd", "budget.sweep_tokens") and not _budget_limit(key, value):
            raise ConfigError(f"{key}: must be a number > 0 (or null: none), got {value!r}")
    if "-m" in argv or "--multirun" in argv:  # one value for every cell: each would fail alone
        for key, _, value in (a.lstrip("+").partition("=") for a in argv):
            single = "," not in value and "(" not in value
            if key in ("budget.usd", "budget.tokens") and single and not _budget_limit(key, value):
                raise ConfigError(f"{key}: must be a number > 0 (or null: none), got {value!r}")


def _budget_limit(key: str, value: str) -> bool:
    """Whether a sweep budget's value on the command line is a limit above 0 (or
    none); an interpolation is left to the config's own check."""
    text = value.strip("'\"")
    if text == "null" or text.startswith("${"):
        return True
    try:
        number = int(text) if key.endswith("tokens") else float(text)
    except ValueError:
        return False
    return 0 < number < float("inf")

"""Many sweep cells in flight in one process: ``sweep.concurrency=N``.

An API-bound sweep waits on the provider, not on the cores. A process per
cell (joblib) pays seconds of imports and about 110 MB for each cell in
flight; here the cells are threads of the driver, sharing its imports, its
compiled schemas and one rate limiter per endpoint (``harness.models.limiter``).

Each job's config is composed in its own thread when the job starts (not all
up front), under a lock: Hydra's config loader is not known to be
thread-safe, and composing takes a fraction of a second. The cell then runs
exactly as under any launcher (``harness.sweep.cell.run_cell``: skip,
resume or run; its output routed to its own log), given its job explicitly
because Hydra's per-job config is a process-wide singleton.

Cells on an embedded model (``local:*``) take turns: a llama.cpp model wants
every core, so they run one at a time, while API cells go on around them.

The first SIGINT or SIGTERM asks every cell to stop after its node in flight
(each is left ``interrupted``, resumable) and starts no new cell; the sweep
then exits 130, as the other launchers do.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from harness.cli.errors import release_stderr
from harness.engine.interrupt import STOP_SIGNALS, clear_stop, request_stop
from harness.streams import RoutedStream
from harness.sweep.cell import SweepJob, run_cell

MAX_CONCURRENCY = 4096  # threads, not processes; past this a machine runs out of descriptors first
_COMPOSE = threading.Lock()
_LOCAL_MODEL = threading.Lock()


def check_concurrency(value: object) -> int:
    """``sweep.concurrency``'s value (a number, or its text on the command line),
    or a one-line error naming the key."""
    from harness.config import ConfigError

    n = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CONCURRENCY:
        raise ConfigError(
            f"sweep.concurrency: must be a whole number from 1 to {MAX_CONCURRENCY}, got {value!r}"
        )
    return n


def uses_local_model(cfg: DictConfig) -> bool:
    """Whether any role of this cell runs on an embedded llama.cpp model."""
    specs = [cfg.get("model", {}).get("spec")]
    specs += [role.get("spec") for role in (cfg.get("roles") or {}).values() if role]
    return any(str(spec).startswith("local:") for spec in specs if spec)


class InProcessLauncher(Launcher):
    """Hydra's launcher for cells as threads (see the module docstring)."""

    def __init__(self, concurrency: int = 8) -> None:
        self.concurrency = check_concurrency(concurrency)
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None
        self.stopped = threading.Event()

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        release_stderr()  # what Hydra said before the first cell, held by harness.run.cli
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        jobs = [(initial_job_idx + i, list(o)) for i, o in enumerate(job_overrides)]
        with routed_streams(), stop_on_signal(self.stopped):
            workers = max(1, min(self.concurrency, len(jobs)))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cell") as pool:
                returns = list(pool.map(lambda job: self._run(sweep_dir, *job), jobs))
        if self.stopped.is_set():
            raise SystemExit(130)  # every cell in flight was left interrupted, resumable
        return returns

    def _run(self, sweep_dir: Path, num: int, overrides: list[str]) -> JobReturn:
        """One cell in this thread; never raises (a cell's failure is in its record)."""
        ret = JobReturn(overrides=overrides, status=JobStatus.COMPLETED)
        if self.stopped.is_set():  # stopping: a cell not started stays pending
            return ret
        assert self.hydra_context is not None and self.config is not None
        with _COMPOSE:
            job_cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(job_cfg):
            del job_cfg["hydra"]  # the task's config, as run_job hands it over
        ret.cfg = job_cfg
        with _LOCAL_MODEL if uses_local_model(job_cfg) else nullcontext():
            try:
                run_cell(job_cfg, self._single_run, SweepJob(sweep_dir, num, overrides))
            except SystemExit as exc:  # run_cell's way of saying: Ctrl-C, stop the sweep
                if exc.code == 130:
                    self.stopped.set()
                    request_stop("SIGINT")
        return ret

    def _single_run(self, cfg: DictConfig) -> None:
        assert self.task_function is not None
        self.task_function(cfg)

    def __repr__(self) -> str:
        return f"InProcessLauncher(concurrency={self.concurrency})"


@contextmanager
def routed_streams() -> Iterator[None]:
    """Each cell thread's print to its own log; the driver's to the console."""
    import sys

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
        if key.lstrip("+") != "sweep.concurrency" or not sep:
            out.append(arg)
            continue
        if "-m" not in argv and "--multirun" not in argv:
            from harness.config import ConfigError

            raise ConfigError("sweep.concurrency: sets how many cells of a sweep run at once; add -m")
        out += ["hydra/launcher=inprocess", f"hydra.launcher.concurrency={check_concurrency(value)}"]
    return out

"""One sweep, several driver processes: ``sweep.processes=P`` (issue 37).

One interpreter drives about 90-100 model calls a second; past that the
in-process launcher runs its cells in P processes that share one sweep
folder. The driver runs its own share and starts P-1 workers, each the
sweep's own command line (``harness.sweep.index.relaunch_command``) with
``DRIFT_SWEEP_SHARE=k/P`` set, run by a copy of the driver forked as it
started (``harness.sweep.ready``; a new interpreter where it cannot fork):

- cells are split round-robin by cell number: process k runs the cells whose
  number is k modulo P, as threads, exactly as a one-process sweep would;
- ``model.rpm`` is shared: every process paces its calls through one pacer in
  the sweep folder (``harness.models.pacing``), so a worker that starts late or
  a share that ends early leaves none of the rate unused (10,000 RPM, two
  processes: 6,934-7,481 RPM divided, 7,488-7,775 shared); ``model.tpm``,
  ``model.max_concurrency`` (and ``model.concurrency``) are divided: each
  process's is the sweep's ÷ P, rounded down, at least 1. Both are appended to
  ``limits.jsonl``. Ray actors, which may run on other machines, divide
  ``model.rpm`` too;
- ``sweep.concurrency`` (the cells in flight) is the sweep's: split as the
  cells are, ``N // P`` a process and one more for the first ``N % P``, at
  least 1 (it was each process's, so ``N=2, P=2`` ran 4 cells at once);
- a worker writes its cells' records and nothing of the sweep's own
  (``sweep.json`` and the progress are the driver's);
- the first SIGINT or SIGTERM to the driver is passed to every worker, and a
  worker gets SIGTERM if the driver dies (``PR_SET_PDEATHSIG``, Linux): cells in
  flight are left interrupted, resumable; a worker that dies leaves its cells
  to ``python -m harness.sweep resume``;
- workers hold ``processes.lock`` shared, so a new driver (a resume) waits for
  the workers of a killed one to stop before it starts any cell.

A sweep budget (``budget.sweep_*``) and ``ctl`` belong to one process and are
refused with more than one.

``sweep.engine=ray`` runs the P shares as Ray actors instead, the driver running
none (``harness.sweep.ray_workers``); everything above holds for them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, open_dict

from harness.cli.errors import INTERRUPTED
from harness.models.limiter import JsonlSink, LimitChange
from harness.models.pacing import PACER_DIR_ENV
from harness.store.records import utcnow
from harness.sweep.index import LIMITS_JSONL, read_index, relaunch_command
from harness.sweep.ray_workers import MAX_RAY_WORKERS, check_ray, ray_workers, stop_with_driver
from harness.sweep.ready import (
    MAX_PROCESSES,
    SHARE_ENV,
    ReadyWorker,
    die_with_parent,
    dismiss_ready,
    take_ready,
)

DRIVER_ENV = "DRIFT_SWEEP_DRIVER"  # the driver's pid, which a worker checks is its parent's
PROCESSES_LOCK = "processes.lock"
WORKERS_DIR = "workers"  # each worker's console output: workers/<k>.log
DIVIDED = ("rpm", "tpm", "max_concurrency", "concurrency")  # rpm: by Ray actors only
PACING_DIR = "pacing"  # the shared pacer of model.rpm (PACER_DIR_ENV)
ENGINES = ("local", "ray")  # where the shares run: subprocesses here, or Ray actors


def check_processes(value: object, engine: str = "local") -> int:
    """``sweep.processes``'s value, or a one-line error naming the key."""
    from harness.schema import ConfigError

    most, what = (
        (MAX_RAY_WORKERS, "Ray workers") if engine == "ray" else (MAX_PROCESSES, "this machine's cores")
    )
    n = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= most:
        raise ConfigError(f"sweep.processes: must be a whole number from 1 to {most} ({what}), got {value!r}")
    return n


def check_engine(value: object) -> str:
    """``sweep.engine``'s value, or a one-line error naming the key. Whether Ray is
    installed is the sweep callback's to check, before it makes the folder
    (``need_ray``): a command's keys and values are checked where Ray is not."""
    from harness.schema import ConfigError

    if value not in ENGINES:
        raise ConfigError(f"sweep.engine: must be one of {', '.join(ENGINES)}, got {value!r}")
    return str(value)


def check_engine_args(argv: list[str], value: str) -> str:
    """``sweep.engine=E`` on a command line, with what it needs, checked before anything starts."""
    from harness.schema import ConfigError

    engine = check_engine(value)
    if not any(a.lstrip("+").startswith("sweep.concurrency=") for a in argv):
        raise ConfigError("sweep.engine: runs the in-process launcher's shares; add sweep.concurrency=N")
    prefix = "hydra.launcher.ray."
    given = [a.lstrip("+")[len(prefix) :].split("=", 1) for a in argv if a.lstrip("+").startswith(prefix)]
    check_ray({k: None if v == "null" else v for k, v in (g for g in given if len(g) == 2)})
    return engine


def engine_of(argv: list[str]) -> str:
    """The ``sweep.engine`` a command line asks for (``local`` when none)."""
    given = [a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("sweep.engine=")]
    return given[-1] if given else "local"


def worker_share() -> tuple[int, int] | None:
    """(k, P) when this process is a worker started by a driver, else None."""
    share = os.environ.get(SHARE_ENV)
    if not share:
        return None
    k, _, p = share.partition("/")
    return int(k), int(p)


@dataclass
class Processes:
    """This process's part of a sweep run by ``processes`` driver processes."""

    sweep_dir: Path
    processes: int
    stopped: threading.Event
    engine: str = "local"
    ray: dict[str, Any] | None = None  # hydra.launcher.ray, checked (harness.sweep.ray_workers)

    def __post_init__(self) -> None:
        share = worker_share()
        self.k, self.processes = share if share else (0, self.processes)
        self.worker = share is not None

    def mine(self, jobs: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
        """This process's cells: round-robin by cell number (none for a Ray driver)."""
        if self.engine == "ray" and not self.worker:
            return []
        return [job for job in jobs if job[0] % self.processes == self.k]

    def in_flight(self, concurrency: int) -> int:
        """This process's part of ``sweep.concurrency``, the sweep's cells in flight:
        split as the cells are (``N // P``, one more for the first ``N % P``), at least 1."""
        if self.processes == 1:
            return concurrency
        return max(1, concurrency // self.processes + (self.k < concurrency % self.processes))

    @property
    def divided(self) -> tuple[str, ...]:
        """The model's limits each process takes a part of (the rest are shared)."""
        return DIVIDED if self.engine == "ray" else tuple(n for n in DIVIDED if n != "rpm")

    def divide(self, cfg: DictConfig) -> None:
        """Set this process's part of the model's limits in a cell's config."""
        model = cfg.get("model")
        if self.processes == 1 or not model:
            return
        with open_dict(model):
            for name in self.divided:
                if model.get(name) is not None:
                    model[name] = max(1, int(model[name]) // self.processes)

    @contextmanager
    def held(self, master: DictConfig) -> Iterator[None]:
        """The driver: the workers' lock, the division recorded, and P-1 workers until
        they end. A worker: the shared lock that tells a later driver it still runs."""
        lock = os.open(self.sweep_dir / PROCESSES_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if self.worker:
                fcntl.flock(lock, fcntl.LOCK_SH)
                if self.engine == "ray":
                    stop_with_driver(self.stopped)
                else:
                    _die_with_driver(self.stopped)
                yield
                return
            # the sweep's driver.lock is the index callback's (harness.sweep.callback)
            fcntl.flock(lock, fcntl.LOCK_EX)  # a killed driver's workers are still stopping
            fcntl.flock(lock, fcntl.LOCK_SH)
            if self.processes == 1 and self.engine == "local":
                yield
                return
            if self.processes > 1:
                self.record(master)
            with self.pacing(), self.workers():
                yield
        finally:
            os.close(lock)

    def record(self, master: DictConfig) -> None:
        """Append the division (or the sharing) of each set limit to the sweep's ``limits.jsonl``."""
        model, sink = master.get("model") or {}, JsonlSink(self.sweep_dir / LIMITS_JSONL)
        reason = f"divided by sweep.processes={self.processes}"
        launcher = (master.get("hydra") or {}).get("launcher") or {}
        if (cells := launcher.get("concurrency")) is not None:  # the first process's part: the most
            split = f"{reason}, as the cells are"
            sink(
                LimitChange(
                    utcnow().isoformat(),
                    "sweep.concurrency per process",
                    cells,
                    self.in_flight(int(cells)),
                    split,
                )
            )
        for name in DIVIDED:
            if (value := model.get(name)) is None:
                continue
            if name in self.divided:
                new = max(1, int(value) // self.processes)
                sink(LimitChange(utcnow().isoformat(), f"model.{name} per process", value, new, reason))
            else:
                shared = f"shared by sweep.processes={self.processes} ({PACING_DIR}/)"
                sink(LimitChange(utcnow().isoformat(), f"model.{name}", value, value, shared))

    @contextmanager
    def pacing(self) -> Iterator[None]:
        """The driver's and its workers' shared pacer of ``model.rpm``, fresh, for the run."""
        if self.engine == "ray":
            yield
            return
        folder = self.sweep_dir / PACING_DIR
        shutil.rmtree(folder, ignore_errors=True)  # a pacer's time is this run's
        folder.mkdir()
        before = os.environ.get(PACER_DIR_ENV)
        os.environ[PACER_DIR_ENV] = str(folder)  # the workers inherit it
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(PACER_DIR_ENV, None)
            else:
                os.environ[PACER_DIR_ENV] = before

    @contextmanager
    def workers(self) -> Iterator[None]:
        """P-1 workers running the sweep's command line; a stop of the driver is theirs."""
        command = relaunch_command(self.sweep_dir, read_index(self.sweep_dir))
        (self.sweep_dir / WORKERS_DIR).mkdir(exist_ok=True)
        if self.engine == "ray":
            dismiss_ready()  # Ray's actors are its own processes
            shares = [{SHARE_ENV: f"{k}/{self.processes}"} for k in range(self.processes)]
            with ray_workers(self.sweep_dir, command[3:], shares, self.stopped, self.ray):
                yield
            return
        procs = [self._start(command, k) for k in range(1, self.processes)]
        dismiss_ready()  # copies forked for more workers than this sweep starts
        done = threading.Event()
        relay = threading.Thread(target=self._relay, args=(procs, done), name="sweep-workers", daemon=True)
        relay.start()
        try:
            yield
        finally:
            for k, proc in enumerate(procs, start=1):  # the driver's share is done (or stopped)
                code = proc.wait()
                # a worker stopped by the stop relayed to it before its own handler was set (its
                # start-up) ends by that signal: the interruption, which the driver reports
                stopped_by = self.stopped.is_set() and code in (-signal.SIGTERM, -signal.SIGINT)
                if code not in (0, INTERRUPTED) and not stopped_by:  # its cells are left to resume
                    log = self.sweep_dir / WORKERS_DIR / f"{k}.log"
                    print(f"[sweep] worker {k} exited {code}; see {log}", file=sys.stderr)
            done.set()
            relay.join()

    def _start(self, command: list[str], k: int) -> subprocess.Popen[bytes] | ReadyWorker:
        """Worker ``k``: its copy forked at start-up (``harness.sweep.ready``), or a new interpreter."""
        env = {**os.environ, SHARE_ENV: f"{k}/{self.processes}", DRIVER_ENV: str(os.getpid())}
        if (ready := take_ready(k)) is not None:
            try:
                ready.start(command[3:], env, self.sweep_dir / WORKERS_DIR / f"{k}.log")
                return ready
            except OSError:  # the copy is gone (killed by hand): a new interpreter, then
                ready.wait()
        with open(self.sweep_dir / WORKERS_DIR / f"{k}.log", "ab") as log:
            return subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )

    def _relay(self, procs: list[subprocess.Popen[bytes] | ReadyWorker], done: threading.Event) -> None:
        """Pass the driver's stop to every worker still running."""
        while not done.wait(0.1):
            if self.stopped.is_set():
                for proc in procs:
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)
                return


def _die_with_driver(stopped: threading.Event) -> None:
    """In a worker: SIGTERM when the driver dies (Linux's PR_SET_PDEATHSIG; elsewhere
    nothing), and a stop at once if it died before that was set."""
    die_with_parent()
    if str(os.getppid()) != os.environ.get(DRIVER_ENV):
        stopped.set()


def divisions(sweep_dir: Path) -> list[dict[str, Any]]:
    """The divisions (and sharings) recorded in ``limits.jsonl`` (what a test or a reader checks)."""
    import json

    path = sweep_dir / LIMITS_JSONL
    lines = path.read_text().splitlines() if path.exists() else []
    return [
        c for c in map(json.loads, filter(None, lines)) if c["reason"].startswith(("divided by", "shared by"))
    ]

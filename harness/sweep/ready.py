"""Workers of ``sweep.processes=P`` forked as the driver starts, ready for their command.

A worker started as a new interpreter (``subprocess``) spends its first second
or more importing what the driver imported already (LangGraph, LangChain,
Hydra: ~1.1 s of CPU on this machine), so its share of the cells started
1.6 s after the driver's in a 256-cell sweep. So a driver whose command line
asks for P > 1 local processes forks P-1 copies of itself once its modules
are imported, before Hydra or any thread runs (``fork_ready``). Each copy
waits on a pipe. When the driver reaches the point where it would start a
worker, it writes that worker's command line and environment down the pipe
(``ReadyWorker.start``); the copy then goes on exactly as the worker started
with that command would, from the same ``harness.run.cli``.

A copy exits at once, having done nothing, when its pipe closes before a
command comes (the driver failed its config check, or ended) or when the
driver dies (``PR_SET_PDEATHSIG``, Linux). ``DRIFT_SWEEP_PREFORK=0`` turns this
off, and so does anything that makes a fork unsafe: a thread already running,
a platform without ``fork``. The driver then starts each worker as a new
interpreter, as before; nothing else differs.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

PREFORK_ENV = "DRIFT_SWEEP_PREFORK"  # "0": start every worker as a new interpreter
SHARE_ENV = "DRIFT_SWEEP_SHARE"  # "k/P": this process is worker k of P (harness.sweep.processes)
MAX_PROCESSES = max(2, os.cpu_count() or 1)  # past the cores, processes only contend
_PROCESS_KEYS = ("sweep.processes", "hydra.launcher.processes")
_READY: dict[int, ReadyWorker] = {}  # worker k -> its copy, forked at start-up


@dataclass
class ReadyWorker:
    """A forked copy of the driver waiting for its command; a ``Popen``'s
    ``wait`` / ``poll`` / ``send_signal`` once it runs."""

    pid: int
    pipe: int | None  # the write end of its pipe (None once its command is sent)
    returncode: int | None = None

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        """Send this copy its command line (what follows ``python -m harness.run``), its
        environment and its console log: it runs as that command would from here on."""
        assert self.pipe is not None
        message = json.dumps({"argv": argv, "env": env, "log": str(log)}).encode()
        with os.fdopen(self.pipe, "wb") as pipe:
            self.pipe = None
            pipe.write(message)

    def dismiss(self) -> None:
        """Close its pipe unsent: the copy exits having done nothing."""
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None
        self.wait()

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with suppress(ProcessLookupError):
                os.kill(self.pid, sig)


def _values(argv: list[str], wanted: Callable[[str], bool]) -> list[str]:
    """The values ``key=value`` overrides in ``argv`` (``+key=``, ``++key=`` too) give keys ``wanted`` takes."""
    pairs = (a.lstrip("+").split("=", 1) for a in argv)
    return [pair[1] for pair in pairs if len(pair) == 2 and wanted(pair[0])]


def processes_asked(argv: list[str]) -> int:
    """The P of ``sweep.processes=P`` (or ``hydra.launcher.processes=P``, a resume's) in
    ``argv``; 1 if none or not a whole number (the config check says so later)."""
    given = _values(argv, _PROCESS_KEYS.__contains__)
    value = given[-1].strip() if given else "1"
    return int(value) if value.isdigit() else 1


def _local(argv: list[str]) -> bool:
    engines = _values(argv, lambda key: key.endswith(".engine"))
    return not engines or engines[-1] == "local"


def fork_ready(argv: list[str]) -> bool:
    """Fork the P-1 workers a multirun of ``argv`` will ask for, each waiting for its
    command. True in a copy, once it has one (``sys.argv[1:]`` is that command)."""
    wanted = processes_asked(argv)
    if (
        not 2 <= wanted <= MAX_PROCESSES  # more: the config check refuses it
        or not ({"-m", "--multirun"} & set(argv))
        or not _local(argv)
        or os.environ.get(SHARE_ENV)  # a worker itself
        or os.environ.get(PREFORK_ENV) == "0"
        or not hasattr(os, "fork")
        or threading.active_count() > 1  # a lock another thread holds would stay held in the copy
    ):
        return False
    sys.stdout.flush()
    sys.stderr.flush()  # or the copy would write what the driver had buffered again
    pipes = [os.pipe() for _ in range(1, wanted)]
    driver = os.getpid()
    for k, (read, write) in enumerate(pipes, start=1):
        pid = os.fork()
        if pid == 0:
            for r, w in pipes:  # only its own read end: a pipe closes when its driver's end does
                for fd in (r, w):
                    if fd != read:
                        with suppress(OSError):
                            os.close(fd)
            _await_command(read, driver)
            return True
        os.close(read)
        _READY[k] = ReadyWorker(pid, write)
    return False


def _await_command(read: int, driver: int) -> None:
    """In a copy: block until the driver sends a command, and take it on; exit if none comes."""
    die_with_parent()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the driver's console and pipes are not the copy's to hold open
        os.dup2(null, fd)
    try:
        if os.getppid() != driver:  # it died before the prctl above
            os._exit(0)
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
    except BaseException:  # Ctrl-C reaches the whole process group: a copy without a command just ends
        os._exit(0)
    if not data:
        os._exit(0)
    # a terminal's Ctrl-C reaches the whole process group; until its launch sets its own
    # handler, the worker is stopped by its driver, which passes each stop on as SIGTERM
    # (a KeyboardInterrupt here was a traceback in its log and an exit that read as a crash)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    message = json.loads(data)
    os.environ.clear()
    os.environ.update(message["env"])
    log = os.open(message["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    share = message["env"].get(SHARE_ENV, "?")
    os.write(2, f"=== worker {share} (pid {os.getpid()}), forked as its driver started ===\n".encode())
    sys.argv[1:] = message["argv"]


def die_with_parent() -> None:
    """SIGTERM to this process when its parent dies (Linux's PR_SET_PDEATHSIG; elsewhere nothing)."""
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def take_ready(k: int) -> ReadyWorker | None:
    """Worker ``k``'s forked copy, if one waits (each is taken once)."""
    return _READY.pop(k, None)


def dismiss_ready() -> None:
    """Let every copy not taken end (a sweep that started fewer workers than its command asked)."""
    while _READY:
        _READY.popitem()[1].dismiss()

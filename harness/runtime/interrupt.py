"""Clean interruption: the first SIGINT, SIGTERM or SIGHUP (the terminal went
away) asks the run to stop after the node in flight (its model call finishes
and its record lands); a second one abandons the call at once. Either way
the run stays resumable."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


# A stop asked of every run in the process: many sweep cells run as threads
# of one process (harness.sweep.launcher), and only the main thread gets signals.
_EVERY_RUN: list[str] = []


def request_stop(reason: str) -> None:
    """Ask every run of the process to stop after its node in flight."""
    if not _EVERY_RUN:
        _EVERY_RUN.append(reason)


def clear_stop() -> None:
    _EVERY_RUN.clear()


# A stop asked of one run of the process by its key (a sweep cell's name:
# ``python -m harness.sweep ctl <sweep> cancel <cell>``); the runs of this thread carry it.
_KEY: ContextVar[str | None] = ContextVar("drift_stop_key", default=None)
_ONE_RUN: dict[str, str] = {}


@contextmanager
def stoppable_as(key: str) -> Iterator[None]:
    """The runs made in the enclosed block stop when ``request_stop_of(key)`` asks;
    leaving the block forgets any such request (the key may run again later)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)
        _ONE_RUN.pop(key, None)


def request_stop_of(key: str, reason: str) -> None:
    """Ask the run(s) made under ``stoppable_as(key)`` to stop after their node in flight."""
    _ONE_RUN.setdefault(key, reason)


def stop_reason() -> str | None:
    """Why the run of this thread should stop now, if any stop was asked of it."""
    key = _KEY.get()
    return (_ONE_RUN.get(key) if key is not None else None) or (_EVERY_RUN[0] if _EVERY_RUN else None)


class SecondSignal(KeyboardInterrupt):
    """The second stop signal of a run: the call in flight is abandoned (a
    KeyboardInterrupt from anywhere else is a Ctrl-C before a run's handler was set)."""


class StopOnSignal:
    def __init__(self) -> None:
        self._requested: str | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> str | None:
        """Why this run should stop: its own signal, or a stop of every run."""
        return self._requested or stop_reason()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._requested is not None:
            raise SecondSignal  # abandon the call in flight
        self._requested = signal.Signals(signum).name

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


class RunStopped(Exception):
    """A participant ended the run on purpose (chat mode's ``/quit``): the run
    is left ``interrupted``, resumable, with the reason in its history."""

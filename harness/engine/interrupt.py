"""Clean interruption: the first SIGINT, SIGTERM or SIGHUP (the terminal went
away) asks the run to stop after the node in flight (its model call finishes
and its record lands); a second one abandons the call at once. Either way
the run stays resumable."""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class StopOnSignal:
    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt  # second signal: abandon the call in flight
        self.requested = signal.Signals(signum).name

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

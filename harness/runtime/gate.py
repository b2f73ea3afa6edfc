"""The gate every model call passes just before it is sent: closed by
``python -m harness.sweep ctl <sweep> pause [endpoint]`` (``harness.sweep.steer``),
it holds new calls while the calls already sent finish (quiesce), and opens
again on ``resume``. One gate per process, as the cells of an in-process sweep
share one.

A hold names every call (``*``), a provider (``openai``: its every model) or
one model spec (``openai:gpt-4o-mini``). A call held when its run is asked to
stop (Ctrl-C, ``ctl cancel``) raises ``RunStopped``: the run is left
interrupted and resumable, as after any stop. While nothing is held a call
pays one set lookup.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from harness.runtime.interrupt import RunStopped, stop_reason
from harness.slots import waiting

EVERY = "*"
POLL_S = 0.2  # how often a held call looks again for a stop asked of its run


class Gate:
    """The process's holds, and the calls waiting on them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: frozenset[str] = frozenset()
        self.waiting = 0  # calls held right now
        self._sent: Counter[str] = Counter()  # calls past the gate and not yet answered, by spec

    @property
    def held(self) -> list[str]:
        return sorted(self._held)

    def hold(self, endpoint: str = EVERY) -> None:
        with self._cond:
            self._held = self._held | {endpoint}

    def release(self) -> None:
        """Open for every call (``resume`` lifts every hold)."""
        with self._cond:
            self._held = frozenset()
            self._cond.notify_all()

    def holds(self, spec: str) -> bool:
        held = self._held
        return bool(held) and (EVERY in held or spec in held or spec.split(":", 1)[0] in held)

    def wait(self, spec: str) -> None:
        """Return once calls to ``spec`` may go; raise ``RunStopped`` if the run is stopped meanwhile."""
        if not self.holds(spec):
            return
        with waiting(), self._cond:  # held: the cell's run slot is lent out (a call may keep it)
            self.waiting += 1
            try:
                while self.holds(spec):
                    if (reason := stop_reason()) is not None:
                        raise RunStopped(reason)
                    self._cond.wait(POLL_S)
            finally:
                self.waiting -= 1

    @contextmanager
    def through(self, spec: str) -> Iterator[None]:
        """Wait at the gate, then count the call as sent until it returns (``settle``)."""
        self.wait(spec)
        with self._cond:
            self._sent[spec] += 1
        try:
            yield
        finally:
            with self._cond:
                self._sent[spec] -= 1
                self._cond.notify_all()

    def settle(self, seconds: float) -> int:
        """Wait up to ``seconds`` for the calls sent to held endpoints to return (a
        pause's quiesce); how many are still out."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while (out := sum(n for spec, n in self._sent.items() if self.holds(spec))) and (
                left := deadline - time.monotonic()
            ) > 0:
                self._cond.wait(min(left, POLL_S))
            return out


_GATE = Gate()


def gate() -> Gate:
    return _GATE

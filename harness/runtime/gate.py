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

from harness.runtime.interrupt import RunStopped, stop_reason

EVERY = "*"
POLL_S = 0.2  # how often a held call looks again for a stop asked of its run


class Gate:
    """The process's holds, and the calls waiting on them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: frozenset[str] = frozenset()
        self.waiting = 0  # calls held right now

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
        with self._cond:
            self.waiting += 1
            try:
                while self.holds(spec):
                    if (reason := stop_reason()) is not None:
                        raise RunStopped(reason)
                    self._cond.wait(POLL_S)
            finally:
                self.waiting -= 1


_GATE = Gate()


def gate() -> Gate:
    return _GATE

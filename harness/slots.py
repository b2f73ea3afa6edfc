"""Run slots: how many threads of an in-process sweep's cells run Python at once.

A driver runs each cell of an in-process sweep as a thread, and on the
scripted model (or any fast provider) every one of them is always ready to
run. Python runs one thread at a time (the GIL): each thread waiting for it
wakes at every switch interval and every blocking call of the one running,
so 64 ready cells cost ~500 futex calls a model call of handing the GIL
about, most of the driver's system time (issue 37). A cell holds one of
``SLOTS`` slots while it runs and lends it out while it waits (a model call
and its retries, a fan-out's jobs, a search, an fsync): at most ``SLOTS``
cells contend for the GIL, and the others sleep until a slot is handed to
them, first come first served (~80 futex calls a model call, ``strace -c``).

Lending is not free: the slot goes to a sleeping cell and comes back, two
thread switches. A local disk's fsync (~0.15 ms here) is shorter than that is
worth, so an fsync lends only where this process's fsyncs have lately taken
longer than ``LEND_AFTER_S`` (``syncing``): a network file system, a disk
under a flush. Model calls, searches and fan-outs always lend.

Threads that hold no slot (the main thread, a fan-out's workers, any run
outside a sweep) pass through ``waiting`` unchanged.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager

SLOTS = 2  # one running, one ready the moment it blocks; a wait not lent out stalls one of two
# Not lending a local disk's fsyncs took the scripted 64-cell sweep from ~87k
# voluntary thread switches to ~41k, and a tenth off the driver's CPU.
LEND_AFTER_S = 0.001


class Slots:
    """A counting semaphore that hands a released slot to the longest waiter, so
    a cell that lends its slot for a call cannot take it back ahead of the queue."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._queue: deque[threading.Lock] = deque()
        self._held = threading.local()

    def holding(self) -> bool:
        return getattr(self._held, "on", False)

    def acquire(self) -> None:
        with self._lock:
            if self._free and not self._queue:
                self._free -= 1
                self._held.on = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._queue.append(turn)
        turn.acquire()  # released by the thread that hands its slot over
        self._held.on = True

    def release(self) -> None:
        self._held.on = False
        with self._lock:
            if self._queue:
                self._queue.popleft().release()  # the slot passes on, never freed between
            else:
                self._free += 1


_SLOTS = Slots(SLOTS)


@contextmanager
def slot() -> Iterator[None]:
    """Hold a slot for the block (a cell's run); a thread already holding one keeps it."""
    if _SLOTS.holding():
        yield
        return
    _SLOTS.acquire()
    try:
        yield
    finally:
        _SLOTS.release()


class Lending:
    """Whether waits of one kind are worth lending a slot for: their typical length,
    a moving average of every one so far, against ``LEND_AFTER_S``. It lends until
    its waits have shown themselves short, and again once slow ones raise it."""

    __slots__ = ("typical_s",)

    def __init__(self) -> None:
        self.typical_s = 2 * LEND_AFTER_S

    def lends(self) -> bool:
        return self.typical_s >= LEND_AFTER_S

    def took(self, seconds: float) -> None:
        # no lock: two threads' updates racing lose one sample of an average
        self.typical_s += 0.05 * (seconds - self.typical_s)


FSYNCS = Lending()  # a process's fsyncs share one: they go to one disk, or a few


class _Waiting:
    """``waiting()``: a class, not a generator, as it wraps every fsync and model call."""

    __slots__ = ("lent", "lending", "began")

    def __init__(self, lending: Lending | None) -> None:
        self.lending = lending

    def __enter__(self) -> None:
        self.lent = _SLOTS.holding() and (self.lending is None or self.lending.lends())
        if self.lent:
            _SLOTS.release()
        if self.lending is not None:
            self.began = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        if self.lending is not None:
            self.lending.took(time.perf_counter() - self.began)
        if self.lent:
            _SLOTS.acquire()


def waiting() -> _Waiting:
    """Lend this thread's slot, if it holds one, while the block waits."""
    return _Waiting(None)


def syncing() -> _Waiting:
    """``waiting`` for an fsync: lent only while this process's fsyncs take long (``FSYNCS``)."""
    return _Waiting(FSYNCS)

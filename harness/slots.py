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
under a flush. Model calls that wait, searches and fan-outs always lend.

A cell whose model calls never wait (``ChatModel.waits``: the scripted model
at zero latency) has nothing to lend, so a second such cell beside it would
only take the GIL from it at every system call of either. It runs alone: it
trades its slot for all of them (``alone``) and keeps them through its calls.
The scripted 64-cell sweep at zero latency went from 4.18 to 3.73 s of CPU on
tmpfs (means of six alternating pairs), its system time from 0.53 to 0.41 s.

Threads that hold no slot (the main thread, a fan-out's workers, any run
outside a sweep) pass through ``waiting`` and ``alone`` unchanged.
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
    """A counting semaphore that hands released slots to the longest waiter first, so
    a cell that lends its slot for a call cannot take it back ahead of the queue. A
    thread takes one slot or several at once, and gives back all it holds."""

    def __init__(self, n: int) -> None:
        self.size = n
        self._free = n
        self._lock = threading.Lock()
        self._queue: deque[tuple[threading.Lock, int]] = deque()  # a waiter's turn, and how many it asked
        self._held = threading.local()

    def held(self) -> int:
        """How many slots this thread holds."""
        return getattr(self._held, "n", 0)

    def holding(self) -> bool:
        return self.held() > 0

    def acquire(self, n: int = 1) -> None:
        """Take ``n`` slots, once every earlier waiter has had its own."""
        with self._lock:
            if self._free >= n and not self._queue:
                self._free -= n
                self._held.n = n
                return
            turn = threading.Lock()
            turn.acquire()
            self._queue.append((turn, n))
        turn.acquire()  # released by the thread that hands the slots over
        self._held.n = n

    def release(self) -> int:
        """Give back every slot this thread holds, to the waiters in their order; how many."""
        n, self._held.n = self.held(), 0
        with self._lock:
            self._free += n
            while self._queue and self._free >= self._queue[0][1]:
                turn, wanted = self._queue.popleft()
                self._free -= wanted  # they pass on, never free between
                turn.release()
        return n


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


@contextmanager
def alone(yes: bool = True) -> Iterator[None]:
    """Hold every slot for the block (``yes``: a cell whose model calls never wait), if
    this thread holds one: it queues for them all, and takes back what it had after."""
    had = _SLOTS.held()
    if not yes or had in (0, _SLOTS.size):
        yield
        return
    _SLOTS.release()
    _SLOTS.acquire(_SLOTS.size)
    try:
        yield
    finally:
        _SLOTS.release()
        _SLOTS.acquire(had)


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
        lends = _SLOTS.holding() and (self.lending is None or self.lending.lends())
        self.lent = _SLOTS.release() if lends else 0  # a cell alone lends all it holds
        if self.lending is not None:
            self.began = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        if self.lending is not None:
            self.lending.took(time.perf_counter() - self.began)
        if self.lent:
            _SLOTS.acquire(self.lent)


def waiting() -> _Waiting:
    """Lend this thread's slot, if it holds one, while the block waits."""
    return _Waiting(None)


def syncing() -> _Waiting:
    """``waiting`` for an fsync: lent only while this process's fsyncs take long (``FSYNCS``)."""
    return _Waiting(FSYNCS)

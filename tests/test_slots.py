"""Run slots (harness.slots): at most N cell threads run at once, a released slot
goes to the longest waiter, and a thread lends its slot while it waits (an
fsync only while fsyncs run long)."""

from __future__ import annotations

import threading
import time

from harness import slots
from harness.slots import Lending, Slots, slot, syncing, waiting


def _queued(pool: Slots, n: int) -> None:
    deadline = time.monotonic() + 5
    while len(pool._queue) < n:
        assert time.monotonic() < deadline, "threads never queued"
        time.sleep(0.001)


def test_a_released_slot_goes_to_the_longest_waiter_not_back_to_its_holder() -> None:
    pool, order = Slots(1), []
    pool.acquire()

    def take(name: str) -> None:
        pool.acquire()
        order.append(name)
        pool.release()

    threads = []
    for k, name in enumerate("bc"):
        threads.append(threading.Thread(target=take, args=(name,)))
        threads[-1].start()
        _queued(pool, k + 1)
    pool.release()
    pool.acquire()  # the releasing thread asks again at once: it queues behind b and c
    order.append("a")
    pool.release()
    for t in threads:
        t.join(5)
    assert order == ["b", "c", "a"]


def _other_cell(ran: threading.Event) -> threading.Thread:
    """A cell thread that sets ``ran`` once it gets a slot, queued behind the caller's."""

    def other() -> None:
        with slot():
            ran.set()

    t = threading.Thread(target=other)
    t.start()
    _queued(slots._SLOTS, 1)
    return t


def test_a_cell_lends_its_slot_while_it_waits_and_a_thread_without_one_passes(monkeypatch) -> None:
    monkeypatch.setattr(slots, "_SLOTS", Slots(1))
    ran = threading.Event()
    with waiting():  # the main thread holds no slot: nothing to lend, nothing to wait for
        pass
    with slot():
        t = _other_cell(ran)
        assert not ran.wait(0.2)  # the one slot is held
        with waiting():  # lent while this cell waits: the other cell runs
            assert ran.wait(5)
        t.join(5)
    assert slots._SLOTS._free == 1


def test_an_fsync_lends_the_slot_only_while_this_process_fsyncs_run_long(monkeypatch) -> None:
    monkeypatch.setattr(slots, "_SLOTS", Slots(1))
    monkeypatch.setattr(slots, "FSYNCS", fsyncs := Lending())
    assert fsyncs.lends()  # nothing measured yet
    for _ in range(100):
        fsyncs.took(0.000_15)  # a local disk's
    assert not fsyncs.lends()
    ran = threading.Event()
    with slot():
        t = _other_cell(ran)
        with syncing():  # expected short, as they have been: kept, the other cell still waits
            assert not ran.wait(0.2)
        assert fsyncs.lends()  # that one took 0.2 s, a flush: the next lends
        with syncing():
            assert ran.wait(5)
        t.join(5)
    assert slots._SLOTS._free == 1

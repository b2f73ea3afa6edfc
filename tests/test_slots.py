"""Run slots (harness.slots): at most N cell threads run at once, a released slot
goes to the longest waiter, a thread lends its slot while it waits (an fsync only
while fsyncs run long, a retry's backoff always), and a cell whose model calls
never wait runs alone."""

from __future__ import annotations

import threading
import time

import pytest

from harness import slots
from harness.models.base import Completion, ModelRequest, ProviderError, waits
from harness.models.registry import build_model
from harness.models.retry import call_with_retry
from harness.models.scripted import ScriptedModel
from harness.runtime.gate import Gate
from harness.schema import ModelConfig, RetryConfig
from harness.slots import Lending, Slots, alone, slot, syncing, waiting


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


def _other_cell(ran: threading.Event, queues: bool = True) -> threading.Thread:
    """A cell thread that sets ``ran`` once it gets a slot; ``queues``: it is queued
    behind the caller's before this returns (False: a slot may be free for it)."""

    def other() -> None:
        with slot():
            ran.set()

    t = threading.Thread(target=other)
    t.start()
    if queues:
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


def test_a_waiter_for_every_slot_is_not_overtaken_by_a_later_one_asking_for_one() -> None:
    pool, order = Slots(2), []
    pool.acquire()

    def take(name: str, n: int) -> None:
        pool.acquire(n)
        order.append(name)
        pool.release()

    both = threading.Thread(target=take, args=("both", 2))
    both.start()
    _queued(pool, 1)
    one = threading.Thread(target=take, args=("one", 1))
    one.start()
    _queued(pool, 2)  # queued, though a slot is free: "both" asked first
    assert order == []
    pool.release()
    for t in (both, one):
        t.join(5)
    assert order == ["both", "one"] and pool._free == 2


def test_a_cell_alone_holds_every_slot_lends_them_all_and_takes_back_its_own(monkeypatch) -> None:
    monkeypatch.setattr(slots, "_SLOTS", Slots(2))
    with alone():  # the main thread holds no slot: it passes
        assert slots._SLOTS.held() == 0
    ran = threading.Event()
    with slot():
        with alone(False):
            assert slots._SLOTS.held() == 1
        with alone():
            assert slots._SLOTS.held() == 2
            t = _other_cell(ran)
            assert not ran.wait(0.2)  # a second slot exists, but this cell holds it
            with waiting():  # a wait lends both
                assert ran.wait(5)
            assert slots._SLOTS.held() == 2
        t.join(5)
        assert slots._SLOTS.held() == 1
    assert slots._SLOTS._free == 2


def test_only_the_scripted_model_at_zero_latency_never_waits() -> None:
    assert not waits(ScriptedModel())
    assert waits(ScriptedModel(latency_s=0.01))

    class Plugin:  # a model that says nothing of it waits, as a provider's does
        spec = "plugin:x"

    assert waits(Plugin())  # type: ignore[arg-type]


def test_a_retry_backoff_lends_the_slot_a_call_that_never_waits_keeps(monkeypatch) -> None:
    monkeypatch.setattr(slots, "_SLOTS", Slots(1))
    ran, failures = threading.Event(), [ProviderError("busy", 503)]

    def call() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    with slot():
        t = _other_cell(ran)
        policy = RetryConfig(max_attempts=2, initial_s=0.3, jitter_s=0)
        assert call_with_retry(call, policy) == "ok"
        assert ran.is_set()  # it ran during the 0.3 s backoff
        t.join(5)


class _Probe:
    """The scripted model, asking at its first call whether another cell gets to run."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner, self.spec, self.waits = inner, inner.spec, waits(inner)
        self.other: threading.Thread | None = None
        self.other_ran = False

    def model_files(self) -> dict[str, str]:
        return {}

    def complete(self, request: ModelRequest) -> Completion:
        if self.other is None:
            ran = threading.Event()
            self.other = _other_cell(ran, queues=False)
            # lent, the slot is handed on at once (up to 5 s on a loaded machine); alone, never
            self.other_ran = ran.wait(5 if self.waits else 0.3)
        return self.inner.complete(request)


@pytest.mark.parametrize(("latency", "alone_"), [(0, True), (0.01, False)])
def test_a_run_whose_model_never_waits_runs_alone_through_its_calls(
    monkeypatch, run, latency, alone_
) -> None:
    monkeypatch.setattr(slots, "_SLOTS", Slots(2))
    probes: list[_Probe] = []

    def build(cfg: ModelConfig) -> _Probe:
        probes.append(_Probe(build_model(cfg)))
        return probes[-1]

    def cell() -> None:
        with slot():
            run("rounds=1", f"model.latency_s={latency}", build=build)

    worker = threading.Thread(target=cell)
    worker.start()
    worker.join(30)
    assert probes and probes[0].other is not None
    probes[0].other.join(5)
    assert probes[0].other_ran is (not alone_)  # alone, it holds the second slot too
    assert slots._SLOTS._free == 2  # every slot given back, the other cell's too


def test_a_call_held_at_the_gate_lends_the_slot_its_model_would_keep(monkeypatch) -> None:
    monkeypatch.setattr(slots, "_SLOTS", Slots(1))
    paused, ran = Gate(), threading.Event()
    paused.hold("scripted")  # ctl pause scripted, in a sweep whose other cells run another model
    with slot():
        t = _other_cell(ran)
        threading.Timer(0.3, paused.release).start()
        paused.wait("scripted:default")  # held 0.3 s: the other cell runs meanwhile
        assert ran.is_set()
        t.join(5)

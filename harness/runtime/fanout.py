"""Independent calls of one step, sent together (``format.fan_out``).

A format hands ``together`` the calls of one step that read nothing the
others write: a panel's analysts within a round read only the round before.
With ``format.fan_out`` on (the default) and a model whose calls wait on the
network, they run on threads, one each, so a 4-analyst round waits about one
call instead of four. Otherwise they run in turn, in the calling thread.

Either way the run folder holds the same records in the same order:

- each call writes only its own seat's logs (prompt, reply, notes), so each
  of those files gets what a sequential run would write;
- the one log the calls share, ``events.jsonl`` (retries, schema failures),
  gets them in seat order: a call's events are written at once while every
  call before it has finished, and held until then otherwise (``Sequencer``,
  through ``EventLog.gate``);
- what the step publishes (a statement) the format appends after
  ``together`` returns, in seat order.

Why threads in one node rather than LangGraph's ``Send``: a ``Send``
superstep raises the error of the first branch to *finish* and leaves its
siblings running, still writing after the run has been recorded failed.
Here every call of the group ends before the node does, held events land,
and the error raised is the first seat's, as a sequential run raises it.

What a SIGKILL costs: the retry events a later seat held for its turn. Its
reply landed in its own log and replays on resume, so nothing is paid twice.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from harness.runtime.events import EventLog
from harness.schema import Config
from harness.slots import waiting

T = TypeVar("T")

# Specs whose calls gain nothing from threads: a llama.cpp model answers one
# call at a time per process (a lock), and a person types one answer at a time.
IN_TURN = ("local:", "human:")


def waits(cfg: Config, role: str) -> bool:
    """Whether ``role``'s calls wait on I/O: an API model, or the scripted
    model when ``model.latency_s`` stands in for one (without it, a call is
    pure CPU and threads would only contend for the interpreter)."""
    model = cfg.role_model(role)[0]
    if model.spec.startswith("scripted:"):
        return model.latency_s > 0
    return not model.spec.startswith(IN_TURN)


def fans_out(cfg: Config, roles: Iterable[str]) -> bool:
    """Whether the calls of ``roles`` go out together: ``format.fan_out`` is
    on and at least one of them waits on I/O."""
    return bool(getattr(cfg.format, "fan_out", False)) and any(waits(cfg, r) for r in roles)


class Sequencer:
    """Writes of concurrent lanes (lane = a call's place in seat order), in
    lane order: lane k's writes go through at once once lanes 0..k-1 have
    finished, and are held until then. A write from no lane goes through."""

    def __init__(self, lanes: int) -> None:
        self._lock = threading.Lock()  # also keeps two writes from interleaving
        self._local = threading.local()
        self._head = 0  # the first lane not finished
        self._finished = [False] * lanes
        self._held: list[list[Callable[[], object]]] = [[] for _ in range(lanes)]

    def write(self, action: Callable[[], object]) -> None:
        lane = getattr(self._local, "lane", None)
        with self._lock:
            if lane is None or lane <= self._head:
                action()
            else:
                self._held[lane].append(action)

    def run(self, lane: int, job: Callable[[], T]) -> T:
        """``job`` as lane ``lane``, on the calling thread."""
        self._local.lane = lane
        try:
            return job()
        finally:
            self._local.lane = None
            self._finish(lane)

    def _finish(self, lane: int) -> None:
        with self._lock:
            self._finished[lane] = True
            while self._head < len(self._finished) and self._finished[self._head]:
                self._head += 1
                if self._head < len(self._held):
                    self._release(self._head)

    def release_all(self) -> None:
        """Every held write, in lane order (the group ended, however it ended)."""
        with self._lock:
            for lane in range(len(self._held)):
                self._release(lane)
            self._head = len(self._finished)

    def _release(self, lane: int) -> None:
        held, self._held[lane] = self._held[lane], []
        for action in held:
            action()


def together(events: EventLog, jobs: Sequence[Callable[[], T]], parallel: bool) -> list[T]:
    """Each job's result, in order. ``parallel``: on one thread each, events in
    job order (see the module doc); a job's error is raised once every job has
    ended, the first job's first, as running them in turn would raise it."""
    if not parallel or len(jobs) < 2:
        return [job() for job in jobs]
    sequencer = Sequencer(len(jobs))
    events.gate = sequencer.write
    try:  # the caller's run slot is lent to whoever runs while the jobs do (its own jobs hold none)
        with waiting(), ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="fanout") as pool:
            # each thread gets a copy of the caller's context (a tracer's parent run)
            futures = [
                pool.submit(contextvars.copy_context().run, sequencer.run, lane, job)
                for lane, job in enumerate(jobs)
            ]
            wait(futures)
    finally:
        sequencer.release_all()
        events.gate = None
    return [future.result() for future in futures]

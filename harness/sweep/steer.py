"""The driver's side of ``python -m harness.sweep ctl`` (``harness.sweep.control``):
the in-process launcher's queue of cells, steered while it runs.

``Steering.drive`` starts cells from a queue as threads, at most
``concurrency`` at once, and between starts (every ``POLL_S``) reads the
commands appended to ``control.jsonl``, applies each at once and appends its
effect:

- ``pause [endpoint]`` closes the process's gate (``harness.runtime.gate``):
  a call already sent finishes, every later attempt waits; a pause of every
  call also starts no new cell. ``resume`` opens it.
- ``set sweep.concurrency=N`` is the queue's own bound; ``set
  model.max_concurrency=N`` is every live limiter's ceiling, and
  ``model.max_concurrency``, ``budget.sweep_usd`` and ``budget.sweep_tokens``
  are set in each cell's config from then on (a cell's config is made when it
  starts). A set budget (dollars, or tokens: the cap of an unpriced model)
  is the shared ``Budget``'s limit at once: every reservation after
  it is checked against it, so a raise never lets spend pass the new limit,
  and a call held by the pause is checked again as it passes the gate, so a
  limit lowered during a pause holds the calls it held too.
  Every cell runs under that ``Budget``, opened with no limit on a sweep
  started without one, so a budget set there holds the cells running too.
  Once it refuses a call, no cell starts until its limits change (a raise):
  the queued cells stay pending, and a driver left with nothing running
  ends, saying how to go on.
- ``cancel <cell>`` stops a running cell after its node in flight (or while
  it is held at the gate), leaving it interrupted and resumable; a queued
  one leaves the queue, recorded interrupted. ``requeue <cell>`` puts a
  failed or interrupted cell back at the end of the queue (it resumes).

A paused driver that is killed leaves what any killed driver leaves:
``python -m harness.sweep resume`` continues it, unpaused.
"""

from __future__ import annotations

import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from queue import Empty, SimpleQueue

from omegaconf import DictConfig, OmegaConf

from harness.cli.errors import INTERRUPTED
from harness.models.limiter import limiters
from harness.runtime.budget import (
    charged_to,
    go_on_past,
    open_sweep_budget,
    set_sweep_tokens,
    set_sweep_usd,
)
from harness.runtime.gate import EVERY, gate
from harness.runtime.interrupt import request_stop_of, stoppable_as
from harness.store.reader import ledger
from harness.sweep.cell import find_cell
from harness.sweep.cell_status import CellRecord, read_cell_record, write_cell_record
from harness.sweep.concurrency import MAX_CONCURRENCY
from harness.sweep.control import ControlEntry, ControlLog, append_entry, check_command, commands_from
from harness.sweep.index import read_index

POLL_S = 0.1  # how often the driver looks for commands and free slots
QUIESCE_S = 5.0  # how long a pause waits for calls already sent (within ctl's ANSWER_S)
CANCELLED = "cancelled (python -m harness.sweep ctl)"

Job = tuple[int, list[str]]  # (job number, overrides), as Hydra hands them
AfterEnded = Callable[[int, int, bool], None]  # (cells just ended, cells run at once, any queued)


class Steering:
    """The queue of cells and what ``ctl`` changed (see the module doc)."""

    def __init__(
        self,
        sweep_dir: Path,
        concurrency: int,
        stopped: threading.Event,
        after_ended: AfterEnded | None = None,
    ) -> None:
        self.dir, self.concurrency, self.stopped = sweep_dir, concurrency, stopped
        self.after_ended = after_ended  # the launcher's collection of ended cells' garbage
        # commands sent before this driver took its lock are not ours; those since are
        self.log = ControlLog(sweep_dir, from_end=True, offset=commands_from(sweep_dir))
        self.cells = {cell.name: (cell.num, cell.overrides) for cell in read_index(sweep_dir).cells}
        self.queue: deque[Job] = deque()
        self.running: dict[Future[None], str] = {}
        self.finished: SimpleQueue[Future[None]] = SimpleQueue()  # each running future, once done
        self.cancelled: set[str] = set()  # until the driver sees the cell's future end
        self.requeued: set[str] = set()  # cancelled cells requeued while they wind down
        self.overrides: dict[str, int | float] = {}  # set in every cell's config from now on
        self.budget = open_sweep_budget(str(sweep_dir.resolve()), lambda: spent_in(sweep_dir))
        self.closing = False  # the queue is done: no cell starts, whatever is requeued

    # -- the queue ---------------------------------------------------------------------

    def drive(self, jobs: list[Job], run: Callable[[int, list[str]], None]) -> None:
        """Run every job (and every requeued one) at most ``concurrency`` at a time."""
        self.queue.extend(jobs)
        with ThreadPoolExecutor(max_workers=MAX_CONCURRENCY, thread_name_prefix="cell") as pool:
            while True:
                self.poll()
                while self.queue and self.can_start():
                    num, overrides = self.queue.popleft()
                    name = find_cell(self.dir, num, overrides).name
                    future = pool.submit(self._run, run, name, num, overrides)
                    self.running[future] = name
                    future.add_done_callback(self.finished.put)
                if not self.running and (not self.queue or self.stopped.is_set() or self.budget.refused):
                    break
                done = self.wait_finished()
                for future in done:
                    self.ended(self.running.pop(future))
                    future.result()  # a cell never raises; a bug in the driver should
                if done and self.after_ended is not None:
                    self.after_ended(len(done), self.concurrency, bool(self.queue))
        self.closing = True
        self.poll()  # a command sent as the last cell ended still gets its answer
        gate().release()  # the gate is the process's: a later sweep in it starts open
        if self.queue and self.budget.refused and not self.stopped.is_set():
            print(
                f"[sweep] {len(self.queue)} cell(s) left pending: the sweep budget stopped its cells "
                f"({self.budget.refused}); raise it and resume: {go_on_past(self.budget.refused, self.dir / '_')}",
                file=sys.stderr,
                flush=True,
            )

    def wait_finished(self) -> list[Future[None]]:
        """The cells' futures done since the last look, waiting up to ``POLL_S`` for one.
        Each future puts itself on a queue when done: ``concurrent.futures.wait`` on every
        running future, ten times a second, grew with the cells in flight."""
        try:
            done = [self.finished.get(timeout=POLL_S)]
        except Empty:  # paused with nothing in flight, or nothing ended: look for commands
            return []
        while True:
            try:
                done.append(self.finished.get_nowait())
            except Empty:
                return done

    def can_start(self) -> bool:
        """A slot is free, and nothing holds new cells: a stop, a pause of every call, or the
        sweep budget refusing a call (until ``ctl`` sets new limits): a cell started past
        it would open its folder only to stop before its first call."""
        paused = EVERY in gate().held or self.budget.refused is not None
        return not self.stopped.is_set() and not paused and len(self.running) < self.concurrency

    def _run(self, run: Callable[[int, list[str]], None], name: str, num: int, overrides: list[str]) -> None:
        with stoppable_as(name), charged_to(self.budget):
            run(num, overrides)

    def ended(self, name: str) -> None:
        """A cell's future is done: a cancelled one requeued meanwhile goes back now."""
        self.cancelled.discard(name)
        if name in self.requeued:
            self.requeued.discard(name)
            record = read_cell_record(self.dir, name)
            if record is not None and record.status in ("failed", "interrupted"):  # not one that finished
                self.queue.append(self.cells[name])

    def was_cancelled(self, name: str) -> bool:
        return name in self.cancelled

    def configure(self, cfg: DictConfig) -> None:
        """A starting cell's config, with what ``set`` changed: a model key only where the
        cell's model config has it (``ctl`` refuses one no cell has; a sweep of two models
        may have it in one only), since a key set in a config without it fails the cell."""
        model = cfg.get("model") or {}
        for key, value in self.overrides.items():
            section, _, name = key.partition(".")
            if section != "model" or name in model:
                OmegaConf.update(cfg, key, value, merge=False)
        if (top := self.overrides.get("model.max_concurrency")) is not None and "concurrency" in model:
            cfg.model.concurrency = min(int(model.get("concurrency") or top), int(top))

    # -- commands ----------------------------------------------------------------------

    def poll(self) -> None:
        """Apply every command appended since the last look; append each one's effect."""
        for entry in self.log.read():
            if entry.kind != "command":
                continue
            try:
                verb, arg, value = check_command(entry.words)
                ok, detail = getattr(self, f"do_{verb}")(arg, value)
            except Exception as exc:  # a command never takes the driver down: it says why
                ok, detail = False, f"{' '.join(entry.words)}: {exc}"
            effect = ControlEntry(
                kind="effect",
                id=entry.id,
                words=entry.words,
                ok=ok,
                detail=detail,
                paused=gate().held,
                concurrency=self.concurrency,
            )
            append_entry(self.dir, effect)

    def in_flight(self) -> str:
        return f"{len(self.running)} cell(s) in flight, {len(self.queue)} queued"

    def do_pause(self, endpoint: str, _: str) -> tuple[bool, str]:
        gate().hold(endpoint or EVERY)
        what = f"calls to {endpoint}" if endpoint else "every model call and every cell start"
        # answered once the calls already sent have returned, so "paused" means quiet
        out = gate().settle(QUIESCE_S)
        sent = f"{out} call(s) sent before the pause still out after {QUIESCE_S:.0f} s" if out else "quiet"
        return True, (
            f"paused {what}; {sent} ({self.in_flight()}); "
            f"go on with: python -m harness.sweep ctl {self.dir} resume"
        )

    def do_resume(self, _: str, __: str) -> tuple[bool, str]:
        held = gate().held
        gate().release()
        return True, f"resumed ({', '.join(held) or 'nothing was paused'}); {self.in_flight()}"

    def do_set(self, key: str, value: str) -> tuple[bool, str]:
        if key == "sweep.concurrency":
            old, self.concurrency = self.concurrency, int(value)
            return True, f"sweep.concurrency {old} -> {self.concurrency} ({self.in_flight()})"
        if key.startswith("budget."):
            return True, self.set_budget(key, value)
        self.overrides[key] = int(value)
        live = limiters().values()
        for limiter in live:
            limiter.set_maximum(int(value))
        return (
            True,
            f"model.max_concurrency -> {value} ({len(live)} live limiter(s), and every cell from now)",
        )

    def set_budget(self, key: str, value: str) -> str:
        """``budget.sweep_usd`` or ``budget.sweep_tokens``: the shared budget's limit at once
        (charged first with what the sweep's runs had spent, if it had no limit), and every
        cell's config from now on; what changed."""
        name = str(self.dir.resolve())
        if key == "budget.sweep_usd":
            self.overrides[key] = float(value)
            usd = set_sweep_usd(name, float(value))
            was = None if usd is None else (usd[0] and f"${usd[0]:g}", f"spent ${usd[1]:.4f}")
            value = f"${value}"
        else:
            self.overrides[key] = int(value)
            tokens = set_sweep_tokens(name, int(value))
            was = None if tokens is None else (tokens[0] and str(tokens[0]), f"used {tokens[1]} tokens")
        if was is None:
            return f"{key} -> {value} for every cell started from now"
        return f"{key} {was[0] or 'none'} -> {value} ({was[1]})"

    def do_cancel(self, name: str, _: str) -> tuple[bool, str]:
        job = self.cells[name]
        if name in self.running.values():
            self.cancelled.add(name)
            request_stop_of(name, CANCELLED)
            return True, f"cancelling {name}: it stops after its call in flight, interrupted and resumable"
        if job in self.queue:
            self.queue.remove(job)
            record = CellRecord(status="interrupted", exit_code=INTERRUPTED, error=CANCELLED)
            write_cell_record(self.dir, name, record.with_counts(None))
            return True, f"cancelled {name} before it started; left interrupted, resumable"
        return False, f"cancel: {name} is neither running nor queued"

    def do_requeue(self, name: str, _: str) -> tuple[bool, str]:
        if self.stopped.is_set() or self.closing:  # it would wait in a queue no one starts
            why = "stopping (Ctrl-C or SIGTERM)" if self.stopped.is_set() else "ending"
            return (
                False,
                f"requeue: the sweep is {why}, so no cell starts; continue with: python -m harness.sweep resume {self.dir}",
            )
        job = self.cells[name]
        if name in self.cancelled and name not in self.requeued:  # its record may say interrupted already
            self.requeued.add(name)
            return True, f"requeued {name}: back in the queue once its cancel lands; {self.in_flight()}"
        if name in self.running.values() or job in self.queue or name in self.requeued:
            return False, f"requeue: {name} is already running or queued"
        record = read_cell_record(self.dir, name)
        if record is None or record.status not in ("failed", "interrupted"):
            status = record.status if record else "pending"
            return False, f"requeue: {name} is {status}; only a failed or interrupted cell goes back"
        self.queue.append(job)
        return True, f"requeued {name} ({record.status}); {self.in_flight()}"


def spent_in(sweep_dir: Path) -> tuple[float, int]:
    """What the sweep's runs have spent (dollars, tokens), by the replies they kept."""
    paid = [ledger(run) for run in sweep_dir.iterdir() if (run / "manifest.json").is_file()]
    return sum(p.cost_usd or 0.0 for p in paid), sum(p.input_tokens + p.output_tokens for p in paid)

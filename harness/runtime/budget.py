"""Budgets: dollars and tokens a run (or a whole sweep) may spend.

Before a call, its worst case (the prompt's estimated tokens plus the whole
reply allowance, at the model's price) is *reserved*; after it, the
reservation is swapped for what the call cost. A call whose reservation
would cross a limit is not made: the run stops cleanly before it
(``BudgetExhausted``, a ``RunStopped``: the run is left ``interrupted`` and
resumable, with ``budget …`` as its stop reason). Reserving, not just
comparing, is what keeps many cells in flight from all passing the same
check: spend can pass a limit only by what the calls in flight cost beyond
their reservations (a prompt longer than its estimate). A call is checked
again as it is sent (``Held.recheck``): one that waited at a pause, or out a
retry's backoff, on a reservation made before meets the limits as they are.

A sweep's budget is one object shared by every cell of the driver process
(``sweep_budget``), seeded with what the sweep's runs had already spent. The
in-process launcher opens it for every cell, with no limit if the sweep has
none, so that a limit ``ctl`` sets later holds the cells already running.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

from harness.runtime.interrupt import RunStopped


class BudgetExhausted(RunStopped):
    """The next call could cross a budget; ``str()`` is the stop reason."""


_STOPPED_BY = re.compile(r"\b(budget\.(?:sweep_)?(?:usd|tokens))=")  # as ``Budget.reserve`` names it


def go_on_past(stop_reason: str, run_dir: Path) -> str:
    """The command that goes on past a budget stop, raising the key that stopped it:
    a sweep's budget on the sweep's resume (a cell's folder is in its sweep's), a
    run's on the run's."""
    found = _STOPPED_BY.search(stop_reason)
    key = found.group(1) if found else "budget.usd"
    if key.startswith("budget.sweep_"):
        return f"python -m harness.sweep resume {run_dir.parent} {key}=<more>"
    return f"python -m harness.resume {run_dir} {key}=<more>"


@dataclass
class Budget:
    """Limits on dollars and tokens, shared by whoever holds this object."""

    key: str  # the config key prefix named in a stop: budget or budget.sweep_
    usd: float | None = None
    tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    _held_usd: float = 0.0
    _held_tokens: int = 0
    # why a call was last refused, until the limits change: a sweep starts no cell meanwhile
    refused: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # a sweep's budget opened with no limit counts this process's calls only; what the
    # sweep's runs had spent before is read once a limit is first set (``_limit``)
    before: Callable[[], tuple[float, int]] | None = field(default=None, repr=False)

    def reserve(self, usd: float | None, tokens: int) -> None:
        """Hold a call's worst case, or raise ``BudgetExhausted`` if it could cross a limit.
        ``usd`` None (no price) only reaches here with no dollar limit: preflight refuses it."""
        with self._lock:
            self._check(usd, tokens, self._held_usd, self._held_tokens)
            self._held_usd += usd or 0.0
            self._held_tokens += tokens

    def recheck(self, usd: float | None, tokens: int) -> None:
        """Check a call that holds its reservation already against the limits and spend as
        they are now (it waited at a pause, or a retry's backoff, while ``ctl`` may have
        lowered a limit): ``BudgetExhausted`` if it could cross one."""
        with self._lock:
            self._check(usd, tokens, self._held_usd - (usd or 0.0), self._held_tokens - tokens)

    def _check(self, usd: float | None, tokens: int, held_usd: float, held_tokens: int) -> None:
        """Raise ``BudgetExhausted`` if a call of ``usd``/``tokens``, beside the other calls'
        reservations (``held_*``), could cross a limit; under ``_lock``."""
        why = None
        if self.usd is not None and usd is not None and self.spent_usd + held_usd + usd > self.usd:
            why = (
                f"budget: ${self.spent_usd:.4f} of {self.key}usd=${self.usd:g} spent, "
                f"${held_usd:.4f} in flight; the next call could cost ${usd:.4f}"
            )
        elif self.tokens is not None and self.spent_tokens + held_tokens + tokens > self.tokens:
            why = (
                f"budget: {self.spent_tokens} of {self.key}tokens={self.tokens} spent, "
                f"{held_tokens} in flight; the next call could use {tokens}"
            )
        if why is not None:
            self.refused = why
            raise BudgetExhausted(why)

    def settle(self, held_usd: float | None, held_tokens: int, usd: float | None, tokens: int) -> None:
        """Swap a reservation for what the call cost (``usd``/``tokens`` 0 if it failed unpaid)."""
        with self._lock:
            self._held_usd -= held_usd or 0.0
            self._held_tokens -= held_tokens
            self.spent_usd += usd or 0.0
            self.spent_tokens += tokens


@dataclass
class Held:
    """One call's reservation on every budget it passes, and what the call cost (``pay``)."""

    budgets: tuple[Budget, ...]
    usd: float | None
    tokens: int
    paid: list[tuple[float | None, int]] = field(default_factory=list)

    def pay(self, cost: float | None, used: int) -> None:
        self.paid.append((cost, used))

    def recheck(self) -> None:
        """Each budget checks the call again as it is about to be sent (``Budget.recheck``)."""
        for budget in self.budgets:
            budget.recheck(self.usd, self.tokens)


@dataclass
class Budgets:
    """Every budget one call must pass: the run's own, and its sweep's."""

    held: tuple[Budget, ...] = ()

    @contextmanager
    def call(self, usd: float | None, tokens: int) -> Iterator[Held]:
        """Reserve on every budget (all or none), then settle with what the call reports."""
        taken: list[Budget] = []
        try:
            for budget in self.held:
                budget.reserve(usd, tokens)
                taken.append(budget)
        except BudgetExhausted:
            for budget in taken:
                budget.settle(usd, tokens, 0.0, 0)
            raise
        held = Held(tuple(taken), usd, tokens)
        try:
            yield held
        finally:
            cost, used = held.paid[-1] if held.paid else (0.0, 0)
            for budget in taken:
                budget.settle(usd, tokens, cost, used)


# The sweep budget of the cell running in this thread (set by harness.sweep.cell).
_SWEEP: ContextVar[Budget | None] = ContextVar("sweep_budget", default=None)
_SHARED: dict[str, Budget] = {}
_SHARED_LOCK = threading.Lock()


def sweep_budget() -> Budget | None:
    return _SWEEP.get()


def open_sweep_budget(name: str, spent: Callable[[], tuple[float, int]]) -> Budget:
    """Sweep ``name``'s budget, opened with no limit if it has none yet. ``spent`` gives
    what the sweep's runs have spent, read when a limit is first set."""
    with _SHARED_LOCK:
        budget = _SHARED.get(name)
        if budget is None:
            budget = _SHARED[name] = Budget("budget.sweep_", before=spent)
        return budget


@contextmanager
def charged_to(budget: Budget) -> Iterator[Budget]:
    """Run the enclosed cell under ``budget``, its sweep's (what ``sweep_budget`` gives)."""
    token = _SWEEP.set(budget)
    try:
        yield budget
    finally:
        _SWEEP.reset(token)


@contextmanager
def in_sweep_budget(
    name: str, usd: float | None, tokens: int | None, spent: Callable[[], tuple[float, int]]
) -> Iterator[Budget]:
    """Run the enclosed cell under the budget shared by every cell of sweep ``name``.
    ``spent`` gives what the sweep had spent before this process (read once)."""
    budget = open_sweep_budget(name, spent)
    with _SHARED_LOCK:
        _limit(budget, usd, tokens)  # a resume may raise them
    with charged_to(budget):
        yield budget


def _limit(budget: Budget, usd: float | None, tokens: int | None) -> float | None:
    """Set a sweep budget's limits at once (the old dollar limit back), the first limit
    charging it first with what the sweep's runs had spent before; under ``_SHARED_LOCK``,
    so one caller reads that. The runs' ledgers hold this process's calls settled before
    the read (the budget counted them already: taken out) and some settled during it
    (counted twice): a budget opened mid-sweep errs high, low only by a call settled and
    not yet kept (``harness.runtime.context`` keeps a reply just after) as the read began."""
    if budget.before is not None and (usd is not None or tokens is not None):
        with budget._lock:
            counted_usd, counted_tokens = budget.spent_usd, budget.spent_tokens
        before_usd, before_tokens = budget.before()
        budget.before = None
        with budget._lock:
            budget.spent_usd += max(0.0, before_usd - counted_usd)
            budget.spent_tokens += max(0, before_tokens - counted_tokens)
    with budget._lock:  # a reservation in progress sees the old limits or the new, whole
        if (usd, tokens) != (budget.usd, budget.tokens):
            budget.refused = None  # new limits: the refusal was under the old ones
        old, budget.usd, budget.tokens = budget.usd, usd, tokens
    return old


def set_sweep_usd(name: str, usd: float) -> tuple[float | None, float] | None:
    """Set the dollar limit of sweep ``name``'s budget at once (``ctl set budget.sweep_usd``):
    (the old limit, spent so far), or None when no cell of it has opened its budget yet."""
    with _SHARED_LOCK:
        budget = _SHARED.get(name)
        if budget is None:
            return None
        old = _limit(budget, usd, budget.tokens)
    return old, budget.spent_usd


def set_sweep_tokens(name: str, tokens: int) -> tuple[int | None, int] | None:
    """Set the token limit of sweep ``name``'s budget at once (``ctl set budget.sweep_tokens``,
    the cap an unpriced model takes): (the old limit, tokens used so far), or None when no
    cell of it has opened its budget yet."""
    with _SHARED_LOCK:
        budget = _SHARED.get(name)
        if budget is None:
            return None
        old = budget.tokens
        _limit(budget, budget.usd, tokens)
    return old, budget.spent_tokens


def forget_sweep_budgets() -> None:
    with _SHARED_LOCK:
        _SHARED.clear()

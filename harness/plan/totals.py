"""Dollars and wall time of the planned cells, and their totals.

Dollars: each role's tokens at its model's price (``harness.models.prices``,
the run's own ``prices.file`` and ``prices.models`` merged over the shipped
table), with no cache discount: the upper figure of the two a provider
bills. A role whose model has no price makes its cell's dollars, and the
total, unknown.

Wall time, at the limits the shared limiter is given (one limiter per
endpoint, shared by every cell in flight): each cell makes its calls one
after another, ``call_s`` each (a scripted role's own ``model.latency_s``, a
pilot's role its seconds a call, unless the pilot ran it untimed) plus the harness's own time a call, as the
dry passes measured it; cells run ``in_flight`` at a time. The sweep then takes the longest of:
the cells' own time over the slots (longest first), each endpoint's calls
at ``model.rpm``, its charged tokens at ``model.tpm``, and its calls spread
over ``model.max_concurrency`` slots (the adaptive limit grows there when no
429 comes), and the cells on an embedded model over ``local_lanes`` (the
in-process launcher runs them one at a time a driver process: they share its
llama.cpp model). A cell's own figure is its time stretched by the same factor
when a limit binds.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.models.prices import PriceTable, format_usd, load_prices
from harness.plan.estimate import Estimate, Roles, Tally, total
from harness.sweep.launcher import uses_local_model

if TYPE_CHECKING:
    from harness.plan.pilot import Calibration

FREE_TIME = ("human",)  # a person's answers: no time a plan can say


@dataclass(frozen=True)
class Dollars:
    point: float | None
    low: float | None
    high: float | None

    def __add__(self, other: Dollars) -> Dollars:
        return Dollars(*(_plus(a, b) for a, b in zip(self.tuple(), other.tuple(), strict=True)))

    def tuple(self) -> tuple[float | None, float | None, float | None]:
        return self.point, self.low, self.high


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


@dataclass
class CellRow:
    estimate: Estimate
    dollars: Dollars
    unpriced: list[str]  # models with no price
    alone_s: float  # its calls one after another
    wall_s: float = 0.0


@dataclass
class Plan:
    rows: list[CellRow]
    in_flight: int
    call_s: float
    wall_s: float = 0.0
    bound: str = "latency"  # what sets the wall time
    unpriced: list[str] = field(default_factory=list)
    pilot: Calibration | None = None  # the pilot that calibrated it, if any

    def point(self) -> Tally:
        return sum((total(r.estimate.point) for r in self.rows), Tally())

    def low(self) -> Tally:
        return sum((total(r.estimate.low) for r in self.rows), Tally())

    def high(self) -> Tally:
        return sum((total(r.estimate.high) for r in self.rows), Tally())

    def dollars(self) -> Dollars:
        return sum((r.dollars for r in self.rows), Dollars(0.0, 0.0, 0.0))


def priced(roles: Roles, specs: dict[str, str], table: PriceTable) -> float | None:
    usd: float | None = 0.0
    for role, t in roles.items():
        cost = table.estimate(specs[role], round(t.input), round(t.output))
        usd = _plus(usd, cost)
    return usd


def cell_row(estimate: Estimate, call_s: float, engine_s: float) -> CellRow:
    settings = estimate.cell.settings
    specs = {role: settings.role_model(role)[0].spec for role in estimate.point}
    table = load_prices(settings.prices.file, settings.prices.models)
    dollars = Dollars(*(priced(r, specs, table) for r in (estimate.point, estimate.low, estimate.high)))
    unpriced = sorted({s for s in specs.values() if not table.known(s)})
    point = estimate.point
    alone = sum(t.calls * (engine_s + role_call_s(estimate, role, call_s)) for role, t in point.items())
    return CellRow(estimate, dollars, unpriced, alone)


def role_call_s(estimate: Estimate, role: str, call_s: float) -> float:
    return role_call(estimate, role, call_s)[0]


def role_call(estimate: Estimate, role: str, call_s: float) -> tuple[float, str]:
    """The seconds one of ``role``'s calls takes, and where the figure comes from."""
    if role in estimate.call_s:
        return estimate.call_s[role], "as the pilot's replies took (each role's own)"
    model = estimate.cell.settings.role_model(role)[0]
    provider = model.spec.split(":", 1)[0]
    if provider == "scripted":
        return model.latency_s, "(the scripted model's model.latency_s)"
    if provider in FREE_TIME:
        return 0.0, "(a person's answers: not timed)"
    if provider == "local":  # no provider: what a call takes here is for a pilot to say
        return call_s, "on the embedded model (--call-s; a pilot's runs time it)"
    return call_s, "at the provider (--call-s)"


def call_times(rows: list[CellRow], call_s: float) -> str:
    """The seconds a call the plan used, per source: the wall line's words for them."""
    seen: dict[str, list[float]] = {}
    for row in rows:
        for role in row.estimate.point:
            took, source = role_call(row.estimate, role, call_s)
            seen.setdefault(source, []).append(took)
    parts = []
    for source, each in seen.items():
        low, high = _seconds(min(each)), _seconds(max(each))
        parts.append(f"a call {low if low == high else f'{low}-{high}'} s {source}")
    return ", ".join(parts)


def _seconds(x: float) -> str:
    return f"{x:.3f}".rstrip("0").rstrip(".")  # 2, 0.05, 0.003: a pilot's 9e-05 is 0


def makespan(times: list[float], slots: int) -> float:
    """Longest-first onto ``slots`` workers: when the last one finishes."""
    ends = [0.0] * max(1, slots)
    for t in sorted(times, reverse=True):
        heapq.heappush(ends, heapq.heappop(ends) + t)
    return max(ends)


def endpoint_floors(rows: list[CellRow], call_s: float) -> dict[str, float]:
    """{what binds: seconds} for each remote endpoint's limits over the whole plan."""
    use: dict[tuple[str, str], list[float]] = {}  # (spec, base_url) -> calls, charged, busy s
    limits = {}
    for row in rows:
        settings = row.estimate.cell.settings
        for role, t in row.estimate.point.items():
            model = settings.role_model(role)[0]
            if model.spec.split(":", 1)[0] in ("scripted", "local", "human"):
                continue
            key = (model.spec, str(model.kwargs.get("base_url") or ""))
            acc = use.setdefault(key, [0.0, 0.0, 0.0])
            busy = t.calls * role_call_s(row.estimate, role, call_s)
            acc[0], acc[1], acc[2] = acc[0] + t.calls, acc[1] + t.charged, acc[2] + busy
            limits[key] = model
    floors = {}
    for key, (calls, charged, busy) in use.items():
        model = limits[key]
        floors[f"{key[0]} max_concurrency={model.max_concurrency}"] = busy / model.max_concurrency
        if model.rpm:
            floors[f"{key[0]} rpm={model.rpm}"] = calls * 60 / model.rpm
        if model.tpm:
            floors[f"{key[0]} tpm={model.tpm}"] = charged * 60 / model.tpm
    return floors


def local_floor(rows: list[CellRow], lanes: int, call_s: float) -> dict[str, float]:
    """{what binds: seconds} for the cells on an embedded model, ``lanes`` of them at once."""
    local = [r for r in rows if uses_local_model(r.estimate.cell.cfg)]  # as the launcher decides it
    if not local:
        return {}
    what = f"embedded-model cells {lanes} at a time (one a driver process), {call_times(local, call_s)}"
    return {what: makespan([r.alone_s for r in local], lanes)}


def make_plan(
    estimates: list[Estimate],
    in_flight: int,
    call_s: float,
    engine_s: float = 0.0,
    local_lanes: int | None = None,
) -> Plan:
    """``local_lanes``: how many cells on an embedded model run at once (``in_flight`` if None)."""
    rows = [cell_row(e, call_s, engine_s) for e in estimates]
    plan = Plan(rows, in_flight, call_s)
    plan.unpriced = sorted({s for r in rows for s in r.unpriced})
    span = makespan([r.alone_s for r in rows], in_flight)
    plan.wall_s = span
    plan.bound = (
        f"{in_flight} cell(s) in flight, {call_times(rows, call_s)} + {engine_s:.2f} s in the harness"
    )
    lanes = in_flight if local_lanes is None else local_lanes
    floors = {
        **endpoint_floors(rows, call_s),
        **(local_floor(rows, lanes, call_s) if lanes < in_flight else {}),
    }
    for what, seconds in floors.items():
        if seconds > plan.wall_s:
            plan.wall_s, plan.bound = seconds, what
    stretch = plan.wall_s / span if span > 0 else 1.0
    for row in rows:
        row.wall_s = row.alone_s * stretch
    return plan


def budget_lines(plan: Plan) -> list[str]:
    """A line per budget the plan says the cells would meet. A run stops at its budget
    (interrupted, exit 75), so past it the plan's figures are not what it spends:
    below a cell's point it stops, below its high it may."""
    lines = []
    for key in ("usd", "tokens"):  # each cell's own
        spends = [
            (limit, *_spend(r.dollars, total(r.estimate.point), total(r.estimate.high), key))
            for r in plan.rows
            if (limit := getattr(r.estimate.cell.settings.budget, key)) is not None
        ]
        lines += _met(f"budget.{key}", spends, f"{{n}} of {len(spends)} cell(s)")
    budget = plan.rows[0].estimate.cell.settings.budget if plan.rows else None
    for key in ("usd", "tokens"):  # the sweep's, shared by its cells in flight
        if (limit := getattr(budget, f"sweep_{key}", None)) is not None:
            spend = _spend(plan.dollars(), plan.point(), plan.high(), key)
            lines += _met(f"budget.sweep_{key}", [(limit, *spend)], "the sweep's cells together")
    return lines


def _spend(dollars: Dollars, point: Tally, high: Tally, key: str) -> tuple[float | None, float | None]:
    """(point, high) in the budget's unit: dollars, or tokens in and out."""
    if key == "usd":
        return dollars.point, dollars.high
    return point.input + point.output, high.input + high.output


def _met(key: str, spends: list[tuple[float, float | None, float | None]], whose: str) -> list[str]:
    """What ``key`` does to the cells whose (limit, point, high) ``spends`` holds;
    ``whose`` names them, ``{n}`` the ones it meets."""
    show = format_usd if key.endswith("usd") else (lambda x: f"{round(x):,}")
    stop = [(limit, point) for limit, point, _ in spends if point is not None and point > limit]
    may = [(limit, high) for limit, point, high in spends if high is not None and high > limit]
    hit, what = (stop, "the point") if stop else (may, "the high")
    if not hit:
        return []
    limits = sorted({limit for limit, _ in hit})
    given = show(limits[0]) if len(limits) == 1 else f"{show(limits[0])}-{show(limits[-1])}"
    top = show(max(spend for _, spend in hit)) + ("" if key.endswith("usd") else " tokens")
    end = (
        "stop at it, interrupted (exit 75), short of the figures above; raise it to resume (docs/costs.md)"
        if stop
        else "would stop at it if they met more rejections, repairs or longer replies than the point assumes"
    )
    return [f"budget: {key}={given} is below {what} of {whose.format(n=len(hit))} (up to {top}): they {end}"]

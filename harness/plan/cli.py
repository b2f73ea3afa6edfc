"""``python -m harness.plan`` (``drift-plan``): what a run or a sweep will cost, before it runs.

    python -m harness.plan model=openai rounds=50
    python -m harness.plan -m model=openai llm.temperature=0.2,0.7,1.0 replicates=3 sweep.concurrency=8

The same overrides as ``harness.run``, ``-m`` included. Options of its own:
``--call-s S``, the seconds one remote call takes (2 unless given: the plan's
wall time is at the limits the config sets, and a provider's latency is not
in the config); ``--count words|chars``, how the provider counts tokens (by
default words for the scripted model, ~4 characters a token for the rest);
``--pilot PATH`` (repeatable), run folders or a sweep folder of a pilot whose
real calls calibrate the plan (``pilot``; forks of real-model parents, with
none given, are calibrated by their parents); ``--record DIR``, write the plan's
seconds per cell to ``DIR/plan.json``, where the sweep's live page reads its
time left (``harness.view.live``).

A fork (``fork.parent``, ``fork.at_round``; ``harness.fork --plan``) is
planned from its parent's config with its overrides, counting its rounds
after k only. Prints a row per cell (calls, input and output tokens, dollars
with their interval, wall time), then the totals. Exit 0, or 2 with a one-line error.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.cli.console import guarded, say
from harness.cli.errors import BAD_INPUT, INTERRUPTED, exit_code, fail
from harness.models.base import ModelConfigError
from harness.models.prices import format_usd
from harness.plan.cells import PlanError, PlannedCell, compose_cells
from harness.plan.dry import Passes, scripted
from harness.plan.estimate import Tally, estimate_cell, total
from harness.plan.pilot import Calibration, read_pilot
from harness.plan.totals import Dollars, Plan, budget_lines, make_plan
from harness.schema import ConfigError
from harness.view.live import PLAN_JSON

DEFAULT_CALL_S = 2.0
USAGE = f"""\
usage: python -m harness.plan [-m] [key=value ...] [--pilot PATH ...] [--call-s S] [--count words|chars] [--record DIR]

What a run or a sweep will cost, before it runs: harness.run's overrides, -m included (docs/costs.md).
  -m, --multirun        plan the sweep harness.run -m would run
  --call-s S            seconds one remote call takes (default {DEFAULT_CALL_S:g})
  --count words|chars   how the provider counts tokens (default: words for the scripted model,
                        ~4 characters a token for the others)
  --pilot PATH          a pilot's run folder or sweep folder, whose calls calibrate the plan (repeatable)
  --record DIR          write the plan's seconds per cell to DIR/{PLAN_JSON}, for the sweep's live page
  -h, --help            this usage"""


@dataclass(frozen=True)
class Options:
    call_s: float = DEFAULT_CALL_S
    words: bool | None = None  # None: words for scripted roles only
    overrides: tuple[str, ...] = ()
    pilot: tuple[str, ...] = ()  # run folders or sweep folders
    record: str | None = None  # a sweep folder to write plan.json into


def parse(argv: list[str]) -> Options:
    """Split the plan's own options from ``harness.run``'s overrides."""
    call_s, words, rest, pilot, record = DEFAULT_CALL_S, None, [], [], None
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name not in ("--call-s", "--count", "--pilot", "--record"):
            rest.append(arg)
            continue
        value = value if eq else next(args, "")
        if name in ("--pilot", "--record") and not value:
            raise PlanError(f"{name}: a folder")
        if name == "--pilot":
            pilot.append(value)
            continue
        if name == "--record":
            record = value
            continue
        if name == "--count":
            if value not in ("words", "chars"):
                raise PlanError(f"--count: words or chars, got {value!r}")
            words = value == "words"
            continue
        try:
            call_s = float(value)
        except ValueError:
            raise PlanError(f"--call-s: seconds a remote call takes, got {value!r}") from None
        if call_s < 0:
            raise PlanError(f"--call-s: must be >= 0, got {value}")
    return Options(call_s, words, tuple(rest), tuple(pilot), record)


def build_plan(options: Options) -> tuple[Plan, int]:
    """The plan of ``options.overrides``, and how many dry passes it took."""
    cells = compose_cells(list(options.overrides))
    pilot = Calibration(*read_pilot([Path(p) for p in options.pilot])) if options.pilot else None
    pilot = pilot or parents_pilot(cells.cells)
    passes = Passes()
    estimates = [estimate_cell(cell, passes, options.words) for cell in cells.cells]
    if pilot is not None:
        estimates = [pilot.apply(e, passes, options.words) for e in estimates]
    plan = make_plan(estimates, cells.in_flight, options.call_s, passes.engine_s(), cells.local_lanes)
    plan.pilot = pilot
    return plan, passes.runs


def parents_pilot(cells: list[PlannedCell]) -> Calibration | None:
    """Forks of real-model parents, with no ``--pilot``: the parents' kept replies
    are the pilot (they met the model the forks go on with)."""
    parents = list(dict.fromkeys(cell.parent for cell in cells))
    if not parents or None in parents:
        return None
    runs, _ = read_pilot([p for p in parents if p is not None])  # each named itself: none skipped
    if all(scripted(spec) for run in runs for spec in run.specs.values()):
        return None
    return Calibration(runs, ["pilot: the forks' parents, run on a real model; --pilot <runs> picks others"])


def tokens(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    return f"{x / 1e3:.1f}k" if x >= 1e4 else f"{round(x):,}"


def duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{seconds:.1f}s"


def usd_range(d: Dollars) -> str:
    if d.low is None or d.high is None:
        return "unknown"
    return f"{format_usd(d.low)}-{format_usd(d.high)}"


def render(plan: Plan, words: bool | None, runs: int, took_s: float) -> list[str]:
    """The plan as printed: a header, a row per cell, the totals, the notes."""
    counted = "words" if words or (words is None and _all_scripted(plan)) else "~4 characters a token"
    if words is None and not _all_scripted(plan) and _any_scripted(plan):
        counted = "words for the scripted model, ~4 characters a token for the others"
    width = max([len("total"), *(len(r.estimate.cell.name) for r in plan.rows)])
    lines = [
        f"plan: {len(plan.rows)} cell(s), {plan.in_flight} in flight; tokens counted as {counted}; "
        f"{runs} scripted dry pass(es) in {took_s:.1f} s{_calibrated(plan)}",
        f"{'cell':<{width}} {'length':>13} {'calls':>7} {'input':>9} {'output':>9} "
        f"{'dollars':>10} {'dollars low-high':>22} {'wall':>9}",
    ]
    for row in plan.rows:
        e, t = row.estimate, total(row.estimate.point)
        unit = "rounds" if e.unit_key == "rounds" else e.unit_key.split(".")[-1]
        length = f"{e.after + 1}-{e.units} {unit}" if e.after else f"{e.units} {unit}"
        lines.append(_row(e.cell.name, width, length, t, row.dollars, row.wall_s))
    if len(plan.rows) > 1:
        lines.append(_row("total", width, "", plan.point(), plan.dollars(), plan.wall_s))
    low, high = plan.low(), plan.high()
    lines.append(
        f"interval: calls {tokens(low.calls)}-{tokens(high.calls)}, input {tokens(low.input)}-"
        f"{tokens(high.input)}, output {tokens(low.output)}-{tokens(high.output)} ({_interval_from(plan)})"
    )
    lines.append(f"wall: {duration(plan.wall_s)}, set by {plan.bound}")
    if any(r.estimate.cell.at_round for r in plan.rows):
        lines.append(
            "forks: each counts only its rounds after k, on its parent's config with its overrides; "
            "rounds 1..k are the parent's, copied: 0 calls, $0"
        )
    if plan.pilot is not None:
        lines += plan.pilot.lines()
    elif not _all_scripted(plan):
        lines.append(UNCALIBRATED)
    lines += budget_lines(plan)
    for spec in plan.unpriced:
        key = spec.replace(":", "\\:")
        lines.append(
            f"unknown: {spec} has no price; set prices.models={{{key}:{{input:<$/1M>,output:<$/1M>}}}} "
            "or prices.file (docs/costs.md)"
        )
    return lines


# A newcomer reads the point of a real model's plan as a forecast; on SmolLM2 it was 3.1-4.5x low.
UNCALIBRATED = (
    "uncalibrated: the point is the scripted model's, whose critic approves every first draft and "
    "whose replies all parse; a real model's rejections, repairs and loop-locks are only in the high "
    "end. Plan again with --pilot <the folders of 2 or more short runs of this config> (docs/costs.md)"
)


def _interval_from(plan: Plan) -> str:
    worst = "high: every reply at max_tokens, rejected to the loop-lock cap, repaired structured.max_repairs times"
    if plan.pilot is None or not plan.pilot.spread:
        return worst + ("; the pilot has too few turns for a spread" if plan.pilot else "")
    n, runs = plan.pilot.turns, len(plan.pilot.runs)
    return f"90% per cell, a bootstrap over {runs} pilot run(s) and their {n} turns, summed over cells"


def _row(name: str, width: int, length: str, t: Tally, dollars: Dollars, wall_s: float) -> str:
    return (
        f"{name:<{width}} {length:>13} {tokens(t.calls):>7} {tokens(t.input):>9} {tokens(t.output):>9} "
        f"{format_usd(dollars.point):>10} {usd_range(dollars):>22} {duration(wall_s):>9}"
    )


def _calibrated(plan: Plan) -> str:
    if plan.pilot is None:
        return ""
    return f"; calibrated from {len(plan.pilot.runs)} pilot run(s)"


def _specs(plan: Plan) -> list[str]:
    return [row.estimate.cell.settings.role_model(r)[0].spec for row in plan.rows for r in row.estimate.point]


def _all_scripted(plan: Plan) -> bool:
    return all(scripted(s) for s in _specs(plan))


def _any_scripted(plan: Plan) -> bool:
    return any(scripted(s) for s in _specs(plan))


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    argv = sys.argv[1:] if argv is None else argv
    if "-h" in argv or "--help" in argv:
        say(USAGE, sys.stdout)
        return 0
    try:
        options = parse(argv)
        plan, runs = build_plan(options)
    except (PlanError, ConfigError, ModelConfigError) as exc:
        fail(str(exc), exit_code(exc))
    except KeyboardInterrupt:
        fail("interrupted; nothing planned", INTERRUPTED)
    for line in render(plan, options.words, runs, time.perf_counter() - started):
        say(line, sys.stdout)
    if options.record:
        try:
            say(f"recorded: {record(plan, Path(options.record))}", sys.stdout)
        except OSError as exc:
            fail(f"--record {options.record}: {exc.strerror or exc}", BAD_INPUT)
    return 0


def record(plan: Plan, folder: Path) -> Path:
    """``folder/plan.json``: each cell's seconds and the cells in flight, for the live page."""
    folder.mkdir(parents=True, exist_ok=True)
    cells = {row.estimate.cell.name: round(row.wall_s, 3) for row in plan.rows}
    data = {"in_flight": plan.in_flight, "wall_s": round(plan.wall_s, 3), "cells": cells}
    (path := folder / PLAN_JSON).write_text(json.dumps(data, indent=1) + "\n")
    return path


def cli() -> None:
    sys.stdout = guarded(sys.stdout)
    sys.exit(main())

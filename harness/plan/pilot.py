"""Calibrating a plan from a pilot: ``--pilot <run folders or a sweep folder>``.

The scripted dry passes give a cell's structure (the turns each role takes
a round, the rounds, the prompts the format renders); they never meet a real
model's rejections, repairs, re-asks, loop-locks or schema failures, nor its
reply lengths or its speed. A pilot's run folders hold all of that: every
call keeps a reply (``<seat>/replies.jsonl``, repairs and rejected drafts
included), with its team and role tags and its usage (tokens, ``latency_s``).
The planned cell's dry pass says which model role makes the calls of each
(team, role) tag, so the pilot's replies are counted per model role.

Per pilot run and role, against the planned cell's own dry pass at the
pilot's length (the turns it would take with nothing going wrong):

- calls per turn: the pilot's calls over the dry pass's;
- input tokens: the pilot's over the dry pass's (prompts re-sent by repairs,
  longer replies carried into later prompts);
- output tokens and seconds per call: the pilot's own means.

Those scale the planned cell's dry estimate. Each pilot run gives one
estimate of the cell: the point is their mean, the interval their mean
+- t * SD * sqrt(1 + 1/n) (a 90% prediction interval for one cell, n runs),
kept inside the dry passes' own low and high (what the caps allow), summed
over cells. One run has no spread: its interval stays the dry passes'.

A pilot of another format is an error of one line (its turns are not the
plan's); a role run on another model than planned is scaled anyway, with a
one-line warning (the pilot then measures that model, not the planned one).
"""

from __future__ import annotations

import copy
import math
import statistics
from dataclasses import dataclass, fields, replace
from pathlib import Path

from omegaconf import OmegaConf, open_dict

from harness.engine.resuming import ResumeError, load_config
from harness.formats import validate
from harness.plan.cells import PlanError, PlannedCell
from harness.plan.dry import Passes, length_key, units_of
from harness.plan.estimate import Estimate, Roles, Tally, estimate_cell, pick
from harness.schema import ConfigError
from harness.store.reader import find_runs, replies

Tag = tuple[str, str]  # a call's (team, role) tags: "None" for no team

# two-sided 90% t quantiles for 1..10 degrees of freedom; past 10, 1.645 + 1.6/df is within 0.4%
_T90 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812)


def t90(df: int) -> float:
    return _T90[df - 1] if df <= len(_T90) else 1.645 + 1.6 / df


@dataclass(frozen=True)
class PilotRun:
    """What one pilot run's calls did, per role."""

    path: Path
    format: str
    units: int  # its length, in the format's length key
    specs: dict[str, str]  # model role -> the model spec it ran
    tags: dict[Tag, Tally]  # (team, role) tags -> their calls, input and output tokens
    seconds: dict[Tag, float]  # (team, role) tags -> the summed latency_s of their calls

    def roles(self, owner: dict[Tag, str]) -> tuple[Roles, dict[str, float], list[Tag]]:
        """Calls and seconds per model role (``owner``: each tag's), and the tags no role owns."""
        roles: Roles = {}
        seconds: dict[str, float] = {}
        for tag, t in self.tags.items():
            if (role := owner.get(tag)) is not None:
                roles[role] = roles.get(role, Tally()) + t
                seconds[role] = seconds.get(role, 0.0) + self.seconds[tag]
        return roles, seconds, [tag for tag in self.tags if tag not in owner]


def read_pilot(paths: list[Path]) -> list[PilotRun]:
    """Every run folder in ``paths`` (each a run folder or a folder of them), read."""
    runs = []
    for path in paths:
        if not path.is_dir():
            raise PlanError(f"--pilot {path}: no such folder")
        found = find_runs(path)
        if not found:
            raise PlanError(f"--pilot {path}: no run folder (one holding manifest.json) in it")
        runs += [read_run(run_dir) for run_dir in found]
    return runs


def read_run(run_dir: Path) -> PilotRun:
    try:
        run = load_config(run_dir, [])
    except (ResumeError, ConfigError) as exc:
        raise PlanError(f"--pilot {run_dir}: {exc}") from None
    tags: dict[Tag, Tally] = {}
    seconds: dict[Tag, float] = {}
    for reply in replies(run_dir):
        u, tag = reply.usage, (str(reply.team), reply.role)
        tags[tag] = tags.get(tag, Tally()) + Tally(1, u.input_tokens, u.output_tokens)
        seconds[tag] = seconds.get(tag, 0.0) + u.latency_s
    if not tags:
        raise PlanError(f"--pilot {run_dir}: no model replies in it (*/replies.jsonl)")
    specs = {role: model_cfg.spec for role, (model_cfg, _, _) in run.models.items()}
    return PilotRun(run_dir, run.fmt.name, units_of(run.cfg), specs, tags, seconds)


def at_length(cell: PlannedCell, units: int) -> PlannedCell:
    """``cell`` with its length set to ``units`` (a pilot's length)."""
    cfg = copy.deepcopy(cell.cfg)
    with open_dict(cfg):
        OmegaConf.update(cfg, length_key(cell.settings)[0], units, merge=False)
    return PlannedCell(cell.name, cfg, validate(cfg))


def scaled(estimate: Estimate, base: Roles, pilot: Roles) -> Roles:
    """The cell's point scaled by one pilot run's ``pilot`` calls (``base``: the dry pass
    at the run's length); a role the pilot lacks keeps its dry figures."""
    out = dict(estimate.point)
    for role, dry in estimate.point.items():
        got, ref = pilot.get(role), base.get(role)
        if got is None or ref is None or not ref.calls or not got.calls or not dry.calls:
            continue
        calls = dry.calls * got.calls / ref.calls
        grown = got.input / ref.input if ref.input else got.calls / ref.calls
        out[role] = Tally(
            calls, dry.input * grown, calls * got.output / got.calls, dry.charged * calls / dry.calls
        )
    return out


def spread(samples: list[Roles]) -> tuple[Roles, Roles, Roles]:
    """Mean, and the 90% prediction interval of one more cell, role by role and field by field."""
    n = len(samples)
    mean, low, high = {}, {}, {}
    for role in samples[0]:
        values = [[getattr(s[role], f.name) for s in samples] for f in fields(Tally)]
        m = [statistics.fmean(v) for v in values]
        half = [t90(n - 1) * statistics.stdev(v) * math.sqrt(1 + 1 / n) if n > 1 else 0.0 for v in values]
        mean[role] = Tally(*m)
        low[role] = Tally(*(max(0.0, a - h) for a, h in zip(m, half, strict=True)))
        high[role] = Tally(*(a + h for a, h in zip(m, half, strict=True)))
    return mean, low, high


@dataclass
class Calibration:
    """A pilot, and what it said about the plan's cells."""

    runs: list[PilotRun]
    warnings: list[str]

    def apply(self, estimate: Estimate, passes: Passes, words: bool | None) -> Estimate:
        """``estimate`` scaled by every pilot run, with the interval from their spread."""
        cell = estimate.cell
        formats = {run.format for run in self.runs}
        if formats != {cell.settings.format.name}:
            names = ", ".join(sorted(formats))
            raise PlanError(
                f"--pilot: runs of {names}, cell {cell.name} is {cell.settings.format.name}: "
                "a pilot must run the planned format"
            )
        bases = {u: self.base(cell, u, passes, words) for u in {r.units for r in self.runs}}
        samples: list[Roles] = []
        seconds: dict[str, float] = {}
        calls: dict[str, float] = {}
        for run in self.runs:
            base, owner = bases[run.units]
            roles, run_s, strays = run.roles(owner)
            self.warn(estimate, run, roles, strays)
            samples.append(scaled(estimate, base, roles))
            for role, t in roles.items():
                seconds[role] = seconds.get(role, 0.0) + run_s[role]
                calls[role] = calls.get(role, 0.0) + t.calls
        point, low, high = spread(samples)
        if len(samples) == 1:  # no spread: the dry passes' interval, around the pilot's point
            low, high = estimate.low, estimate.high
        # never past what the caps allow: no fewer calls than turns, no more than the ceiling
        low = pick(pick(low, estimate.low, larger=True), point, larger=False)
        high = pick(pick(high, estimate.high, larger=False), point, larger=True)
        per_call = {role: seconds[role] / calls[role] for role in seconds if calls[role]}
        return replace(estimate, point=point, low=low, high=high, call_s=per_call)

    @staticmethod
    def base(
        cell: PlannedCell, units: int, passes: Passes, words: bool | None
    ) -> tuple[Roles, dict[Tag, str]]:
        """The cell's dry point at ``units``, and which model role makes each tag's calls."""
        short = at_length(cell, units)
        owner = {c.tag: c.role for c in passes.calls(short.cfg, short.settings, "point", units, 0)}
        return estimate_cell(short, passes, words).point, owner

    def warn(self, estimate: Estimate, run: PilotRun, roles: Roles, strays: list[Tag]) -> None:
        """One line each: a role run on another model, missing from the pilot, or calls no role owns."""
        settings = estimate.cell.settings
        lines = []
        for role in estimate.point:
            planned, ran = settings.role_model(role)[0].spec, run.specs.get(role)
            if ran is not None and ran != planned:
                lines.append(f"pilot: role {role} ran {ran}, the plan's cells run {planned}; scaled anyway")
            if role not in roles:
                lines.append(f"pilot: {run.path} made no {role} call; {role} keeps the dry passes' figures")
        if strays:
            names = ", ".join(sorted(f"{team}/{role}" for team, role in strays))
            lines.append(f"pilot: {run.path}: calls the planned cells never make ({names}), left out")
        self.warnings += [line for line in lines if line not in self.warnings]

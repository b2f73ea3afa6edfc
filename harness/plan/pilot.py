"""Calibrating a plan from a pilot: ``--pilot <run folders or a sweep folder>``.

The scripted dry passes give a cell's structure (the turns each role takes
a round, the rounds, the prompts the format renders, growing with the
transcript); they never meet a real model's rejections, repairs, re-asks,
loop-locks or schema failures, nor its reply lengths or its speed. A pilot's
run folders hold all of that: every call keeps a reply (``<seat>/replies.jsonl``,
repairs and rejected drafts included), with its round, team and role tags and
its usage (tokens, ``latency_s``).

The unit is the turn: a pilot run's calls of one round and one seat (a
call with no seat is a turn of its own), set beside the calls the planned
cell's own dry pass makes in that round and seat at the pilot's length (what
the turn costs with nothing going wrong). Per call kind (``tag_key``: the
model role and the team and role tags: the critic's critiques, a team's
personas and drafts, each apart), pooled over every turn of every run, as
ratios of sums:

- calls: the pilot's over the dry passes' (each rejection's new draft and
  critique, each repair, a critique a failed draft never got);
- input tokens: the pilot's over the dry passes' of the same rounds, so a
  planned round's prompts are its dry prompts, grown with the transcript as
  the dry pass grows them, at the size the pilot's prompts are to the dry
  ones (repairs re-sending a prompt, rejections' feedback in it);
- output tokens and seconds: the pilot's own per call (a role run on the
  scripted model with no ``model.latency_s`` took no model time: the plan's
  model times it).

Those scale the planned cell's dry figures of each kind. The interval is a
predictive bootstrap over runs and turns: each draw resamples the pilot's
runs, then each resampled run's turns (how well the pilot knows the rates;
a run's turns share its level, so turns pooled across runs would hide how
runs differ), draws the planned cell's turns from those (how much one
cell's own turns vary), and scales the plan by the drawn turns' ratios;
the interval is the draws' 5th to 95th percentile per role, kept inside
the dry passes' own low and high (what the caps allow), summed over cells.
Under ``FEWEST`` turns a seat the bootstrap is too coarse to trust,
and the interval stays the dry passes'; past +-25% in calls, one line says how
many more runs like the pilot's would narrow it there.

Only the rounds a pilot run finished itself are its turns: an unfinished run
(stopped by its budget, failed, killed) counts its rounds up to its last
snapshot, its unplayed rounds are no turns, and the calls of the round it
stopped in are left out (that turn never finished; counted, it would look like
a cheap one); a fork's rounds 1..k are its parent's. A run that finished no
round (or holds no reply) is an error of one line when named itself; found in
a folder of runs (a pilot sweep with a cell killed before its first round), it
is skipped with a line naming it, while another run of the folders is usable.

A pilot of another format is an error of one line (its turns are not the
plan's); a role run on another model than planned, or a pilot run under other
loop limits (``critic.max_iterations``, ``structured.max_repairs``), is
scaled anyway, with a one-line warning.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf, open_dict

from harness.engine.resuming import ResumeError, load_config
from harness.formats import validate
from harness.plan.cells import PlanError, PlannedCell
from harness.plan.dry import Call, Passes, length_key, rounds_of, scripted, units_of
from harness.plan.estimate import Estimate, Roles, Tally, countings, estimate_cell, pick, tally
from harness.schema import Config, ConfigError
from harness.store.reader import find_runs, replies
from harness.store.records import RunManifest
from harness.store.rundir import read_manifest
from harness.store.snapshot import list_snapshots

Tag = tuple[str, str]  # a call's (team, role) tags: "None" for no team
Turn = tuple[int, str]  # (round, team): the calls of one seat's turn
DRAWS = 1000  # bootstrap draws a cell
WIDE = 0.25  # a cell's calls interval past +-25% gets a line on how many more runs would narrow it
# the fewest turns a seat for a bootstrap interval: on SmolLM2, 2-run pilots of 2 rounds (4 a
# seat) held 52 of 60 held-out cells in their 90% interval, 1-run pilots (2 a seat) 16 of 30
FEWEST = 4
SEED = 0  # the bootstrap's: a plan is the same each time it is made
ONE_RUN = (
    "pilot: 1 run, so the interval is its turns' spread alone; runs differ in level (a run that "
    "falls into repairs stays in them), and it takes a second run to show by how much"
)


@dataclass(frozen=True)
class PilotCall:
    round: int
    tag: Tag
    attempt: int  # 0, then each structured repair
    input: int
    output: int
    seconds: float


@dataclass(frozen=True)
class PilotRun:
    """What one pilot run's calls did."""

    path: Path
    format: str
    units: int  # its length, in the format's length key
    specs: dict[str, str]  # model role -> the model spec it ran
    limits: tuple[int, int]  # its critic.max_iterations and structured.max_repairs
    calls: tuple[PilotCall, ...]  # those of the rounds it finished
    played: int | None = None  # an unfinished run's rounds finished; None: it completed
    planned: int = 0  # the rounds it was to run
    status: str = "completed"
    left_out: int = 0  # calls of the round it stopped in
    forked_at: int = 0  # a fork's k: its rounds 1..k are its parent's
    reached: int = 0  # the last round it played (a completed run may stop early: a panel's judge)
    first_unit: int = 1  # the rounds a run of one length unit plays (a moderated exchange: 4)
    # roles it ran on the scripted model with no latency: their seconds are the harness's, not a model's
    untimed: frozenset[str] = frozenset()

    def own(self, round_: int) -> bool:
        """Whether ``round_`` is one this run finished itself."""
        return (not self.forked_at or round_ > self.forked_at) and (
            self.played is None or round_ <= self.played
        )

    def partial(self) -> str | None:
        """A line on which of its rounds count, for a fork or an unfinished run; else None."""
        parts = [f"a fork at round {self.forked_at}"] if self.forked_at else []
        if self.played is not None:
            parts.append(f"{self.played} of {self.planned} rounds played ({stopped(self.status)})")
        if not parts:
            return None
        last = self.planned if self.played is None else self.played
        line = f"pilot: {self.path}: {', '.join(parts)}, only its rounds {self.forked_at + 1}-{last} count"
        if self.left_out:
            line += f"; the {self.left_out} call(s) of its unfinished round {last + 1} left out"
        return line


def limits(cfg: Config) -> tuple[int, int]:
    return cfg.critic.max_iterations, cfg.structured.max_repairs


def read_pilot(paths: list[Path]) -> tuple[list[PilotRun], list[str]]:
    """Every run folder in ``paths`` (each a run folder or a folder of them), read once:
    a run named twice (``--pilot <sweep> --pilot <sweep>/<cell>``) is one run's turns,
    and counted twice would narrow the interval as a second run would. With them, a
    line for each run found in a folder and skipped: it finished no round (a pilot
    sweep's cell killed early would refuse the rest); a run named itself is refused."""
    found: dict[Path, tuple[Path, bool]] = {}  # each run: its folder, and whether it was named itself
    for path in paths:
        if not path.is_dir():
            raise PlanError(f"--pilot {path}: {'not a folder' if path.exists() else 'no such folder'}")
        if not (runs := find_runs(path)):
            raise PlanError(f"--pilot {path}: no run folder (one holding manifest.json) in it")
        for run_dir in runs:
            named = found.get(run_dir.resolve(), (run_dir, False))[1] or run_dir.resolve() == path.resolve()
            found[run_dir.resolve()] = (run_dir, named)
    read, skipped = [], []
    for run_dir, named in found.values():
        try:
            read.append(read_run(run_dir))
        except NoTurns as exc:
            if named:
                raise
            skipped.append(exc)
    if not read:
        raise skipped[0]
    return read, [f"pilot: skipped {str(exc).removeprefix('--pilot ')}" for exc in skipped]


class NoTurns(PlanError):
    """A pilot run with no round of its own finished: nothing to calibrate from."""


def read_run(run_dir: Path) -> PilotRun:
    try:
        run = load_config(run_dir, [])
        manifest = read_manifest(run_dir)
    except (ResumeError, ConfigError, ValueError) as exc:  # ValueError: a manifest of another version, or bad
        raise PlanError(f"--pilot {run_dir}: {str(exc).splitlines()[0]}") from None
    calls = [
        PilotCall(
            r.round,
            (str(r.team), r.role),
            r.attempt,
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.latency_s,
        )
        for r in replies(run_dir)
    ]
    if not calls:
        raise NoTurns(f"--pilot {run_dir}: no model replies in it (*/replies.jsonl)")
    planned, forked_at = run.fmt.planned_rounds(run.cfg), manifest.lineage.at_round if manifest.lineage else 0
    played = None if manifest.status == "completed" else rounds_played(run_dir, manifest)
    if played is not None and played <= forked_at:
        none = (
            f"no round of its own played (a fork at round {forked_at}; " if forked_at else "no round played ("
        )
        raise NoTurns(
            f"--pilot {run_dir}: {none}{played} of {planned}, {stopped(manifest.status)}), "
            "so no turn to calibrate from"
        )
    specs = {role: model_cfg.spec for role, (model_cfg, _, _) in run.models.items()}
    untimed = frozenset(r for r, (m, _, _) in run.models.items() if scripted(m.spec) and not m.latency_s)
    kept = tuple(c for c in calls if played is None or c.round <= played)
    reached = (manifest.counts.rounds_completed or planned) if played is None else played
    return PilotRun(
        run_dir,
        run.fmt.name,
        units_of(run.cfg),
        specs,
        limits(run.cfg),
        kept,
        played=played,
        planned=planned,
        status=manifest.status,
        left_out=len(calls) - len(kept),
        forked_at=forked_at,
        reached=reached,
        first_unit=rounds_of(run.cfg, 1),
        untimed=untimed,
    )


def stopped(status: str) -> str:
    return "running, or killed" if status == "running" else status  # a kill leaves "running"


def rounds_played(run_dir: Path, manifest: RunManifest) -> int:
    """The rounds an unfinished run finished: a killed run's manifest is as it was
    written at its start, so its newest snapshot (one a finished round) says."""
    snaps = list_snapshots(run_dir)
    return max(manifest.counts.rounds_completed, int(snaps[-1].stem.removeprefix("round-")) if snaps else 0)


def at_length(cell: PlannedCell, units: int) -> PlannedCell:
    """``cell`` with its length set to ``units`` (a pilot's length)."""
    cfg = copy.deepcopy(cell.cfg)
    with open_dict(cfg):
        OmegaConf.update(cfg, length_key(cell.settings)[0], units, merge=False)
    return PlannedCell(cell.name, cfg, validate(cfg))


@dataclass
class Turns:
    """The pilot's turns beside the dry passes', per call kind (``tag_key``)."""

    keys: list[str]
    real: np.ndarray  # [turn, key, (calls, input, output, seconds)]
    dry: np.ndarray  # [turn, key, (dry calls, dry input)]
    seats: list[str]  # each turn's team
    runs: list[int] = field(default_factory=list)  # each turn's pilot run, by its place in the pilot
    repairs: int = 0  # the pilot's calls that were repairs
    strays: set[str] = field(default_factory=set)  # (team/role) tags no planned role makes

    def fewest(self) -> int:
        """The fewest turns a seat took (a seat with no team aside: a topic, a judge)."""
        counts = {seat: self.seats.count(seat) for seat in self.seats}
        teams = [n for seat, n in counts.items() if seat != "None"]
        return min(teams or counts.values() or [0])

    def both(self) -> np.ndarray:
        """[turn, key, (calls, input, output, seconds, dry calls, dry input)]."""
        return np.concatenate([self.real, self.dry], axis=-1)


def dry_turns(cell: PlannedCell, units: int, passes: Passes, words: bool | None) -> dict[Turn, Roles]:
    """The planned cell's dry calls at ``units`` units, per turn and ``tag_key``: the mean of
    the two seeds its point takes first."""
    short = at_length(cell, units)
    counting = countings(short.settings, words)
    repairs = short.settings.structured.max_repairs
    out: dict[Turn, Roles] = {}
    for seed in (0, 1):
        by_turn: dict[Turn, list[Call]] = defaultdict(list)
        for call in passes.calls(short.cfg, short.settings, "point", units, seed):
            by_turn[(call.round, call.tag[0])].append(call)
        for turn, calls in by_turn.items():
            mine = out.setdefault(turn, {})
            for key, t in tally(calls, "point", counting, repairs, by_tag=True).items():
                mine[key] = mine.get(key, Tally()) + t.times(0.5)
    return out


def real_turns(run: PilotRun, owner: dict[str, str], turns: Turns) -> dict[Turn, dict[str, list[float]]]:
    """One run's calls per turn and ``tag_key``: (calls, input, output, seconds); a call
    of a tag no planned role makes (``owner``: tag -> role) is counted in ``turns.strays``."""
    real: dict[Turn, dict[str, list[float]]] = defaultdict(dict)
    for c in run.calls:
        tag = f"{c.tag[0]}/{c.tag[1]}"
        if tag not in owner:
            turns.strays.add(tag)
            continue
        figures = real[(c.round, c.tag[0])].setdefault(f"{owner[tag]} {tag}", [0.0] * 4)
        for i, x in enumerate((1, c.input, c.output, c.seconds)):
            figures[i] += x
        turns.repairs += c.attempt > 0
    return real


def gather(
    runs: list[PilotRun], cell: PlannedCell, passes: Passes, words: bool | None, planned: Roles
) -> Turns:
    """Every pilot run's turns, each beside the cell's dry pass at the run's length."""
    dry_of = {u: dry_turns(cell, u, passes, words) for u in {run.units for run in runs}}
    turns = Turns([], np.zeros(0), np.zeros(0), [])
    rows: list[tuple[dict[str, list[float]], Roles]] = []
    for number, run in enumerate(runs):
        dry = dry_of[run.units]
        keys = {*planned, *(k for turn in dry.values() for k in turn)}
        real = real_turns(run, {k.split(" ", 1)[1]: k.split(" ", 1)[0] for k in keys}, turns)
        played = sorted(turn for turn in {*real, *dry} if run.own(turn[0]))
        rows += [(real.get(turn, {}), dry.get(turn, {})) for turn in played]
        turns.seats += [team for _, team in played]
        turns.runs += [number] * len(played)
    turns.keys = sorted({*planned, *(k for r, d in rows for k in (*r, *d))})
    turns.real = np.array([[r.get(k, [0.0] * 4) for k in turns.keys] for r, _ in rows])
    turns.dry = np.array(
        [[[d[k].calls, d[k].input] if k in d else [0.0] * 2 for k in turns.keys] for _, d in rows]
    )
    return turns


def project(sums: np.ndarray, pooled: np.ndarray, planned: np.ndarray) -> np.ndarray:
    """The planned dry figures [key, (calls, input, output, charged)] scaled by the pilot's
    ``sums`` [..., key, (calls, input, output, seconds, dry calls, dry input)]: [..., key,
    (calls, input, output, charged, seconds)]. A kind the drawn turns lack (in the pilot
    or the dry pass) takes the ``pooled`` ratios; one the whole pilot lacks keeps its dry
    figures (and no seconds)."""
    seen = (pooled[:, 0] > 0) & (pooled[:, 4] > 0)
    sums = np.where((sums[..., 4:5] > 0) & (sums[..., 0:1] > 0), sums, pooled)
    calls_ratio = np.where(seen, sums[..., 0] / np.maximum(sums[..., 4], 1e-9), 1.0)
    input_ratio = np.where(seen, sums[..., 1] / np.maximum(sums[..., 5], 1e-9), 1.0)
    calls = planned[:, 0] * calls_ratio
    per_call = sums[..., 2:4] / np.maximum(sums[..., 0:1], 1e-9)
    output = np.where(seen, calls * per_call[..., 0], planned[:, 2])
    seconds = np.where(seen, calls * per_call[..., 1], 0.0)
    return np.stack([calls, planned[:, 1] * input_ratio, output, planned[:, 3] * calls_ratio, seconds], -1)


def draws(
    both: np.ndarray, runs: np.ndarray, cell_turns: int, rng: np.random.Generator, picked: np.ndarray | None
) -> np.ndarray:
    """A predictive bootstrap of ``cell_turns`` turns of one seat, from the pilot's turns of
    that seat ``both`` (``runs``: each one's pilot run): [draw, key, 6] sums. With
    ``picked`` ([draw, run]: the pilot's runs resampled), each draw first makes its pool
    of turns from those runs, each run's turns resampled (the pilot's ratios are
    estimates, and a run's turns share its level: a run that falls into repairs
    stays in them); else the cell's turns come from the pilot's as they are (a
    cell's own spread alone)."""
    n = len(both)
    if picked is None:
        pool = np.tile(np.arange(n), (DRAWS, 1))
    else:
        order = np.argsort(runs, kind="stable")
        starts = np.searchsorted(runs[order], np.arange(picked.shape[1]))
        counts = np.bincount(runs, minlength=picked.shape[1])
        # slot j of a pool stands where turn j's run stands, filled from that place's resampled run
        source = picked[:, runs]  # [draw, slot] -> a pilot run
        size = counts[source]
        pool = np.where(
            size > 0,
            order[np.minimum(starts[source] + (rng.random((DRAWS, n)) * size).astype(int), n - 1)],
            np.arange(n),  # a run with no turn of this seat: the slot keeps its own turn
        )
    chosen = np.take_along_axis(pool, rng.integers(n, size=(DRAWS, cell_turns)), axis=1)
    return both[chosen].sum(axis=1)


def seat_draws(
    turns: Turns, planned: np.ndarray, rng: np.random.Generator, estimated: bool = True
) -> np.ndarray:
    """Each seat's turns drawn apart (a seat's calls are its own kinds'), as many as the
    planned cell's dry calls of its kinds make at the pilot's dry calls a turn: [draw, key, 6].
    The pilot's runs are resampled once a draw, for every seat alike."""
    both, seats, runs = turns.both(), np.array(turns.seats), np.array(turns.runs)
    count = int(runs.max()) + 1 if len(runs) else 0
    picked = rng.integers(count, size=(DRAWS, count)) if estimated else None
    out = np.zeros((DRAWS, *both.shape[1:]))
    for seat in sorted(set(turns.seats)):
        mine = both[seats == seat]
        per_turn = mine[..., 4].sum() / len(mine)
        kinds = mine[..., 4].sum(0) > 0
        cell_turns = max(1, round(planned[kinds, 0].sum() / per_turn)) if per_turn else 1
        out += draws(mine, runs[seats == seat], cell_turns, rng, picked)
    return out


def by_role(keys: list[str], figures: np.ndarray) -> dict[str, np.ndarray]:
    """[..., key, f] summed over each model role's kinds: role -> [..., f]."""
    out: dict[str, np.ndarray] = {}
    for i, key in enumerate(keys):
        role = key.split(" ", 1)[0]
        out[role] = out[role] + figures[..., i, :] if role in out else figures[..., i, :]
    return out


def tallies(roles: dict[str, np.ndarray]) -> Roles:
    return {role: Tally(*(float(x) for x in f[:4])) for role, f in roles.items()}


def half_width(calls: np.ndarray, point: float) -> float:
    """A 90% interval's half width, over ``point``."""
    low, high = np.percentile(calls, [5, 95])
    return float(high - low) / 2 / point if point else 0.0


@dataclass(frozen=True)
class Projection:
    """One cell as the pilot scales it: point, and the bootstrap's draws, per role."""

    point: dict[str, np.ndarray]  # role -> (calls, input, output, charged, seconds)
    drawn: dict[str, np.ndarray]  # role -> [draw, 5]
    alone: np.ndarray  # the cell's total calls a draw, from its own turns' spread alone

    def calls(self) -> tuple[float, np.ndarray]:
        drawn = np.sum([f[:, 0] for f in self.drawn.values()], axis=0)
        return float(sum(f[0] for f in self.point.values())), drawn


def projection(turns: Turns, planned_roles: Roles) -> Projection:
    """The cell's dry figures per kind (``planned_roles``) scaled by the pilot's ``turns``."""
    planned = np.array(
        [[*(getattr(planned_roles.get(k, Tally()), f.name) for f in fields(Tally))] for k in turns.keys]
    )
    pooled = turns.both().sum(0)
    rng = np.random.default_rng(SEED)
    point = by_role(turns.keys, project(pooled, pooled, planned))
    drawn = by_role(turns.keys, project(seat_draws(turns, planned, rng), pooled, planned))
    alone = project(seat_draws(turns, planned, rng, estimated=False), pooled, planned)[..., 0].sum(-1)
    return Projection(point, drawn, alone)


@dataclass
class Calibration:
    """A pilot, and what it said about the plan's cells."""

    runs: list[PilotRun]
    warnings: list[str]
    wide: tuple[float, str] | None = None  # the widest cell's interval, and its line
    turns: int = 0  # the pilot's turns, as the last cell planned counted them
    spread: bool = False  # whether they were enough for a bootstrap interval
    summary: str = ""  # what they did, in one line

    def lines(self) -> list[str]:
        """What the pilot's turns did, the warnings, then the line on a wide interval, if any."""
        partial = [line for run in self.runs if (line := run.partial())]
        return [self.summary, *partial, *self.warnings] + ([self.wide[1]] if self.wide else [])

    def apply(self, estimate: Estimate, passes: Passes, words: bool | None) -> Estimate:
        """``estimate`` scaled by the pilot, with the interval from its spread over turns."""
        cell = estimate.cell
        formats = {run.format for run in self.runs}
        if formats != {cell.settings.format.name}:
            other = next(run for run in self.runs if run.format != cell.settings.format.name)
            raise PlanError(
                f"--pilot {other.path}: a run of {other.format}, cell {cell.name} is "
                f"{cell.settings.format.name}: a pilot must run the planned format"
            )
        planned = estimate_cell(cell, passes, words, by_tag=True).point
        turns = gather(self.runs, cell, passes, words, planned)
        self.warn(estimate, turns)
        self.summarize(turns)
        cell_ = projection(turns, planned)
        point = tallies(cell_.point)
        low, high = self.interval(estimate, turns, cell_)
        # never past what the caps allow: no fewer calls than turns, no more than the ceiling
        low = pick(pick(low, estimate.low, larger=True), point, larger=False)
        high = pick(pick(high, estimate.high, larger=False), point, larger=True)
        timed = {r: f for r, f in cell_.point.items() if r not in self.untimed()}
        per_call = {r: float(f[4] / f[0]) for r, f in timed.items() if f[0] and f[4]}
        return replace(estimate, point=point, low=low, high=high, call_s=per_call)

    def untimed(self) -> set[str]:
        """Roles a pilot run played on the scripted model with ``model.latency_s`` 0: their
        seconds a call are the harness's own (already counted apart), so the plan's model times them."""
        return {role for run in self.runs for role in run.untimed}

    def summarize(self, turns: Turns) -> None:
        self.turns, calls, dry = len(turns.real), turns.real[..., 0].sum(), turns.dry[..., 0].sum()
        self.summary = (
            f"pilot: {self.turns} turns in {len(self.runs)} run(s), {calls / self.turns:.1f} calls a turn "
            f"where the dry passes make {dry / self.turns:.1f}, {turns.repairs / max(calls, 1):.0%} of them repairs"
        )

    def interval(self, estimate: Estimate, turns: Turns, cell: Projection) -> tuple[Roles, Roles]:
        """The draws' 5th and 95th percentiles per role; with too few turns a seat for a
        spread, the dry passes' low and high, and a line saying so."""
        fewest = turns.fewest()
        self.spread = fewest >= FEWEST
        if not self.spread:
            more = math.ceil(len(self.runs) * (FEWEST / max(fewest, 1) - 1))
            self.wide = (
                math.inf,
                f"pilot: {fewest} turn(s) a seat are too few for a spread, so the interval is the dry "
                f"passes' (what the caps allow); {more} more run(s) like these would give one",
            )
            return estimate.low, estimate.high
        if len(self.runs) == 1 and ONE_RUN not in self.warnings:
            self.warnings.append(ONE_RUN)
        low = tallies({r: np.percentile(f, 5, axis=0) for r, f in cell.drawn.items()})
        high = tallies({r: np.percentile(f, 95, axis=0) for r, f in cell.drawn.items()})
        self.note_width(cell, len(turns.real))
        return low, high

    def note_width(self, cell: Projection, pilot_turns: int) -> None:
        """A line when the cell's calls interval is past +-``WIDE``: how many more runs like
        the pilot's would narrow it there (the part the pilot's size makes shrinks as
        1/runs; a cell's own turns' spread does not)."""
        point, drawn = cell.calls()
        width, alone = half_width(drawn, point), half_width(cell.alone, point)
        if width <= WIDE or (self.wide and self.wide[0] >= width):
            return
        n, known = len(self.runs), max(0.0, width**2 - alone**2)
        more = [m for m in range(1, 21) if math.sqrt(alone**2 + known * n / (n + m)) <= WIDE]
        head = f"pilot: the interval is wide (calls +-{width:.0%} a cell, from {pilot_turns} turns in {n} run(s))"
        if more:
            after = math.sqrt(alone**2 + known * n / (n + more[0]))
            line = f"{head}: {more[0]} more pilot run(s) like these would narrow it to about +-{after:.0%}"
        else:
            floor = math.sqrt(alone**2 + known * n / (n + 20))
            line = (
                f"{head}: a cell's own turns vary +-{alone:.0%}, which more pilot runs do not "
                f"narrow: 20 more would leave +-{floor:.0%}"
            )
        self.wide = (width, line)

    def warn(self, estimate: Estimate, turns: Turns) -> None:
        """One line each: a role run on another model, or under other loop limits, a role
        missing from the pilot, calls no planned role makes."""
        settings = estimate.cell.settings
        lines = []
        for run in self.runs:
            for role in estimate.point:
                planned, ran = settings.role_model(role)[0].spec, run.specs.get(role)
                if ran is not None and ran != planned:
                    lines.append(
                        f"pilot: role {role} ran {ran}, the plan's cells run {planned}; scaled anyway"
                    )
            if run.limits != limits(settings):
                lines.append(
                    f"pilot: {run.path} ran critic.max_iterations, structured.max_repairs = {run.limits}, "
                    f"the plan's cells {limits(settings)}; its calls a turn scaled anyway"
                )
        # the rounds played, not the length set: a 3-round pilot stopped after round 1 measured no growth
        if all(run.reached <= run.first_unit for run in self.runs) and estimate.units > 1:
            unit = estimate.unit_key.split(".")[-1].removesuffix("s")
            lines.append(
                f"pilot: its runs played no {unit} past the first, so later {unit}s' prompts grow as the dry "
                f"passes' do (on SmolLM2 that put a 2-round plan's input 12% high: real turns publish less); "
                f"2 {unit}s played measure it"
            )
        if untimed := sorted(self.untimed() & set(estimate.point)):
            lines.append(
                f"pilot: {', '.join(untimed)} ran the scripted model with model.latency_s=0, whose seconds a "
                "call are ~0 (the harness's own), so the wall time takes theirs from the plan's model"
            )
        made = {k.split(" ", 1)[0] for k, row in zip(turns.keys, turns.real.sum(0), strict=True) if row[0]}
        for role in estimate.point:
            if role not in made:
                lines.append(f"pilot: no {role} call in it; {role} keeps the dry passes' figures")
        if turns.strays:
            lines.append(
                f"pilot: calls the planned cells never make ({', '.join(sorted(turns.strays))}), left out"
            )
        self.warnings += [line for line in lines if line not in self.warnings]

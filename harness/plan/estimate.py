"""From dry passes to one cell's calls and tokens, per role: a point and an interval.

Tokens are counted as the role's provider would count them: words for the
scripted model (it bills words, as the provider simulator does), else about
four characters a token, as the shared limiter estimates a prompt
(``harness.models.limiter.estimate_tokens``).

- point: each call's prompt as rendered, and its reply at the size the
  scripted model writes it (the simulator's calibration), at most the
  call's ``max_tokens``; the mean of two seeds, or of sixteen when the seeds
  disagree on the calls made (a fact-check, a panel judge: a format whose
  structure depends on what the model says);
- low: the smaller of the ``low`` and ``short`` passes (when the structure
  varies; else the point's calls), each reply at the shortest its schema allows;
- high: the ``high`` pass, each reply at its whole ``max_tokens``, and each
  structured call repaired ``structured.max_repairs`` times, every repair
  sending the prompt again with the bad reply and the note.

A run longer than the dry passes is extrapolated, not run: a pass of K
units and one of K+1 differ by one unit at full window (rounds whose
prompts stopped growing, the closing calls moved along), and every unit
past K adds that much. K is the first unit at which prompts stop growing
(``memory.window_rounds``, or the format's own longer window, plus one);
past ``CAP_UNITS`` a third pass measures how much each unit's prompts still
grow, and the growth is added until the window is full.

Checkpoint interviews are counted apart, per chosen round: a pass asks the
rounds past its end at its last round (``asked_rounds``), and each chosen
round costs the block of interview calls asked there. A fork pays only its
rounds after k: the whole run's estimate less that of its first k rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from harness.formats import get_format
from harness.plan.cells import PlannedCell
from harness.plan.dry import (
    Call,
    Kind,
    Passes,
    asked_rounds,
    length_key,
    rounds_of,
    scripted,
    units_of,
    window_plateau,
)
from harness.probes.questionnaire import INTERVIEW_ROLE
from harness.schema import Config

CAP_UNITS = 6  # the longest pass before prompt growth is extrapolated instead
# seeds averaged when two disagree on the calls made. A judged panel ends at round
# 2, 3 or 4 (13, 19 or 24 calls): the mean of its first 8 seeds was 9% over the
# mean of 24, the mean of 16 2% under it
VARIED_SEEDS = 16
# what a structured repair adds besides the bad reply (harness.models.structured)
REPAIR_NOTE = (
    "That reply was invalid (argument: String should have at least 40 characters). Reply again "
    "with only one JSON object that has exactly the required fields."
)
REPAIR_REPLY_CHARS = 2000  # a repair shows at most this much of the bad reply


@dataclass(frozen=True)
class Tally:
    """One role's calls and tokens."""

    calls: float = 0.0
    input: float = 0.0
    output: float = 0.0
    charged: float = 0.0  # what a TPM limit is charged: prompt (~4 chars a token) + max_tokens

    def __add__(self, other: Tally) -> Tally:
        return Tally(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, other: Tally) -> Tally:
        return self + other.times(-1)

    def times(self, k: float) -> Tally:
        return Tally(*(getattr(self, f.name) * k for f in fields(self)))

    def floor(self) -> Tally:
        return Tally(*(max(0.0, getattr(self, f.name)) for f in fields(self)))


Roles = dict[str, Tally]


def combine(a: Roles, b: Roles, k: float = 1.0) -> Roles:
    """``a + k * b``, role by role."""
    return {r: a.get(r, Tally()) + b.get(r, Tally()).times(k) for r in {*a, *b}}


def pick(a: Roles, b: Roles, larger: bool) -> Roles:
    """The larger (or smaller) of two tallies, field by field and role by role."""
    best = max if larger else min
    out = {}
    for role in {*a, *b}:
        x, y = a.get(role, Tally()), b.get(role, Tally())
        out[role] = Tally(*(best(getattr(x, f.name), getattr(y, f.name)) for f in fields(Tally)))
    return out


@dataclass(frozen=True)
class Counting:
    """How a provider counts tokens: words (scripted, the simulator) or ~4 characters."""

    words: bool

    def text(self, texts: tuple[str, ...] | list[str]) -> int:
        if self.words:
            return sum(len(t.split()) for t in texts)
        return sum(len(t) for t in texts) // 4

    def chars(self, n: int) -> float:
        return n / 6 if self.words else n / 4  # ~6 characters a word of English prose, space included


def tag_key(call: Call) -> str:
    """A call's model role and its (team, role) tags, as one key: ``critic pros/critique``."""
    return f"{call.role} {call.tag[0]}/{call.tag[1]}"


def tally(
    calls: list[Call], kind: Kind, counting: dict[str, Counting], repairs: int, by_tag: bool = False
) -> Roles:
    """The calls of one pass, counted as ``kind`` counts them (see the module docstring),
    per model role, or per ``tag_key`` (``by_tag``)."""
    out: Roles = {}
    for call in calls:
        count = counting.get(call.role, Counting(words=False))
        prompt = count.text(call.prompt)
        reply = min(count.text([call.reply]), call.max_tokens)
        charged = sum(len(p) for p in call.prompt) // 4 + call.max_tokens
        if kind == "high":
            m = repairs if call.structured else 0
            shown = min(count.text([call.reply[:REPAIR_REPLY_CHARS]]), call.max_tokens)
            extra = m * (shown + count.text([REPAIR_NOTE]))
            one = Tally(1 + m, (1 + m) * prompt + extra, (1 + m) * call.max_tokens, (1 + m) * charged + extra)
        elif kind == "low":
            one = Tally(1, prompt, min(reply, count.chars(call.least_chars)), charged)
        else:
            one = Tally(1, prompt, reply, charged)
        key = tag_key(call) if by_tag else call.role
        out[key] = out.get(key, Tally()) + one
    return out


def extrapolate(measured: list[Roles], first: int, target: int, plateau: int) -> Roles:
    """Passes of ``first``, ``first+1`` (and ``first+2``) units, carried to ``target`` units."""
    if len(measured) == 1:
        return measured[0]
    step = combine(measured[1], measured[0], -1)
    growth = combine(combine(measured[2], measured[1], -1), step, -1) if len(measured) > 2 else {}
    # unit j (first <= j < target) adds step + growth * (units the window still grew by then)
    grown = sum(min(j, plateau - 1) - first for j in range(first, target))
    total = combine(combine(measured[0], step, target - first), growth, grown)
    return {role: t.floor() for role, t in total.items()}


@dataclass(frozen=True)
class Estimate:
    """One cell: its length, and its calls and tokens per role as point, low and high."""

    cell: PlannedCell
    units: int
    unit_key: str  # rounds, or format.exchanges
    point: Roles
    low: Roles
    high: Roles
    call_s: dict[str, float] = field(default_factory=dict)  # role -> seconds a call, as a pilot measured it
    after: int = 0  # a fork's units already paid (its parent's): only units after it are counted


def schedule(target: int, plateau: int) -> list[int]:
    """The lengths of the dry passes a run of ``target`` units needs."""
    first = min(plateau, CAP_UNITS)
    needed = 3 if plateau > first else 2
    return [target] if target < first + needed else [first + i for i in range(needed)]


def estimate_cell(
    cell: PlannedCell, passes: Passes, words: bool | None = None, by_tag: bool = False
) -> Estimate:
    """Dry-run ``cell`` as needed and estimate it (``words``: force how tokens are counted;
    ``by_tag``: per ``tag_key``, not per model role). A fork pays only its rounds
    after k: the whole run's estimate less that of its first k."""
    settings = cell.settings
    key, per = length_key(settings)
    target = units_of(settings)
    point, low, high = measured(cell, passes, words, target, by_tag)
    if cell.at_round:
        paid = measured(cell, passes, words, min(cell.at_round // per, target), by_tag)
        point, low, high = (less(a, b) for a, b in zip((point, low, high), paid, strict=True))
    low, high = pick(low, point, larger=False), pick(high, point, larger=True)
    return Estimate(cell, target, key, point, low, high, after=min(cell.at_round // per, target))


def less(a: Roles, b: Roles) -> Roles:
    return {role: t.floor() for role, t in combine(a, b, -1).items()}


def countings(settings: Config, words: bool | None) -> dict[str, Counting]:
    """How each model role's provider counts tokens (``words``: forced)."""
    specs = {
        role: settings.role_model(role)[0].spec
        for role in get_format(settings.format.name).model_roles(settings)
    }
    return {r: Counting(scripted(s) if words is None else words) for r, s in specs.items()}


def measured(
    cell: PlannedCell, passes: Passes, words: bool | None, target: int, by_tag: bool = False
) -> tuple[Roles, Roles, Roles]:
    """(point, low, high) of ``cell`` run to ``target`` units."""
    settings = cell.settings
    fmt = get_format(settings.format.name)
    plateau = window_plateau(settings, fmt)
    lengths = schedule(target, plateau)
    counting = countings(settings, words)
    repairs = settings.structured.max_repairs

    def measure(kind: Kind, seed: int, counted_as: Kind | None = None) -> Roles:
        runs = [passes.calls(cell.cfg, settings, kind, n, seed) for n in lengths]
        counted = [tally(debate(calls), counted_as or kind, counting, repairs, by_tag) for calls in runs]
        asked = interviews(runs[0], asked_rounds(settings, lengths[0]), rounds_of(settings, target))
        interviewed = [tally(block, counted_as or kind, counting, repairs, by_tag) for block in asked]
        return combine(extrapolate(counted, lengths[0], target, plateau), sum_roles(interviewed))

    seeds = [measure("point", 0), measure("point", 1)]
    varies = {r: t.calls for r, t in seeds[0].items()} != {r: t.calls for r, t in seeds[1].items()}
    if varies:
        seeds += [measure("point", n) for n in range(2, VARIED_SEEDS)]
    point: Roles = {}
    for one in seeds:
        point = combine(point, one, 1 / len(seeds))
    if varies:  # the fewest calls: everything passed, or a side disqualified at once
        low = pick(measure("low", 0), measure("short", 0, counted_as="low"), larger=False)
    else:
        low = measure("point", 0, counted_as="low")
    return point, low, measure("high", 0)


def debate(calls: list[Call]) -> list[Call]:
    return [call for call in calls if call.tag[1] != INTERVIEW_ROLE]


def interviews(calls: list[Call], asked: dict[int, int], rounds: int) -> list[list[Call]]:
    """The interview calls a run of ``rounds`` rounds makes, from a pass that asked at
    ``asked``'s values (``asked_rounds``): the pass's interview calls come in one block
    a round asked, in order, and each chosen round up to ``rounds`` costs its block."""
    blocks: list[list[Call]] = []
    for i, call in enumerate(calls):
        if call.tag[1] == INTERVIEW_ROLE:
            if i == 0 or calls[i - 1].tag[1] != INTERVIEW_ROLE:
                blocks.append([])
            blocks[-1].append(call)
    at = dict(zip(sorted(set(asked.values())), blocks, strict=False))  # a run ended early asks fewer
    return [at.get(asked[r], []) for r in asked if r <= rounds]


def sum_roles(parts: list[Roles]) -> Roles:
    out: Roles = {}
    for part in parts:
        out = combine(out, part)
    return out


def total(roles: Roles) -> Tally:
    out = Tally()
    for t in roles.values():
        out = out + t
    return out


def rounded(x: float) -> int:
    return int(math.floor(x + 0.5))

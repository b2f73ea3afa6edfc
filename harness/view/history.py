"""A run as the viewer shows it: rounds of published statements, each with
its seat's private history of that round, the round's public records and
events, and the persona timeline. Built from the records alone, for any
format: a record shows as its kind and its own fields, so a format with new
record kinds shows them without a line of viewer code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.store.reader import RunFolder
from harness.store.records import EventRecord, PersonaRecord, Published

# Envelope fields every record has, which say nothing about what happened.
_QUIET = {
    "schema_version",
    "seq",
    "prev_hash",
    "ts",
    "kind",
    "id",
    "round",
    "team",
    "role",
    "iteration",
    "usage",
}
SHARED = "shared_memory.jsonl"
EVENTS = "events.jsonl"


@dataclass
class Item:
    """One record, ready to show: a title and its telling fields."""

    kind: str
    title: str
    fields: list[tuple[str, str]]
    badge: str | None = None  # loop-lock, truncated, unsupported citation, fallback...


@dataclass
class Turn:
    seat: str
    alias: str
    text: str
    badges: list[str]
    history: list[Item]


@dataclass
class Round:
    number: int
    turns: list[Turn] = field(default_factory=list)
    public: list[Item] = field(default_factory=list)  # fact-checks, summaries, verdicts...
    events: list[Item] = field(default_factory=list)


def show(value: Any) -> str:
    if isinstance(value, list):
        return "; ".join(show(v) for v in value) or "(none)"
    if isinstance(value, dict):
        return (
            ", ".join(f"{k}: {show(v)}" for k, v in value.items() if v not in (None, "", [], {})) or "(none)"
        )
    return str(value)


def item(record: Any) -> Item:
    data = record.model_dump(mode="json")
    fields = [(k, show(v)) for k, v in data.items() if k not in _QUIET and v not in (None, "", [], {})]
    kind = str(data.get("kind", "record"))
    if isinstance(record, EventRecord):
        kind = f"event: {record.event}"
    title = f"{kind} · {data.get('role', '')} · attempt {data.get('iteration', 0) + 1}"
    return Item(kind, title, fields, badge_of(record))


def badge_of(record: Any) -> str | None:
    if isinstance(record, EventRecord):
        return (
            record.event.replace("_", "-")
            if record.event in ("loop_lock", "schema_failure", "error", "retry", "turn_skipped")
            else None
        )
    if getattr(record, "source", None) == "loop_lock":
        return "loop-lock"
    if getattr(record, "truncated", False):
        return "truncated"
    if getattr(record, "fallback", False):
        return "fallback"
    if any(
        getattr(c, "status", None) in ("unsupported", "unknown") for c in getattr(record, "citations", [])
    ):
        return "bad citation"
    return None


def round_numbers(run: RunFolder) -> list[int]:
    """Every round that holds a record, in order (round 0: set-up)."""
    numbers = {r.round for name, records in run.files.items() for r in records}
    return sorted(numbers)


def build_rounds(run: RunFolder, wanted: set[int]) -> list[Round]:
    """The rounds in ``wanted``, each with its turns, their histories, public records and events."""
    rounds = {n: Round(n) for n in sorted(wanted)}
    aliases = {s.name: s.alias for s in run.layout.seats}
    private: dict[tuple[int, str | None], list[Any]] = {}
    for seat in run.layout.seats:
        for log in seat.logs:
            for r in run.of(f"{seat.name}/{log}.jsonl"):
                if r.round in rounds:
                    private.setdefault((r.round, seat.name), []).append(r)
    events: dict[tuple[int, str | None], list[Any]] = {}
    for e in run.of(EVENTS):
        if e.round in rounds:
            events.setdefault((e.round, e.team), []).append(e)
            rounds[e.round].events.append(item(e))
    for r in run.of(SHARED):
        if isinstance(r, Published) and r.round in rounds:
            own = sorted(
                private.get((r.round, r.team), []) + events.get((r.round, r.team), []), key=lambda x: x.ts
            )
            badges = [b for b in {badge_of(r), *(badge_of(x) for x in own)} if b]
            alias = r.alias or aliases.get(r.team or "", r.team or r.role)
            rounds[r.round].turns.append(
                Turn(r.team or r.role, alias, r.text, sorted(badges), [item(x) for x in own])
            )
    for name in (f"public/{log}.jsonl" for log in run.layout.public_logs if log != "prompts"):
        for r in run.of(name):
            if r.round in rounds:
                rounds[r.round].public.append(item(r))
    return list(rounds.values())


def unpublished(run: RunFolder, wanted: set[int]) -> dict[tuple[int, str], list[Item]]:
    """Private histories of turns that published nothing (a skipped turn, a crash mid-turn)."""
    spoke = {(r.round, r.team) for r in run.of(SHARED)}
    out: dict[tuple[int, str], list[Item]] = {}
    for seat in run.layout.seats:
        for log in seat.logs:
            for r in run.of(f"{seat.name}/{log}.jsonl"):
                if r.round in wanted and (r.round, seat.name) not in spoke:
                    out.setdefault((r.round, seat.name), []).append(item(r))
    return out


def persona_timeline(run: RunFolder) -> dict[str, list[tuple[int, int, str, str]]]:
    """Per seat: (round, version, decision, persona) each time the persona is set or changes."""
    timeline: dict[str, list[tuple[int, int, str, str]]] = {}
    for seat in run.layout.seats:
        if "persona" not in seat.logs:
            continue
        last = None
        for p in run.of(f"{seat.name}/persona.jsonl"):
            if isinstance(p, PersonaRecord) and p.version != last:
                timeline.setdefault(seat.name, []).append((p.round, p.version, p.decision, p.persona))
                last = p.version
    return timeline

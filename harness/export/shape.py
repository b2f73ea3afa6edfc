"""The shape of a run's report: plain dataclasses that ``build``
fills from a run folder and ``render`` writes out. ``--as json`` is
``asdict(report)``, so a change here changes the json: bump
``EXPORT_VERSION`` with it."""

from __future__ import annotations

from dataclasses import dataclass, field

EXPORT_VERSION = 3  # goes up when the json structure changes (2: a round's notes; 3: a fork's origin)


@dataclass
class RoleCard:
    name: str
    expertise: str
    mandate: str
    disruptor: bool


@dataclass
class SeatEntry:
    name: str
    alias: str
    role: str
    model: str
    stance: str
    card: RoleCard | None


@dataclass
class ForkOrigin:
    """Where a fork's rounds 1..at_round came from (its manifest's lineage)."""

    parent: str  # the parent's folder
    parent_run_id: str
    at_round: int
    changed: dict[str, object]  # each config key the fork changed, with its new value


@dataclass
class Header:
    run_id: str
    format: str
    topic: str | None
    framework: str | None
    date: str  # ISO 8601, when the run started
    status: str
    close_reason: str
    rounds_completed: int
    seats: list[SeatEntry]
    roles: dict[str, str]  # model role with no seat -> its model
    incomplete: str | None  # why the report may not hold the whole run
    notes: list[str]  # lines the reader could not read
    fork: ForkOrigin | None = None  # a fork: its rounds 1..at_round are its parent's


@dataclass
class Statement:
    seat: str
    alias: str
    phase: str
    text: str


@dataclass
class Decision:
    decision: str
    reason: str
    tension: str


@dataclass
class Note:
    """A labelled paragraph a public record adds to its round."""

    label: str
    text: str


@dataclass
class RoundEntry:
    number: int
    before: list[Note] = field(default_factory=list)  # shown before the statements (the round's motion)
    statements: list[Statement] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # aliases of seats with no statement
    summary: str | None = None
    decision: Decision | None = None
    after: list[Note] = field(default_factory=list)  # shown after them (an evaluation)
    events: dict[str, int] = field(default_factory=dict)


@dataclass
class Synthesis:
    text: str
    close_reason: str


@dataclass
class Report:
    header: Header
    rounds: list[RoundEntry]
    synthesis: Synthesis | None
    export_version: int = EXPORT_VERSION

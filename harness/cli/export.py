"""A run, as a report a person (md, txt) or a script (json) reads.

``build_report`` turns a ``RunFolder`` into a plain ``Report``: a header
(topic, framework, run id, date, status, why it closed, the model of each
seat and of each role with no seat, each seat's role card if it has one),
the rounds (each seat's statement under its alias, the round's summary, the
judge's decision, the loop-locks and schema failures of its events) and the
synthesis. It works from the run's layout and record kinds, never from a
format's name, so a new format exports without a template of its own.
``RENDERERS`` maps each ``--as`` choice to the function that writes it.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from harness.store.reader import RunFolder, read_run
from harness.store.records import (
    DecisionRecord,
    EventRecord,
    Published,
    Record,
    RoleCardRecord,
    SummaryRecord,
    SynthesisRecord,
)

EXPORT_VERSION = 1  # goes up when the json structure changes
SHARED = "shared_memory.jsonl"
EVENTS = "events.jsonl"
# Events worth a line under their round: what went wrong while it was argued.
ROUND_EVENTS = ("loop_lock", "schema_failure", "retry", "error")
WIDTH = 78


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
class RoundEntry:
    number: int
    statements: list[Statement] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # aliases of seats with no statement
    summary: str | None = None
    decision: Decision | None = None
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


# ---------------------------------------------------------------- building


def public_records(run: RunFolder) -> Iterator[Record]:
    """Every record of the logs no seat owns, the shared transcript aside."""
    for name, records in run.files.items():
        if name != SHARED and run.layout.owner(name) is None:
            yield from records


def close_reason(run: RunFolder, synthesis: Synthesis | None) -> str:
    """Why the run ended: the synthesis says it best, then the manifest."""
    manifest = run.manifest
    if synthesis is not None:
        return synthesis.close_reason
    if manifest.stop_reason:
        return manifest.stop_reason
    done = manifest.counts.rounds_completed
    if manifest.status == "completed":
        return f"completed {done} round{'s' if done != 1 else ''}"
    if manifest.error is not None:
        return f"{manifest.status}: {manifest.error.type}: {manifest.error.message}"
    return f"{manifest.status} after round {done}"


def incomplete_line(run: RunFolder) -> str | None:
    reasons = []
    if run.manifest.status != "completed":
        reasons.append(f"the run is {run.manifest.status}")
    if run.notes:
        reasons.append(f"{len(run.notes)} log(s) end in a line that could not be read")
    return f"incomplete: {'; '.join(reasons)}; this report holds what was written" if reasons else None


def build_header(run: RunFolder, synthesis: Synthesis | None) -> Header:
    manifest, specs = run.manifest, run.manifest.model_specs
    cards = {r.team: r for r in public_records(run) if isinstance(r, RoleCardRecord) and r.team}
    seats = []
    for seat in run.layout.seats:
        card = cards.get(seat.name)
        seats.append(
            SeatEntry(
                name=seat.name,
                alias=seat.alias,
                role=seat.role,
                model=specs.get(seat.role, "unknown"),
                stance=seat.stance,
                card=RoleCard(card.name, card.expertise, card.mandate, card.disruptor) if card else None,
            )
        )
    seat_roles = {seat.role for seat in run.layout.seats}
    topic_cfg = run.config.get("topic") or {}
    return Header(
        run_id=manifest.run_id,
        format=manifest.format,
        topic=manifest.topic,
        framework=topic_cfg.get("framework") if isinstance(topic_cfg, dict) else None,
        date=manifest.started_at.isoformat(),
        status=manifest.status,
        close_reason=close_reason(run, synthesis),
        rounds_completed=manifest.counts.rounds_completed,
        seats=seats,
        roles={role: spec for role, spec in specs.items() if role not in seat_roles},
        incomplete=incomplete_line(run),
        notes=list(run.notes),
    )


def build_rounds(run: RunFolder) -> list[RoundEntry]:
    """Every round that has something to show, and every completed one."""
    done = run.manifest.counts.rounds_completed
    rounds = {n: RoundEntry(n) for n in range(1, done + 1)}

    def at(n: int) -> RoundEntry:
        return rounds.setdefault(n, RoundEntry(n))

    aliases = {seat.name: seat.alias for seat in run.layout.seats}
    for rec in run.of(SHARED):
        if isinstance(rec, Published):
            alias = rec.alias or aliases.get(rec.team or "", rec.team or rec.role)
            at(rec.round).statements.append(Statement(rec.team or rec.role, alias, rec.phase, rec.text))
    for rec in public_records(run):
        if isinstance(rec, SummaryRecord):
            at(rec.round).summary = rec.text
        elif isinstance(rec, DecisionRecord):
            at(rec.round).decision = Decision(rec.decision, rec.reason, rec.tension)
    counted = Counter((e.round, e.event) for e in run.of(EVENTS) if isinstance(e, EventRecord))
    for (n, event), count in sorted(counted.items()):
        if event in ROUND_EVENTS and n >= 1:
            at(n).events[event] = count
    for entry in rounds.values():
        spoke = {s.seat for s in entry.statements}
        entry.missing = [seat.alias for seat in run.layout.seats if seat.name not in spoke]
    return [rounds[n] for n in sorted(rounds)]


def build_report(run: RunFolder) -> Report:
    closing = [r for r in public_records(run) if isinstance(r, SynthesisRecord)]
    synthesis = Synthesis(closing[-1].text, closing[-1].close_reason) if closing else None
    return Report(build_header(run, synthesis), build_rounds(run), synthesis)


# ---------------------------------------------------------------- rendering


def pretty_date(iso: str) -> str:
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S UTC")


def rounds_done(h: Header) -> str:
    return f"{h.rounds_completed} round{'s' if h.rounds_completed != 1 else ''}"


def event_line(events: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind.replace('_', '-')}{'s' if n != 1 else ''}" for kind, n in events.items())


def phase_label(entry: RoundEntry) -> str:
    """The round's phases, unless it is the one every round has ("round")."""
    phases = list(dict.fromkeys(s.phase for s in entry.statements))
    return "" if phases in ([], ["round"]) else f" ({', '.join(phases)})"


def render_md(report: Report) -> str:
    h = report.header
    out = [f"# {h.topic or 'Run ' + h.run_id}", ""]
    if h.incomplete:
        out += [f"> **{h.incomplete}**", ""]
    out += [
        f"- **Run:** `{h.run_id}` ({h.format} format)",
        f"- **Date:** {pretty_date(h.date)}",
        f"- **Status:** {h.status} after {rounds_done(h)}",
        f"- **Closed:** {h.close_reason}",
    ]
    if h.framework:
        out.append(f"- **Framework:** {h.framework}")
    out += ["", "## Seats", ""]
    for seat in h.seats:
        line = f"- **{seat.alias}** (`{seat.name}`, model `{seat.model}`)"
        out.append(line if seat.card else f"{line}: {seat.stance}")
        if seat.card:
            tag = " (disruptor)" if seat.card.disruptor else ""
            out += [
                f"  - *Role:* {seat.card.name}{tag}",
                f"  - *Expertise:* {seat.card.expertise}",
                f"  - *Mandate:* {seat.card.mandate}",
            ]
    if h.roles:
        out += ["", "Roles with no seat: " + ", ".join(f"{r} `{m}`" for r, m in h.roles.items())]
    for entry in report.rounds:
        out += ["", f"## Round {entry.number}{phase_label(entry)}"]
        for s in entry.statements:
            out += ["", f"### {s.alias}", "", s.text]
        for alias in entry.missing:
            out += ["", f"*{alias}: no statement this round.*"]
        if entry.summary:
            out += ["", "**Summary.** " + entry.summary]
        if entry.decision:
            d = entry.decision
            out += ["", f"**Judge: {d.decision}.** {d.reason}", "", f"*Tension:* {d.tension}"]
        if entry.events:
            out += ["", f"*Events: {event_line(entry.events)}.*"]
    if report.synthesis:
        out += ["", f"## Synthesis (closed: {report.synthesis.close_reason})", "", report.synthesis.text]
    if h.notes:
        out += ["", "## Reader notes", ""] + [f"- {note}" for note in h.notes]
    return "\n".join(out) + "\n"


def wrap(text: str, indent: str = "") -> list[str]:
    """Wrap each line of ``text`` on its own, so its paragraphs and lists stay."""
    lines = []
    for line in text.splitlines() or [""]:
        filled = textwrap.fill(line.strip(), WIDTH, initial_indent=indent, subsequent_indent=indent)
        lines.append(filled.rstrip() if line.strip() else "")
    return lines


def render_txt(report: Report) -> str:
    h = report.header
    out = wrap(f"TOPIC: {h.topic or '(none)'}")
    if h.incomplete:
        out += ["", *wrap(h.incomplete.upper())]
    out += [
        "",
        f"Run:       {h.run_id} ({h.format} format)",
        f"Date:      {pretty_date(h.date)}",
        f"Status:    {h.status} after {rounds_done(h)}",
        *wrap(f"Closed:    {h.close_reason}"),
    ]
    if h.framework:
        out += wrap(f"Framework: {h.framework}")
    out += ["", "SEATS"]
    for seat in h.seats:
        line = f"{seat.alias} ({seat.name}, model {seat.model})"
        out += ["", *wrap(line if seat.card else f"{line}: {seat.stance}", "  ")]
        if seat.card:
            tag = " (disruptor)" if seat.card.disruptor else ""
            out += wrap(f"Role: {seat.card.name}{tag}", "    ")
            out += wrap(f"Expertise: {seat.card.expertise}", "    ")
            out += wrap(f"Mandate: {seat.card.mandate}", "    ")
    if h.roles:
        out += ["", *wrap("Roles with no seat: " + ", ".join(f"{r} {m}" for r, m in h.roles.items()))]
    for entry in report.rounds:
        out += ["", "", f"ROUND {entry.number}{phase_label(entry)}"]
        for s in entry.statements:
            out += ["", f"{s.alias}:", *wrap(s.text, "    ")]
        for alias in entry.missing:
            out += ["", f"{alias}: no statement this round."]
        if entry.summary:
            out += ["", "Summary:", *wrap(entry.summary, "    ")]
        if entry.decision:
            d = entry.decision
            out += [
                "",
                f"Judge: {d.decision}",
                *wrap(d.reason, "    "),
                *wrap(f"Tension: {d.tension}", "    "),
            ]
        if entry.events:
            out += ["", f"Events: {event_line(entry.events)}."]
    if report.synthesis:
        out += ["", "", f"SYNTHESIS (closed: {report.synthesis.close_reason})", ""]
        out += wrap(report.synthesis.text)
    if h.notes:
        out += ["", "READER NOTES"] + [line for note in h.notes for line in wrap(note, "  ")]
    return "\n".join(out) + "\n"


def render_json(report: Report) -> str:
    doc = {"export_version": report.export_version, **asdict(report)}  # the version first, for a reader
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


# --as choice -> renderer; a new choice is one more entry
RENDERERS: dict[str, Callable[[Report], str]] = {
    "md": render_md,
    "txt": render_txt,
    "json": render_json,
}


def export_run(run_dir: Path, style: str = "md") -> str:
    """The report of the run in ``run_dir``, rendered as ``style``."""
    return RENDERERS[style](build_report(read_run(run_dir, skip=("prompts.jsonl",))))

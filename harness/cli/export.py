"""A run, as a report a person (md, txt) or a script (json) reads.

``build_report`` turns a ``RunFolder`` into a plain ``Report``: a header
(topic, framework, run id, date, status, why it closed, the model of each
seat and of each role with no seat, each seat's role card if it has one),
the rounds (each seat's statement under its alias, the round's summary, the
judge's decision, the loop-locks and schema failures of its events) and the
synthesis. It works from the run's layout and record kinds, never from a
format's name, so a new format exports without a template of its own: a
public record shows in its round through ``ROUND_HOOKS`` (one entry per
record kind), as a note before the statements (a new motion) or after them
(an evaluation). ``RENDERERS`` maps each report ``--as`` choice to the
function that writes it.

The transcript views (``VIEWS``) are for scripts and other tools. A run's
*messages* are, in order: the opening message (name ``Topic``, the run's
motion), then every statement of the shared transcript and every public
record that ``MESSAGE_HOOKS`` turns into a message (a judge-refined debate's
evaluations), ordered by round, then by when they were written. A message's
name is its seat's alias (``Pro``), or for a role with no seat its role name
capitalised (``Judge``).

- ``str``: the messages as ``Name: content``, one blank line between them;
- ``str-all-except-first``: ``str`` without its first message, the opening
  one: only what the debaters and the judge said;
- ``list``: a JSON array of ``{"role": name, "content": content}``;
- ``dict``: one JSON object: ``run_id``, ``format``, ``topic``, ``final`` and
  ``messages`` (each with ``name``, ``content``, ``round``, ``seat``,
  ``kind``, ``phase``);
- ``final``: the last synthesis only (the last evaluation's synthesis, a
  panel's synthesis); a run with none raises ``NoFinal``.

``export_sweep`` prints every cell's final synthesis of a sweep folder, in
input order (``topic.index``, then cell name), each after a line naming its topic.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.store.reader import RunFolder, find_runs, read_config, read_run
from harness.store.records import (
    CitedTurnRecord,
    DecisionRecord,
    EvaluationRecord,
    EventRecord,
    FactCheckRecord,
    MotionRecord,
    NoteRecord,
    Published,
    Record,
    RoleCardRecord,
    SummaryRecord,
    SynthesisRecord,
    VerdictRecord,
)

EXPORT_VERSION = 2  # goes up when the json structure changes (2: a round's notes)
SHARED = "shared_memory.jsonl"
EVENTS = "events.jsonl"
# Events worth a line under their round: what went wrong while it was argued.
ROUND_EVENTS = (
    "loop_lock",
    "schema_failure",
    "retry",
    "error",
    "speech_cap",
    "turn_skipped",
    "search_restart",
)
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


def _summary(rec: SummaryRecord, entry: RoundEntry) -> None:
    entry.summary = rec.text


def _decision(rec: DecisionRecord, entry: RoundEntry) -> None:
    entry.decision = Decision(rec.decision, rec.reason, rec.tension)


def _motion(rec: MotionRecord, entry: RoundEntry) -> None:
    entry.before.append(Note(f"Motion (the judge's synthesis of round {rec.round - 1})", rec.motion))


def _evaluation(rec: EvaluationRecord, entry: RoundEntry) -> None:
    failed = " (fallback: the judge's reply failed validation)" if rec.fallback else ""
    entry.after.append(Note(f"Judge's {'final ' if rec.final else ''}evaluation{failed}", rec.evaluation))
    became = "final" if rec.final else f"the motion of round {rec.round + 1}"
    entry.after.append(Note(f"Synthesis ({became})", rec.synthesis))


def _fact_check(rec: FactCheckRecord, entry: RoundEntry) -> None:
    strike = f"; strike {rec.strike}" if rec.verdict == "fail" else ""
    unchecked = " (fallback: the checker's reply failed validation)" if rec.fallback else ""
    claims = "; ".join(rec.claims)
    text = f"{rec.justification}" + (f" Claims checked: {claims}." if claims else "")
    label = (
        f"Fact-check of {rec.team}'s {rec.stage}, attempt {rec.iteration + 1}: {rec.verdict.upper()}{strike}"
    )
    entry.after.append(Note(label + unchecked, text))


def _verdict(rec: VerdictRecord, entry: RoundEntry) -> None:
    who = f"{rec.winner} wins" if rec.winner else "no winner"
    if rec.disqualified:
        who += f" ({rec.disqualified} disqualified)"
    scores = "; ".join(
        f"{seat}: " + ", ".join(f"{c} {v}" for c, v in per.items()) for seat, per in rec.scores.items()
    )
    text = rec.justification + (f" Scores: {scores}." if scores else "")
    entry.after.append(Note(f"Verdict ({rec.by}): {who}", text))


def _note(rec: NoteRecord, entry: RoundEntry) -> None:
    entry.after.append(Note(f"A participant's note for the synthesiser ({rec.team})", rec.text))


def citation_note(rec: CitedTurnRecord, alias: str) -> Note:
    """A grounded turn's citations as the checker marked them, and whether the turn was cut."""
    marks = "; ".join(f'[{c.id}] "{c.quote}": {c.status or "unchecked"}' for c in rec.citations)
    cut = (
        " The turn was cut at the length limit; its full text is in the seat's drafts."
        if rec.truncated
        else ""
    )
    searched = f"{len(rec.searches)} search(es), {rec.hits} passage(s) found."
    return Note(f"Citations of {alias}", f"{marks or 'none'}. {searched}{cut}")


# record kind -> how a public record shows in its round; a new kind is one more entry
ROUND_HOOKS: dict[str, Callable[[Any, RoundEntry], None]] = {
    "summary": _summary,
    "decision": _decision,
    "motion": _motion,
    "evaluation": _evaluation,
    "fact_check": _fact_check,
    "verdict": _verdict,
    "note": _note,
}


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
        if isinstance(rec, CitedTurnRecord):
            at(rec.round).after.append(citation_note(rec, alias))
    for rec in public_records(run):
        if (hook := ROUND_HOOKS.get(str(getattr(rec, "kind", "")))) is not None:
            hook(rec, at(rec.round))
    counted = Counter((e.round, e.event) for e in run.of(EVENTS) if isinstance(e, EventRecord))
    for (n, event), count in sorted(counted.items()):
        if event in ROUND_EVENTS and n >= 1:
            at(n).events[event] = count
    # a format whose rounds each have one speaker (moderated: one speech a round) misses no one
    turn_taking = max((len(entry.statements) for entry in rounds.values()), default=0) <= 1
    for entry in rounds.values():
        if turn_taking:
            continue
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
        out += [line for note in entry.before for line in ("", f"**{note.label}.** {note.text}")]
        for s in entry.statements:
            out += ["", f"### {s.alias}", "", s.text]
        for alias in entry.missing:
            out += ["", f"*{alias}: no statement this round.*"]
        if entry.summary:
            out += ["", "**Summary.** " + entry.summary]
        if entry.decision:
            d = entry.decision
            out += ["", f"**Judge: {d.decision}.** {d.reason}", "", f"*Tension:* {d.tension}"]
        out += [line for note in entry.after for line in ("", f"**{note.label}.** {note.text}")]
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
        out += [line for note in entry.before for line in ("", f"{note.label}:", *wrap(note.text, "    "))]
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
        out += [line for note in entry.after for line in ("", f"{note.label}:", *wrap(note.text, "    "))]
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


# ---------------------------------------------------------------- transcript views


class NoFinal(ValueError):
    """The run has no synthesis for ``--as final`` to print."""


@dataclass
class Message:
    name: str  # the seat's alias, a seatless role's name capitalised, or "Topic"
    content: str
    round: int
    seat: str | None
    kind: str
    phase: str | None = None


def _evaluation_message(rec: EvaluationRecord) -> str:
    return f"{rec.evaluation}\nSynthesis{' (final)' if rec.final else ''}: {rec.synthesis}"


# record kind -> a public record's message text; kinds not named here are no message
MESSAGE_HOOKS: dict[str, Callable[[Any], str]] = {
    "evaluation": _evaluation_message,
    "verdict": lambda rec: f"{rec.winner or 'no winner'} wins: {rec.justification}",
}
# record kind -> the synthesis a public record holds, for --as final
FINAL_HOOKS: dict[str, Callable[[Any], str]] = {
    "evaluation": lambda rec: rec.synthesis,
    "synthesis": lambda rec: rec.text,
}


def messages(run: RunFolder) -> list[Message]:
    """The run's messages, the opening one first (see the module docstring)."""
    aliases = {seat.name: seat.alias for seat in run.layout.seats}
    said: list[tuple[int, datetime, Message]] = []
    for rec in run.of(SHARED):
        if isinstance(rec, Published):
            name = rec.alias or aliases.get(rec.team or "", rec.team or rec.role)
            kind = str(getattr(rec, "kind", "statement"))
            said.append((rec.round, rec.ts, Message(name, rec.text, rec.round, rec.team, kind, rec.phase)))
    for rec in public_records(run):
        kind = str(getattr(rec, "kind", ""))
        if (hook := MESSAGE_HOOKS.get(kind)) is not None:
            name = aliases.get(rec.team or "", rec.role.capitalize())
            said.append((rec.round, rec.ts, Message(name, hook(rec), rec.round, rec.team, kind)))
    opening = Message("Topic", run.manifest.topic or "(no topic recorded)", 0, None, "topic")
    return [opening, *(m for _, _, m in sorted(said, key=lambda item: item[:2]))]


def final_synthesis(run: RunFolder) -> str | None:
    """The last synthesis the run wrote, or None."""
    found = [r for r in public_records(run) if str(getattr(r, "kind", "")) in FINAL_HOOKS]
    if not found:
        return None
    last = max(found, key=lambda r: (r.round, r.ts))
    return FINAL_HOOKS[str(getattr(last, "kind", ""))](last)


def view_str(run: RunFolder, skip: int = 0) -> str:
    return "\n\n".join(f"{m.name}: {m.content}" for m in messages(run)[skip:]) + "\n"


def view_list(run: RunFolder) -> str:
    listed = [{"role": m.name, "content": m.content} for m in messages(run)]
    return json.dumps(listed, indent=2, ensure_ascii=False) + "\n"


def view_dict(run: RunFolder) -> str:
    doc = {
        "run_id": run.manifest.run_id,
        "format": run.manifest.format,
        "topic": run.manifest.topic,
        "final": final_synthesis(run),
        "messages": [asdict(m) for m in messages(run)],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def view_final(run: RunFolder) -> str:
    text = final_synthesis(run)
    if text is None:
        raise NoFinal(f"a {run.manifest.format} run has no synthesis to print (--as final)")
    return text + "\n"


# --as choice -> transcript view of a run
VIEWS: dict[str, Callable[[RunFolder], str]] = {
    "str": view_str,
    "str-all-except-first": lambda run: view_str(run, skip=1),
    "dict": view_dict,
    "list": view_list,
    "final": view_final,
}
STYLES = [*RENDERERS, *VIEWS]


def export_run(run_dir: Path, style: str = "md") -> str:
    """The report or transcript view of the run in ``run_dir``, rendered as ``style``."""
    run = read_run(run_dir, skip=("prompts.jsonl",))
    return RENDERERS[style](build_report(run)) if style in RENDERERS else VIEWS[style](run)


def sweep_cells(sweep_dir: Path) -> list[Path]:
    """A sweep's run folders in input order: by ``topic.index``, then by name."""

    def order(run_dir: Path) -> tuple[int, str]:
        topic = read_config(run_dir).get("topic") or {}
        index = topic.get("index", 0) if isinstance(topic, dict) else 0
        return (index if isinstance(index, int) else 0, run_dir.name)

    return sorted(find_runs(sweep_dir), key=order)


def export_sweep(sweep_dir: Path) -> tuple[str, list[str]]:
    """Every cell's final synthesis, each after a ``Topic: ...`` line; and the
    cells that have none (each still gets its topic line, and a note)."""
    out, missing = [], []
    for run_dir in sweep_cells(sweep_dir):
        run = read_run(run_dir, skip=("prompts.jsonl",))
        text = final_synthesis(run)
        if text is None:
            missing.append(run_dir.name)
            text = f"(no final synthesis: the run is {run.manifest.status})"
        out.append(f"Topic: {run.manifest.topic or '(none)'} [{run_dir.name}]\n{text}")
    return "\n\n".join(out) + "\n" if out else "", missing

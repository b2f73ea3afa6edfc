"""A ``Report`` as text: ``RENDERERS`` maps each report ``--as`` choice
(``md``, ``txt``, ``json``) to the function that writes it."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime

from harness.export.shape import ForkOrigin, Header, Report, RoundEntry

WIDTH = 78


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


def fork_line(fork: ForkOrigin) -> str:
    """A fork's origin, as the viewer says it: the parent, the round, what changed."""
    changed = ", ".join(f"{key}={value}" for key, value in fork.changed.items()) or "nothing"
    k = fork.at_round
    copied = "round 1 is" if k == 1 else f"rounds 1-{k} are"
    return f"of {fork.parent_run_id} ({fork.parent}) at round {k}: {copied} its parent's, not paid again; changed: {changed}"


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
    if h.fork:
        out.append(f"- **Fork:** {fork_line(h.fork)}")
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
    if h.fork:
        out += wrap(f"Fork:      {fork_line(h.fork)}")
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

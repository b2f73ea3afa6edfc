"""A run folder, as a ``Report`` (``harness.export.shape``).

``build_report`` turns a ``RunFolder`` into a plain ``Report``: a header
(topic, framework, run id, date, status, why it closed, the model of each
seat and of each role with no seat, each seat's role card if it has one),
the rounds (each seat's statement under its alias, the round's summary, the
judge's decision, the loop-locks and schema failures of its events) and the
synthesis. It works from the run's layout and record kinds, never from a
format's name, so a new format exports without a template of its own: a
public record shows in its round through ``ROUND_HOOKS`` (one entry per
record kind), as a note before the statements (a new motion) or after them
(an evaluation).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from harness.export.shape import (
    Decision,
    ForkOrigin,
    Header,
    Note,
    Report,
    RoleCard,
    RoundEntry,
    SeatEntry,
    Statement,
    Synthesis,
)
from harness.store.reader import RunFolder
from harness.store.records import (
    CitedTurnRecord,
    DecisionRecord,
    EvaluationRecord,
    EventRecord,
    FactCheckRecord,
    Lineage,
    MotionRecord,
    NoteRecord,
    Published,
    Record,
    RoleCardRecord,
    Ruling,
    SummaryRecord,
    SynthesisRecord,
    VerdictRecord,
)
from harness.store.snapshot import counts_now

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
    done = rounds_done(run)
    if manifest.status == "completed":
        return f"completed {done} round{'s' if done != 1 else ''}"
    if manifest.error is not None:
        return f"{manifest.status}: {manifest.error.type}: {manifest.error.message}"
    return f"{manifest.status} after round {done}"


def rounds_done(run: RunFolder) -> int:
    """Rounds the run completed: a run killed with kill -9 keeps the manifest it started
    with (0 rounds), so its newest round snapshot's (``counts_now``)."""
    return counts_now(run.path, run.manifest).rounds_completed


def incomplete_line(run: RunFolder, holder: str = "this report") -> str | None:
    reasons = []
    if run.manifest.status == "running":  # what a kill -9 leaves too: the manifest as the run started
        reasons.append("the run is running, or was killed")
    elif run.manifest.status != "completed":
        reasons.append(f"the run is {run.manifest.status}")
    if run.notes:
        reasons.append(f"{len(run.notes)} log(s) end in a line that could not be read")
    return f"incomplete: {'; '.join(reasons)}; {holder} holds what was written" if reasons else None


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
        rounds_completed=rounds_done(run),
        seats=seats,
        roles={role: spec for role, spec in specs.items() if role not in seat_roles},
        incomplete=incomplete_line(run),
        notes=list(run.notes),
        fork=fork_origin(manifest.lineage),
    )


def fork_origin(lineage: Lineage | None) -> ForkOrigin | None:
    if lineage is None:
        return None
    return ForkOrigin(lineage.parent, lineage.parent_run_id, lineage.at_round, dict(lineage.changed))


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
    if rec.grounded:  # a grounded check's fallback says why in its justification
        unchecked = " (fallback: no strike)" if rec.fallback else ""
    claims = "; ".join(rec.claims)
    text = f"{rec.justification}" + (f" Claims checked: {claims}." if claims and not rec.rulings else "")
    if rec.rulings:  # a grounded check: each claim's ruling, the passage it cites and the checker's mark
        text += ". Rulings: " + "; ".join(ruling_note(r) for r in rec.rulings) + "."
    label = (
        f"Fact-check of {rec.team}'s {rec.stage}, attempt {rec.iteration + 1}: {rec.verdict.upper()}{strike}"
    )
    entry.after.append(Note(label + unchecked, text))


def ruling_note(r: Ruling) -> str:
    c = r.citation
    cited = f'[{c.id}] "{c.quote}": {c.status or "unchecked"}' if c else "no passage cited"
    return f"{r.claim!r} {r.ruling.replace('_', ' ')}, {cited}"


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
    done = rounds_done(run)
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

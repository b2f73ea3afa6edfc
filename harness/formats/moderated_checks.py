"""verify: what a moderated debate's speeches promise. They follow the stage
plan and end at the verdict; each is the draft its fact-check passed, the
draft published at the speech cap, or a draft of an unchecked stage; and no
seat's prompt holds the other seat's unpublished draft. The fact-checks' own
promises are ``harness.formats.fact_checks``'. No prompt is made here, so the
fingerprint does not hash this module (``Format.prompt_modules``).
"""

from __future__ import annotations

from harness.formats.base import RunLogs
from harness.store.records import DraftRecord, FactCheckRecord, Published, SpeechRecord


def check_stage_order(run: RunLogs) -> list[str]:
    """Speeches follow the plan: Pro opens, Con and Pro alternate, Con closes;
    one speech per round at most, none after the debate ended."""
    problems = []
    speeches = [r for r in run.of("shared_memory.jsonl") if isinstance(r, SpeechRecord)]
    rounds = [r.round for r in speeches]
    if rounds != sorted(set(rounds)):
        problems.append(f"shared_memory.jsonl: speeches out of order or repeated: rounds {rounds}")
    for r in speeches:
        if r.round == 1:
            expected = {("pro", "opening")}
        else:
            expected = {("con", "rebuttal"), ("con", "closing")} if r.round % 2 == 0 else {("pro", "counter")}
        if (r.team, r.phase) not in expected:
            problems.append(f"shared_memory.jsonl: {r.id} is {r.team}'s {r.phase}, out of the stage plan")
        elif r.phase == "closing" and r is not speeches[-1]:
            problems.append(f"shared_memory.jsonl: {r.id} closes, but speeches follow it")
    ended = [v.round for v in run.of("public/verdicts.jsonl")]
    if len(ended) > 1:
        problems.append(f"public/verdicts.jsonl: {len(ended)} verdicts; a debate has one")
    if ended and rounds and max(rounds) > ended[-1]:
        problems.append(f"shared_memory.jsonl: a speech after the verdict of round {ended[-1]}")
    return problems


def check_speech_sources(run: RunLogs) -> list[str]:
    """A published speech is the draft its fact-check passed, or the draft
    published at the speech cap, or a draft of an unchecked stage."""
    checks = {c.id: c for c in run.of("public/factchecks.jsonl") if isinstance(c, FactCheckRecord)}
    capped = {(e.round, e.team) for e in run.of("events.jsonl") if getattr(e, "event", "") == "speech_cap"}
    problems = []
    for r in run.of("shared_memory.jsonl"):
        if not isinstance(r, SpeechRecord):
            continue
        check = checks.get(r.fact_check_id or "")
        if r.fact_check_id and (check is None or check.draft_id != r.draft_id):
            problems.append(f"shared_memory.jsonl: {r.id} cites a fact-check of another draft")
        elif r.source == "passed" and (check is None or check.verdict != "pass"):
            problems.append(f"shared_memory.jsonl: {r.id} is published as passed without a passing check")
        elif r.source == "cap" and (r.round, r.team) not in capped:
            problems.append(f"shared_memory.jsonl: {r.id} is published at the cap with no speech_cap event")
        elif r.source == "unchecked" and r.fact_check_id:
            problems.append(f"shared_memory.jsonl: {r.id} is marked unchecked but was checked")
    return problems


def check_drafts_stay_private(run: RunLogs) -> list[str]:
    """No seat's prompt holds the other seat's unpublished draft (the
    fact-checker reads every draft, so the general isolation check counts
    drafts as public; this one does not)."""
    published = {r.text for r in run.of("shared_memory.jsonl") if isinstance(r, Published)}
    problems = []
    for seat in run.layout.seats:
        hidden = {
            d.text
            for other in run.layout.seats
            if other.name != seat.name
            for d in run.of(f"{other.name}/drafts.jsonl")
            if isinstance(d, DraftRecord) and d.text not in published and len(d.text) >= 24
        }
        for prompt in run.of(f"{seat.name}/prompts.jsonl"):
            content = "\n".join(m["content"] for m in getattr(prompt, "messages", []))
            for text in sorted(t for t in hidden if t in content):
                problems.append(
                    f"{seat.name}/prompts.jsonl: {prompt.id} holds an unpublished draft {text[:40]!r}"
                )
    return problems

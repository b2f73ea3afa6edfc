"""verify: what a grounded debate's records promise. FOR then AGAINST each
round and nothing after the final; each published turn is its seat's draft;
every citation is marked, and a mark agrees with the passage its turn's own
searches returned. No prompt is made here, so the fingerprint does not hash
this module (``Format.prompt_modules``).
"""

from __future__ import annotations

from harness.formats.base import RunLogs
from harness.search.citations import check_citations
from harness.store.records import CitedTurnRecord, DraftRecord, SearchRecord

# the grounded debate's seats, in the order they speak each round: the format's
# seats and the turn order verify holds a run to
SIDES = ("for", "against")


def check_turn_order(run: RunLogs) -> list[str]:
    """Each round holds at most FOR's turn then AGAINST's, in that order, and
    nothing follows the final synthesis or verdict."""
    problems = []
    turns = [r for r in run.of("shared_memory.jsonl") if isinstance(r, CitedTurnRecord)]
    order = [(r.round, SIDES.index(r.team or "")) for r in turns if r.team in SIDES]
    if order != sorted(set(order)):
        problems.append(f"shared_memory.jsonl: turns out of order or repeated: {[r.id for r in turns]}")
    finals = run.of("public/synthesis.jsonl") + run.of("public/verdicts.jsonl")
    if len(finals) > 1:
        problems.append(f"public/: {len(finals)} final records; a grounded debate has one")
    if finals and turns and max(r.round for r in turns) >= finals[0].round:
        problems.append(f"shared_memory.jsonl: a turn at or after the final of round {finals[0].round}")
    return problems


def check_turn_sources(run: RunLogs) -> list[str]:
    """A published turn is its seat's draft: the same citations and marks, the
    same text unless cut (and then a prefix, marked ``truncated``), searches
    that its seat made."""
    problems = []
    for turn in run.of("shared_memory.jsonl"):
        if not isinstance(turn, CitedTurnRecord) or turn.team not in SIDES:
            continue
        drafts = {d.id: d for d in run.of(f"{turn.team}/drafts.jsonl") if isinstance(d, DraftRecord)}
        searches = {s.id for s in run.of(f"{turn.team}/searches.jsonl")}
        draft = drafts.get(turn.draft_id)
        if draft is None:
            problems.append(
                f"shared_memory.jsonl: {turn.id} cites draft {turn.draft_id}, not in {turn.team}/drafts"
            )
            continue
        if draft.citations != turn.citations:
            problems.append(f"shared_memory.jsonl: {turn.id} citations differ from its draft's")
        whole = turn.text == draft.text
        if turn.truncated == whole or (turn.truncated and not draft.text.startswith(turn.text.rstrip("…"))):
            problems.append(
                f"shared_memory.jsonl: {turn.id} truncated={turn.truncated} disagrees with its draft"
            )
        if missing := [s for s in turn.searches if s not in searches]:
            problems.append(f"shared_memory.jsonl: {turn.id} names searches {missing} its seat never made")
    return problems


def check_citation_marks(run: RunLogs) -> list[str]:
    """Every citation of a published turn was checked, and a quote marked
    supported appears in the passage when the turn's own searches returned it."""
    problems = []
    for turn in run.of("shared_memory.jsonl"):
        if not isinstance(turn, CitedTurnRecord):
            continue
        seen = {
            h.id: h.text
            for s in run.of(f"{turn.team}/searches.jsonl")
            if isinstance(s, SearchRecord) and s.id in turn.searches
            for h in s.hits
        }
        for c in turn.citations:
            if c.status is None:
                problems.append(f"shared_memory.jsonl: {turn.id} cites {c.id} unchecked")
            elif c.id in seen and c.status == "unknown":
                problems.append(
                    f"shared_memory.jsonl: {turn.id} marks {c.id} unknown, but its search returned it"
                )
            elif c.id in seen and (c.status == "supported") != (
                check_citations([c], seen.get)[0].status == "supported"
            ):
                problems.append(
                    f"shared_memory.jsonl: {turn.id} marks {c.id} {c.status}; the passage says otherwise"
                )
    return problems

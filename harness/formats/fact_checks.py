"""verify: what a moderated debate's fact-checks promise. Every check's
strike count; and for grounded checks (``format.fact_check=grounded``;
ungrounded ones have no rulings), their marks and strikes.

The grounded checks re-read the passages from the check's own searches in
``public/searches.jsonl``, as ``check_citation_marks`` does for grounded
turns: a mark or a strike that the passage does not bear out is a violation,
and so is a check listing among its ``passages`` one its searches never
returned (a ruling's made-up id, published as a passage the check cites).
"""

from __future__ import annotations

from harness.formats.base import RunLogs
from harness.search.citations import check_citation
from harness.store.records import FactCheckRecord, Ruling, SearchRecord, VerdictRecord

CHECKS = "public/factchecks.jsonl"
SEARCHES = "public/searches.jsonl"


def grounded_checks(run: RunLogs) -> list[FactCheckRecord]:
    return [c for c in run.of(CHECKS) if isinstance(c, FactCheckRecord) and c.grounded]


def passages_seen(run: RunLogs, check: FactCheckRecord) -> dict[str, str]:
    """Passage id -> text, of every passage the check's own searches returned."""
    searches = {s.id: s for s in run.of(SEARCHES) if isinstance(s, SearchRecord)}
    return {h.id: h.text for sid in check.searches if sid in searches for h in searches[sid].hits}


def holds(ruling: Ruling, seen: dict[str, str]) -> bool:
    """The ruling's quote is in a passage its check's searches returned (re-checked, not read off the mark)."""
    c = ruling.citation
    return c is not None and c.id in seen and check_citation(c, seen[c.id]).status == "supported"


def check_fact_check_marks(run: RunLogs) -> list[str]:
    """A grounded check's searches are in ``public/searches``, each ruling
    names one of them, every citation is marked, a mark of a passage the
    check's own search returned agrees with that passage, and the passages
    the check lists are ones its searches returned."""
    problems = []
    made = {s.id for s in run.of(SEARCHES)}
    for check in grounded_checks(run):
        if missing := [sid for sid in check.searches if sid not in made]:
            problems.append(f"{CHECKS}: {check.id} names searches {missing} not in {SEARCHES}")
        seen = passages_seen(run, check)
        for r in check.rulings:
            c = r.citation
            if r.search_id not in check.searches:
                problems.append(f"{CHECKS}: {check.id} rules on {r.claim[:40]!r} with another check's search")
            if c is None:
                continue
            if c.status is None:
                problems.append(f"{CHECKS}: {check.id} cites {c.id} unchecked")
            elif c.id in seen and c.status == "unknown":
                problems.append(f"{CHECKS}: {check.id} marks {c.id} unknown, but its search returned it")
            elif c.id in seen and (c.status == "supported") != holds(r, seen):
                problems.append(f"{CHECKS}: {check.id} marks {c.id} {c.status}; the passage says otherwise")
        if stray := [pid for pid in check.passages if pid not in seen]:
            problems.append(f"{CHECKS}: {check.id} lists passages {stray} its searches never returned")
    return problems


def check_grounded_strikes(run: RunLogs) -> list[str]:
    """A grounded check fails (a strike) exactly when a claim is ruled
    contradicted by a passage its own search returned, quoted truly. A claim
    not found never strikes, nor does a contradiction whose citation fails:
    that check passes as a fallback. A claim counts as supported only when its
    citation holds too: a check that passes on a ruling whose citation fails
    is a fallback, and a check's evidence is the passages of the rulings its
    verdict rests on (held contradictions for a strike, held supports for a pass)."""
    problems = []
    for check in grounded_checks(run):
        seen = passages_seen(run, check)
        backed = [r for r in check.rulings if r.ruling == "contradicted" and holds(r, seen)]
        failing = [r for r in check.rulings if r.ruling != "not_found" and not holds(r, seen)]
        if check.verdict == "fail" and not backed:
            problems.append(
                f"{CHECKS}: {check.id} is a strike without a contradicting passage its search returned"
            )
        elif check.verdict == "pass" and backed:
            problems.append(f"{CHECKS}: {check.id} passes a claim its passage contradicts")
        elif check.verdict == "fail" and check.fallback:
            problems.append(f"{CHECKS}: {check.id} is a fallback and a strike; a fallback never strikes")
        elif check.verdict == "pass" and failing and not check.fallback:
            problems.append(
                f"{CHECKS}: {check.id} passes on a ruling whose citation fails, not as a fallback"
            )
        ruled = "contradicted" if check.verdict == "fail" else "supported"
        rests = {r.citation.id for r in check.rulings if r.citation and r.ruling == ruled and holds(r, seen)}
        if stray := [e[:40] for e in check.evidence if not any(e.startswith(f"[{pid}] ") for pid in rests)]:
            problems.append(
                f"{CHECKS}: {check.id} gives as evidence {stray}, which no {ruled} ruling's citation bears out"
            )
    return problems


def check_strikes(run: RunLogs) -> list[str]:
    """Each side's strikes count 1, 2, 3... in the order its checks failed, and
    a disqualification names the side with the most strikes, not the winner."""
    problems: list[str] = []
    seen: dict[str | None, int] = {}
    for c in run.of("public/factchecks.jsonl"):
        if not isinstance(c, FactCheckRecord) or c.verdict != "fail":
            continue
        expected = seen.get(c.team, 0) + 1
        if c.strike != expected:
            problems.append(f"public/factchecks.jsonl: {c.id} is strike {c.strike}, expected {expected}")
        seen[c.team] = c.strike
    verdicts = [v for v in run.of("public/verdicts.jsonl") if isinstance(v, VerdictRecord)]
    for v in verdicts:
        dq = v.disqualified
        if dq is not None and (v.winner == dq or seen.get(dq, 0) == 0):
            problems.append(f"public/verdicts.jsonl: {v.id} disqualifies {dq} without cause")
    return problems

"""Grounded fact-checker: checks a moderated debate's speech against a
passage collection (``format.fact_check=grounded search.collection=...``).

One check is three kinds of step:

1. the model names the speech's checkable claims (at most ``format.max_claims``);
2. each claim is searched once, through the run's one search session and its
   retry and timeout policy (``SearchTool``), into ``public/searches``;
3. the model rules on each claim from the passages its search found:
   supported, contradicted or not found, citing a passage id and the words
   it quotes (a claim whose search found nothing is not found, unasked).

The citation checker marks every quote, as it marks the arguers'. The
verdict is the code's, not the model's: a speech fails only when a claim is
contradicted by a passage its own search returned and the quote is in that
passage. A contradiction whose citation fails the checker costs no strike:
the check passes as a ``fallback`` that says why. A claim counts as supported
only when its quote is likewise in a passage its own search returned; a
supported ruling whose citation fails (a made-up id, words the passage lacks)
is counted apart, and the check passes as a ``fallback`` that says why. A
claim not found never strikes. A failed check's ``evidence`` holds the
contradicting passages, which the speaker's retry prompt quotes; a passed
one's, the passages of the claims it counts supported. The check's
``passages`` are the cited passages its searches returned: a ruling citing
any other id (one the model made up, or one no search of this check found)
keeps that citation, marked, and the id stays out of ``passages``.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from harness.agents.asking import Call, M, once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.fact_checker import check_call
from harness.agents.passages import PASSAGE_CHARS, render_hits, topic_words
from harness.agents.transcript import clip
from harness.models.structured import StructuredResult
from harness.runtime.context import AgentContext
from harness.runtime.tools import SearchTool
from harness.search.citations import reasons
from harness.store.memory import JsonlLog
from harness.store.records import (
    Citation,
    DraftRecord,
    FactCheckRecord,
    Hit,
    Ruling,
    SearchRecord,
    Usage,
    record_id,
)

MAX_CLAIMS = 3  # the most any check extracts; format.max_claims picks fewer

ClaimText = Annotated[str, Field(min_length=8, max_length=160)]


class ClaimsOutput(BaseModel):
    claims: list[ClaimText] = Field(
        min_length=1, max_length=MAX_CLAIMS, description="checkable factual claims, in the speech's words"
    )


class RulingOutput(BaseModel):
    ruling: Literal["supported", "contradicted", "not_found"]
    # short labels: a small model that echoes one whole is caught and re-asked (harness.models.structured)
    passage: str = Field(max_length=40, description="a passage id, or empty")
    quote: str = Field(max_length=160, description="words copied from that passage")
    reason: str = Field(min_length=5, max_length=200, description="one sentence: why")


class GroundedFactCheckerAgent:
    """The grounded check of one draft; a record in ``log``, its searches in ``searches``."""

    def __init__(
        self,
        ctx: AgentContext,
        log: JsonlLog[FactCheckRecord],
        searches: JsonlLog[SearchRecord],
        tool: SearchTool,
        max_claims: int,
    ) -> None:
        self.ctx, self.log, self.searches, self.tool = ctx, log, searches, tool
        self.max_claims = max_claims
        self.collection = ctx.cfg.search.collection

    def _ask(self, draft: DraftRecord, agent: str, user: str, schema: type[M]) -> StructuredResult[M]:
        """One fact_checker call on ``draft`` (``agent`` names its prompt and reply ids)."""
        system = (
            "You are the debate's strict, impartial fact-checker. You check claims against the passages "
            f"of the collection '{self.collection}' and nothing else. {JSON_ONLY}"
        )
        messages = chat(system, user)
        call = Call("fact_checker", agent, draft.round, draft.team, draft.iteration)
        return call.ask(self.ctx, messages, schema)

    def claims(self, motion: str, alias: str, draft: DraftRecord) -> tuple[list[str] | None, Usage]:
        """The speech's checkable claims (None when no reply validated), and the call's usage."""
        limit = self.ctx.cfg.memory.max_chars_per_item
        user = (
            f"Motion: {motion}\nSpeech to check ({alias}, {draft.stage}):\n{clip(draft.text, limit)}\n"
            f"List up to {self.max_claims} factual claims of the speech that a passage of the collection "
            "could confirm or refute; opinions and arguments are not claims.\n"
            "Write JSON with:\n- claims: short claims quoted from the speech"
        )
        result = self._ask(draft, "fact_claims", user, ClaimsOutput)
        if result.value is None:
            return None, Usage()
        return [" ".join(c.split()) for c in result.value.claims][: self.max_claims], result.usage

    def rule(
        self, motion: str, alias: str, draft: DraftRecord, n: int, claim: str, found: SearchRecord
    ) -> tuple[RulingOutput | None, Usage]:
        """The model's ruling on claim ``n`` from its search's passages."""
        user = (
            f"Motion: {motion}\nClaim {n + 1} of {alias}'s {draft.stage}: {claim}\n"
            f"Passages found for it:\n{render_hits([found])}\n"
            "Rule on the claim from these passages only: supported if a passage confirms it, contradicted "
            "if a passage says otherwise, not_found if none speaks to it. Cite the passage your ruling "
            "rests on by its id in brackets, with words copied exactly from it. Write JSON with:\n"
            "- ruling: supported, contradicted or not_found\n"
            f"- passage: an id such as {found.hits[0].id}\n- quote: words copied from that passage\n"
            "- reason: one sentence: why"
        )
        # one call per claim: the claim's index is the agent's suffix, so ids stay distinct
        result = self._ask(draft, f"fact_ruling{n}", user, RulingOutput)
        return result.value, (result.usage if result.value is not None else Usage())

    def search(self, draft: DraftRecord, n: int, claim: str) -> SearchRecord:
        rid = record_id(draft.round, draft.team, "fact_search", draft.iteration, n)
        where = {"round": draft.round, "team": draft.team, "iteration": draft.iteration}
        return self.tool.search(self.searches, rid, where, topic_words(claim), Usage())

    def __call__(self, motion: str, alias: str, draft: DraftRecord, strikes_before: int) -> FactCheckRecord:
        """The check of ``draft``; a fail carries the side's strike count after it."""
        return once(
            self.log, check_call(draft).rid, partial(self._check, motion, alias, draft, strikes_before)
        )

    def _check(self, motion: str, alias: str, draft: DraftRecord, strikes_before: int) -> FactCheckRecord:
        claims, usage = self.claims(motion, alias, draft)
        rulings: list[Ruling] = []
        found: list[SearchRecord] = []
        unruled = 0
        for n, claim in enumerate(claims or []):
            search = self.search(draft, n, claim)
            found.append(search)
            out, cost = self.rule(motion, alias, draft, n, claim, search) if search.hits else (None, Usage())
            usage += cost
            unruled += bool(search.hits) and out is None
            rulings.append(self.ruling(claim, search, out))
        hits = {h.id: h for s in found for h in s.hits}
        verdict, fallback, why = decide(rulings, hits, claims is None, unruled)
        # what the verdict rests on: the passages that contradict, or those that support
        rests = [r for r in rulings if (backed(r, hits) if verdict == "fail" else confirmed(r, hits))]
        cited = [r.citation.id for r in rests if r.citation]
        evidence = [passage_line(hits[pid]) for pid in dict.fromkeys(cited)]
        return FactCheckRecord(
            **check_call(draft).envelope(self.ctx, usage),
            stage=draft.stage,
            draft_id=draft.id,
            verdict=verdict,
            claims=claims or [],
            justification=why,
            evidence=evidence,
            grounded=True,
            passages=retrieved(rulings, hits),
            strike=strikes_before + 1 if verdict == "fail" else 0,
            fallback=fallback,
            rulings=rulings,
            searches=[s.id for s in found],
            hits=sum(len(s.hits) for s in found),
        )

    def ruling(self, claim: str, search: SearchRecord, out: RulingOutput | None) -> Ruling:
        """The model's ruling as a record, its citation marked; unasked or unparsed: not found."""
        if out is None:
            why = "no passage found" if not search.hits else "the ruling's reply failed validation"
            return Ruling(claim=claim, ruling="not_found", reason=why, search_id=search.id)
        cited = out.passage.strip()
        citation = self.tool.check([Citation(id=cited, quote=out.quote)])[0] if cited else None
        return Ruling(
            claim=claim, ruling=out.ruling, reason=out.reason, search_id=search.id, citation=citation
        )


def retrieved(rulings: list[Ruling], hits: dict[str, Hit]) -> list[str]:
    """The passages the rulings cite that the check's searches returned, in order: a
    citation of anything else (a made-up id) is no passage the check rests on."""
    return [pid for pid in dict.fromkeys(r.citation.id for r in rulings if r.citation) if pid in hits]


def holds(ruling: Ruling, hits: dict[str, Hit]) -> bool:
    """The ruling's citation checks out: its quote is in a passage its own check's searches returned."""
    c = ruling.citation
    return c is not None and c.status == "supported" and c.id in hits


def backed(ruling: Ruling, hits: dict[str, Hit]) -> bool:
    """A contradiction that can strike: its citation checks out."""
    return ruling.ruling == "contradicted" and holds(ruling, hits)


def confirmed(ruling: Ruling, hits: dict[str, Hit]) -> bool:
    """A claim that counts as supported: ruled so, its citation checks out."""
    return ruling.ruling == "supported" and holds(ruling, hits)


def decide(
    rulings: list[Ruling], hits: dict[str, Hit], no_claims: bool, unruled: int
) -> tuple[Literal["pass", "fail"], bool, str]:
    """(verdict, fallback, justification) from the marked rulings."""
    if no_claims:
        return "pass", True, "the fact-checker's claims reply failed validation; passed unchecked"
    if strikes := [r for r in rulings if backed(r, hits) and r.citation]:
        why = [f"{r.claim!r} is contradicted by [{r.citation.id}]: {r.reason}" for r in strikes if r.citation]
        return "fail", False, "; ".join(why)
    # a ruling whose own citation fails is neither a strike nor a supported claim
    failing = [r for r in rulings if r.ruling != "not_found" and not holds(r, hits)]
    fails = "the fact-checker's own citations fail: " + "; ".join(unbacking(r, hits) for r in failing)
    if any(r.ruling == "contradicted" for r in failing):
        return "pass", True, "no strike: " + fails
    supported = sum(confirmed(r, hits) for r in rulings)
    not_found = sum(r.ruling == "not_found" for r in rulings)
    summary = f"{len(rulings)} claim(s): {supported} supported, {not_found} not found"
    if failing:
        summary += f", {len(failing)} ruled supported on a citation that fails"
    if unruled:
        return "pass", True, f"{unruled} ruling(s) failed validation; passed: {summary}"
    if failing:
        return "pass", True, f"passed, not confirmed: {summary}; {fails}"
    return "pass", False, summary


def unbacking(ruling: Ruling, hits: dict[str, Hit]) -> str:
    """Why a ruling's citation does not bear it out, in one clause."""
    c = ruling.citation
    if c is None:
        return f"{ruling.claim[:60]!r} is ruled {ruling.ruling}, citing no passage"
    if c.status != "supported":
        return reasons([c])
    return f"[{c.id}] is not among the passages its search returned"


def passage_line(hit: Hit) -> str:
    return f"[{hit.id}] ({hit.source}) {clip(hit.text, PASSAGE_CHARS)}"

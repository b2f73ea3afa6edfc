"""Fact-checker: reviews every speech draft of a moderated debate before it
is published.

Its verdict (pass or fail), the claims it checked, its justification and the
evidence it used go to a public ``FactCheckRecord``. With no search
collection configured it judges from the model alone, and the record says
so (``grounded=False``, no passage ids). A reply that never validates counts
as a pass marked ``fallback``: a checker that cannot answer must not cost a
debater a strike.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.agents.transcript import clip
from harness.engine.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import DraftRecord, FactCheckRecord, Usage, record_id


class FactCheckOutput(BaseModel):
    verdict: Literal["pass", "fail"]
    claims: list[str] = Field(min_length=1, max_length=4, description="the factual claims checked")
    justification: str = Field(min_length=10, max_length=300, description="why the speech passes or fails")
    evidence: list[str] = Field(min_length=1, max_length=3, description="what the verdict rests on")


class FactCheckerAgent:
    def __init__(self, ctx: AgentContext, log: JsonlLog[FactCheckRecord]) -> None:
        self.ctx = ctx
        self.log = log

    def messages(self, motion: str, alias: str, draft: DraftRecord) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        system = f"You are the debate's strict, impartial fact-checker. {JSON_ONLY}"
        user = (
            f"Motion: {motion}\nSpeech by {alias} at stage {draft.stage}:\n{clip(draft.text, limit)}\n"
            "List the factual claims the speech makes and check each one. Fail the speech if any claim "
            "is false, invented or misleading; opinions and arguments are not claims.\n"
            "Write JSON with:\n"
            '- verdict: "pass" or "fail"\n'
            "- claims: the claims you checked\n"
            "- justification: one or two sentences\n"
            "- evidence: what you know that supports your verdict"
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def __call__(self, motion: str, alias: str, draft: DraftRecord, strikes_before: int) -> FactCheckRecord:
        """The check of ``draft``; a fail carries the side's strike count after it."""
        seat = draft.team
        rid = record_id(draft.round, seat, "fact_check", draft.iteration)
        if (landed := self.log.get(rid)) is not None:
            return landed  # replay after resume
        result = self.ctx.ask(
            "fact_checker",
            "fact_checker",
            self.messages(motion, alias, draft),
            FactCheckOutput,
            round_=draft.round,
            team=seat,
            iteration=draft.iteration,
        )
        if result.value is not None:
            out = result.value
            fields = {
                "verdict": out.verdict,
                "claims": out.claims,
                "justification": out.justification,
                "evidence": out.evidence,
            }
            usage, fallback = result.usage, False
        else:
            fields = {
                "verdict": "pass",
                "claims": [],
                "evidence": [],
                "justification": "the fact-checker's reply failed validation; passed unchecked",
            }
            usage, fallback = Usage(), True
        failed = fields["verdict"] == "fail"
        record = FactCheckRecord(
            id=rid,
            round=draft.round,
            team=seat,
            role="fact_checker",
            iteration=draft.iteration,
            model=self.ctx.spec("fact_checker"),
            usage=usage,
            stage=draft.stage,
            draft_id=draft.id,
            strike=strikes_before + 1 if failed else 0,
            fallback=fallback,
            grounded=False,
            **fields,  # type: ignore[arg-type]
        )
        return self.log.append(record)

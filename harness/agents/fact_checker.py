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

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.transcript import clip
from harness.models.structured import StructuredResult
from harness.store.records import DraftRecord, FactCheckRecord, Usage


class FactCheckOutput(BaseModel):
    verdict: Literal["pass", "fail"]
    claims: list[str] = Field(min_length=1, max_length=4, description="the factual claims checked")
    justification: str = Field(min_length=10, max_length=300, description="why the speech passes or fails")
    evidence: list[str] = Field(min_length=1, max_length=3, description="what the verdict rests on")


# What a reply that failed validation stands as: a pass, unchecked (built past
# validation: its claims and evidence are empty).
UNCHECKED = FactCheckOutput.model_construct(
    verdict="pass",
    claims=[],
    justification="the fact-checker's reply failed validation; passed unchecked",
    evidence=[],
)


def check_call(draft: DraftRecord) -> Call:
    """The fact-checker's call on ``draft``: its record sits beside the draft's."""
    return Call("fact_checker", "fact_checker", draft.round, draft.team, draft.iteration, kind="fact_check")


class FactCheckerAgent(PublicAgent[FactCheckRecord]):
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
        return chat(system, user)

    def __call__(self, motion: str, alias: str, draft: DraftRecord, strikes_before: int) -> FactCheckRecord:
        """The check of ``draft``; a fail carries the side's strike count after it."""
        call = check_call(draft)
        messages = self.messages(motion, alias, draft)

        def record(result: StructuredResult[FactCheckOutput]) -> FactCheckRecord:
            out = result.value or UNCHECKED
            return FactCheckRecord(
                **call.envelope(self.ctx, result.usage if result.value else Usage()),
                **out.model_dump(),  # verdict, claims, justification, evidence
                stage=draft.stage,
                draft_id=draft.id,
                grounded=False,
                strike=strikes_before + 1 if out.verdict == "fail" else 0,
                fallback=result.value is None,
            )

        return ask_once(self.ctx, self.log, call, messages, FactCheckOutput, record)

"""Judge: after a panel round's summary, decide SYNTHESIZE or CONTINUE.

It reads the topic, the framework, the recent summaries and the round's
statements, and names the main unresolved tension, which the format hands to
the analysts of the next round. A reply that fails validation is recorded as
CONTINUE with ``fallback=True`` (the round cap still bounds the panel).
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from pydantic import BaseModel, Field

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.common import JSON_ONLY, chat, recap
from harness.agents.transcript import render
from harness.models.structured import StructuredResult
from harness.store.records import DecisionRecord, Published, SummaryRecord, Usage


class JudgeOutput(BaseModel):
    decision: Literal["SYNTHESIZE", "CONTINUE"]
    reason: str = Field(min_length=10, max_length=300, description="why the panel should stop or go on")
    tension: str = Field(min_length=10, max_length=300, description="the main unresolved tension")


class JudgeAgent(PublicAgent[DecisionRecord]):
    def __call__(
        self,
        topic: str,
        framework: str,
        round_: int,
        summaries: list[SummaryRecord],
        statements: list[Published],
    ) -> DecisionRecord:
        limit = self.ctx.cfg.memory.max_chars_per_item
        user = (
            f"Topic: {topic}\nAnalysis framework: {framework}\nRound summaries so far:\n{recap(summaries)}\n"
            f"Statements of round {round_}:\n{render(statements, limit)}\n"
            "Decide whether the panel has produced enough to write its synthesis (SYNTHESIZE) or should "
            "debate another round (CONTINUE).\n"
            "Write JSON with:\n"
            '- decision: "SYNTHESIZE" or "CONTINUE"\n'
            "- reason: one sentence\n"
            "- tension: the main tension still unresolved, in one sentence"
        )
        call = Call("judge", "judge", round_, kind="decision")
        messages = chat(f"You are the panel's independent judge. {JSON_ONLY}", user)
        return ask_once(self.ctx, self.log, call, messages, JudgeOutput, partial(self.record, call))

    def record(self, call: Call, result: StructuredResult[JudgeOutput]) -> DecisionRecord:
        """The decision; a reply that failed validation goes on, keeping the last tension."""
        if (out := result.value) is not None:
            return DecisionRecord(
                **call.envelope(self.ctx, result.usage),
                decision=out.decision,
                reason=out.reason,
                tension=out.tension,
            )
        previous = self.log.last()
        return DecisionRecord(
            **call.envelope(self.ctx, Usage()),
            decision="CONTINUE",
            reason="judge reply failed validation",
            tension=previous.tension if previous else "",
            fallback=True,
        )

"""Synthesiser: the panel's executive synthesis when the debate closes.

Three paragraphs, asked for as three fields so a small model can keep to
them: where the analysts converge, which tensions remain, and one actionable
recommendation. The record keeps why the panel closed (the judge, the round
cap, or the rounds running out). A reply that fails validation leaves the
round summaries as the synthesis, marked ``fallback``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.asking import Call, M, PublicAgent, ask_once
from harness.agents.common import JSON_ONLY, chat, recap
from harness.agents.transcript import render
from harness.models.structured import StructuredResult
from harness.runtime.context import AgentContext
from harness.store.records import Published, SummaryRecord, SynthesisRecord, Usage


class SynthesisOutput(BaseModel):
    convergences: str = Field(min_length=40, max_length=500, description="where the analysts agree")
    tensions: str = Field(min_length=40, max_length=500, description="what remains unresolved")
    recommendation: str = Field(min_length=40, max_length=500, description="one actionable recommendation")


FAILED_SYNTHESIS = "No synthesis: the synthesiser's reply failed validation."


def synthesis(
    ctx: AgentContext, call: Call, result: StructuredResult[M], text: str, close_reason: str
) -> SynthesisRecord:
    """A synthesis record of ``text``; a reply that failed validation costs nothing here
    (its usage is on its schema_failure event) and is marked ``fallback``."""
    failed = result.value is None
    return SynthesisRecord(
        **call.envelope(ctx, Usage() if failed else result.usage),
        text=text,
        close_reason=close_reason,
        fallback=failed,
    )


class SynthesizerAgent(PublicAgent[SynthesisRecord]):
    def __call__(
        self,
        topic: str,
        framework: str,
        round_: int,
        close_reason: str,
        summaries: list[SummaryRecord],
        statements: list[Published],
        tension: str | None,
    ) -> SynthesisRecord:
        limit = self.ctx.cfg.memory.max_chars_per_item
        user = (
            f"Topic: {topic}\nAnalysis framework: {framework}\nRound summaries:\n{recap(summaries)}\n"
            f"Final statements:\n{render(statements, limit)}\n"
            + (f"The judge's main tension: {tension}\n" if tension else "")
            + "Write the panel's executive synthesis as JSON with:\n"
            "- convergences: a paragraph on where the analysts agree\n"
            "- tensions: a paragraph on what remains unresolved\n"
            "- recommendation: a paragraph with one actionable recommendation"
        )
        call = Call("synthesizer", "synthesizer", round_, kind="synthesis")
        messages = chat(f"You write the executive synthesis of an expert panel. {JSON_ONLY}", user)

        def record(result: StructuredResult[SynthesisOutput]) -> SynthesisRecord:
            if (out := result.value) is not None:
                text = f"{out.convergences}\n\n{out.tensions}\n\n{out.recommendation}"
            else:  # the round summaries stand in for it
                text = "\n\n".join(s.text for s in summaries) or FAILED_SYNTHESIS
            return synthesis(self.ctx, call, result, text, close_reason)

        return ask_once(self.ctx, self.log, call, messages, SynthesisOutput, record)

"""Synthesiser: the panel's executive synthesis when the debate closes.

Three paragraphs, asked for as three fields so a small model can keep to
them: where the analysts converge, which tensions remain, and one actionable
recommendation. The record keeps why the panel closed (the judge, the round
cap, or the rounds running out). A reply that fails validation leaves the
round summaries as the synthesis, marked ``fallback``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.agents.transcript import render
from harness.engine.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import Published, SummaryRecord, SynthesisRecord, Usage, record_id


class SynthesisOutput(BaseModel):
    convergences: str = Field(min_length=40, max_length=500, description="where the analysts agree")
    tensions: str = Field(min_length=40, max_length=500, description="what remains unresolved")
    recommendation: str = Field(min_length=40, max_length=500, description="one actionable recommendation")


class SynthesizerAgent:
    def __init__(self, ctx: AgentContext, log: JsonlLog[SynthesisRecord]) -> None:
        self.ctx = ctx
        self.log = log

    def messages(
        self,
        topic: str,
        framework: str,
        summaries: list[SummaryRecord],
        statements: list[Published],
        tension: str | None,
    ) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        recap = "\n".join(f"[round {s.round}] {s.text}" for s in summaries) or "(none)"
        user = (
            f"Topic: {topic}\nAnalysis framework: {framework}\nRound summaries:\n{recap}\n"
            f"Final statements:\n{render(statements, limit)}\n"
            + (f"The judge's main tension: {tension}\n" if tension else "")
            + "Write the panel's executive synthesis as JSON with:\n"
            "- convergences: a paragraph on where the analysts agree\n"
            "- tensions: a paragraph on what remains unresolved\n"
            "- recommendation: a paragraph with one actionable recommendation"
        )
        system = f"You write the executive synthesis of an expert panel. {JSON_ONLY}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

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
        rid = record_id(round_, None, "synthesis", 0)
        if (landed := self.log.get(rid)) is not None:
            return landed  # replay after resume
        result = self.ctx.ask(
            "synthesizer",
            "synthesizer",
            self.messages(topic, framework, summaries, statements, tension),
            SynthesisOutput,
            round_=round_,
            team=None,
            iteration=0,
        )
        if result.value is not None:
            out = result.value
            text, fallback, usage = (
                f"{out.convergences}\n\n{out.tensions}\n\n{out.recommendation}",
                False,
                result.usage,
            )
        else:
            text = (
                "\n\n".join(s.text for s in summaries)
                or "No synthesis: the synthesiser's reply failed validation."
            )
            fallback, usage = True, Usage()
        record = SynthesisRecord(
            id=rid,
            round=round_,
            role="synthesizer",
            model=self.ctx.spec("synthesizer"),
            usage=usage,
            text=text,
            close_reason=close_reason,
            fallback=fallback,
        )
        return self.log.append(record)

"""Summariser: two or three neutral sentences after every panel round.

It reads the round's statements under their aliases and writes a public
``SummaryRecord``. A reply that fails validation leaves a plain fallback
that says so (``fallback=True``), so every round has a summary on record.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.agents.transcript import render
from harness.engine.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import Published, SummaryRecord, Usage, record_id


class SummaryOutput(BaseModel):
    summary: str = Field(min_length=60, max_length=400, description="two or three neutral sentences")


class SummarizerAgent:
    def __init__(self, ctx: AgentContext, log: JsonlLog[SummaryRecord]) -> None:
        self.ctx = ctx
        self.log = log

    def messages(self, topic: str, round_: int, statements: list[Published]) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        user = (
            f"Topic: {topic}\nStatements of round {round_}:\n{render(statements, limit)}\n"
            "Summarise the round in two or three neutral sentences: where the analysts agree and "
            "where they differ. Take no side.\n"
            'Write JSON with "summary".'
        )
        system = f"You are the panel's neutral summariser. {JSON_ONLY}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def __call__(self, topic: str, round_: int, statements: list[Published]) -> SummaryRecord:
        rid = record_id(round_, None, "summary", 0)
        if (landed := self.log.get(rid)) is not None:
            return landed  # replay after resume
        result = self.ctx.ask(
            "summarizer",
            "summarizer",
            self.messages(topic, round_, statements),
            SummaryOutput,
            round_=round_,
            team=None,
            iteration=0,
        )
        if result.value is not None:
            text, fallback, usage = result.value.summary, False, result.usage
        else:
            speakers = ", ".join(p.alias or p.team or "?" for p in statements) or "no analyst"
            text, fallback, usage = (
                f"Round {round_}: {speakers} spoke; no valid summary was written.",
                True,
                Usage(),
            )
        record = SummaryRecord(
            id=rid,
            round=round_,
            role="summarizer",
            model=self.ctx.spec("summarizer"),
            usage=usage,
            text=text,
            fallback=fallback,
        )
        return self.log.append(record)

"""Summariser: two or three neutral sentences after every panel round.

It reads the round's statements under their aliases and writes a public
``SummaryRecord``. A reply that fails validation leaves a plain fallback
that says so (``fallback=True``), so every round has a summary on record.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.transcript import render
from harness.models.structured import StructuredResult
from harness.store.records import Published, SummaryRecord, Usage


class SummaryOutput(BaseModel):
    summary: str = Field(min_length=60, max_length=400, description="two or three neutral sentences")


class SummarizerAgent(PublicAgent[SummaryRecord]):
    def messages(self, topic: str, round_: int, statements: list[Published]) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        user = (
            f"Topic: {topic}\nStatements of round {round_}:\n{render(statements, limit)}\n"
            "Summarise the round in two or three neutral sentences: where the analysts agree and "
            "where they differ. Take no side.\n"
            'Write JSON with "summary".'
        )
        system = f"You are the panel's neutral summariser. {JSON_ONLY}"
        return chat(system, user)

    def __call__(self, topic: str, round_: int, statements: list[Published]) -> SummaryRecord:
        call = Call("summarizer", "summarizer", round_, kind="summary")
        messages = self.messages(topic, round_, statements)

        def record(result: StructuredResult[SummaryOutput]) -> SummaryRecord:
            if (out := result.value) is not None:
                return SummaryRecord(**call.envelope(self.ctx, result.usage), text=out.summary)
            speakers = ", ".join(p.alias or p.team or "?" for p in statements) or "no analyst"
            text = f"Round {round_}: {speakers} spoke; no valid summary was written."
            return SummaryRecord(**call.envelope(self.ctx, Usage()), text=text, fallback=True)

        return ask_once(self.ctx, self.log, call, messages, SummaryOutput, record)

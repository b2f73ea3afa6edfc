"""Judge: after a panel round's summary, decide SYNTHESIZE or CONTINUE.

It reads the topic, the framework, the recent summaries and the round's
statements, and names the main unresolved tension, which the format hands to
the analysts of the next round. A reply that fails validation is recorded as
CONTINUE with ``fallback=True`` (the round cap still bounds the panel).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.agents.transcript import render
from harness.engine.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import DecisionRecord, Published, SummaryRecord, Usage, record_id


class JudgeOutput(BaseModel):
    decision: Literal["SYNTHESIZE", "CONTINUE"]
    reason: str = Field(min_length=10, max_length=300, description="why the panel should stop or go on")
    tension: str = Field(min_length=10, max_length=300, description="the main unresolved tension")


class JudgeAgent:
    def __init__(self, ctx: AgentContext, log: JsonlLog[DecisionRecord]) -> None:
        self.ctx = ctx
        self.log = log

    def messages(
        self,
        topic: str,
        framework: str,
        round_: int,
        summaries: list[SummaryRecord],
        statements: list[Published],
    ) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        recap = "\n".join(f"[round {s.round}] {s.text}" for s in summaries) or "(none)"
        user = (
            f"Topic: {topic}\nAnalysis framework: {framework}\n"
            f"Round summaries so far:\n{recap}\nStatements of round {round_}:\n{render(statements, limit)}\n"
            "Decide whether the panel has produced enough to write its synthesis (SYNTHESIZE) or should "
            "debate another round (CONTINUE).\n"
            "Write JSON with:\n"
            '- decision: "SYNTHESIZE" or "CONTINUE"\n'
            "- reason: one sentence\n"
            "- tension: the main tension still unresolved, in one sentence"
        )
        system = f"You are the panel's independent judge. {JSON_ONLY}"
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def __call__(
        self,
        topic: str,
        framework: str,
        round_: int,
        summaries: list[SummaryRecord],
        statements: list[Published],
    ) -> DecisionRecord:
        rid = record_id(round_, None, "decision", 0)
        if (landed := self.log.get(rid)) is not None:
            return landed  # replay after resume
        result = self.ctx.ask(
            "judge",
            "judge",
            self.messages(topic, framework, round_, summaries, statements),
            JudgeOutput,
            round_=round_,
            team=None,
            iteration=0,
        )
        if result.value is not None:
            out = result.value
            fields = {"decision": out.decision, "reason": out.reason, "tension": out.tension}
            usage, fallback = result.usage, False
        else:
            previous = self.log.last()
            fields = {
                "decision": "CONTINUE",
                "reason": "judge reply failed validation",
                "tension": previous.tension if previous else "",
            }
            usage, fallback = Usage(), True
        record = DecisionRecord(
            id=rid,
            round=round_,
            role="judge",
            model=self.ctx.spec("judge"),
            usage=usage,
            fallback=fallback,
            **fields,  # type: ignore[arg-type]
        )
        return self.log.append(record)

"""Analyst agent: one panel seat's statement for a round, with private notes.

Round 1 is blind: the prompt holds the topic, the framework and the seat's
alias, nothing any other seat wrote. From round 2 the analyst answers from
its role card and reads the previous round's statements, each under its
alias (never a model name); from round 3 the format also hands it the
judge's main tension. The notes stay in the seat's own log; the statement is
what the format publishes.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.transcript import clip
from harness.models.structured import StructuredResult
from harness.store.records import Published, RoleCardRecord, ThinkingRecord


class AnalystOutput(BaseModel):
    notes: str = Field(min_length=20, max_length=200, description="private reasoning, never shown to others")
    statement: str = Field(min_length=40, max_length=500, description="the position to share with the panel")


class AnalystAgent(SeatAgent):
    def __call__(
        self,
        topic: str,
        framework: str,
        round_: int,
        card: RoleCardRecord,
        previous: list[Published],
        tension: str | None,
    ) -> ThinkingRecord | None:
        alias = self.view.seat.alias
        limit = self.ctx.cfg.memory.max_chars_per_item
        if round_ == 1:
            system = f"You are {alias}, an analyst on an expert panel. {JSON_ONLY}"
            task = "Give your own independent position on the topic, judged by the framework's criteria.\n"
        else:
            system = (
                f"You are {alias}, the panel's {card.name}. Expertise: {card.expertise} "
                f"Mandate: {card.mandate} {JSON_ONLY}"
            )
            heard = "\n".join(
                f"[{p.alias or p.team}{' (you)' if p.team == self.view.name else ''}] {clip(p.text, limit)}"
                for p in previous
            )
            task = (
                f"Statements of round {round_ - 1}:\n{heard or '(none)'}\n"
                + (f"The judge's main unresolved tension: {tension}\n" if tension else "")
                + "Answer from your role: engage the others by their alias, agree or disagree with reasons.\n"
            )
        user = (
            f"Topic: {topic}\nAnalysis framework: {framework}\nRound {round_}.\n{task}"
            "Write JSON with:\n"
            "- notes: your private reasoning, which no one else sees\n"
            "- statement: your position for the panel, two to four sentences"
        )
        call = Call(self.view.seat.role, "analyst", round_, self.view.name, kind="thinking")
        messages = chat(system, user)

        def record(result: StructuredResult[AnalystOutput]) -> ThinkingRecord | None:
            if (out := result.value) is None:
                return None  # the schema_failure event says why; nothing is published
            return ThinkingRecord(
                **call.envelope(self.ctx, result.usage), scratchpad=out.notes, draft=out.statement
            )

        return ask_once(self.ctx, self.view.thinking, call, messages, AnalystOutput, record)

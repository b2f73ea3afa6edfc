"""Advocate: one side's turn in a judge-refined debate (Pro's argument, Con's answer).

The prompt is the seat's preset system prompt (``format.prompts.<role>``,
with its briefing when ``format.briefings`` is on), one user message with
the motion and the task, and then what the seat answers, each as a message
of its own: Pro hears the judge's last evaluation (from round 2), Con hears
Pro's argument. Nothing is ever pasted into one transcript string, so a
model sees who said what. The turn is published as it is: a seat keeps no
private draft, only its prompts. A reply that never validates publishes
nothing; the ``schema_failure`` event says why, and replay reads it back.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness.agents.asking import Call, ask_once
from harness.agents.common import system_prompt
from harness.agents.transcript import clip
from harness.models.structured import StructuredResult
from harness.runtime.context import AgentContext
from harness.store.memory import SeatMemory
from harness.store.records import TurnRecord, record_id

Phase = Literal["argument", "answer"]
AGENT = "advocate"  # the agent name in prompt and event ids


class ArgumentOutput(BaseModel):
    argument: str = Field(
        min_length=40, max_length=600, description="the argument for the motion, three to five sentences"
    )


class AnswerOutput(BaseModel):
    answer: str = Field(
        min_length=40, max_length=600, description="the answer to Pro's argument, three to five sentences"
    )


class AdvocateAgent:
    """Pro (``phase="argument"``) or Con (``phase="answer"``), bound to its seat."""

    def __init__(self, ctx: AgentContext, view: SeatMemory, phase: Phase, preset: str) -> None:
        self.ctx = ctx
        self.view = view
        self.phase = phase
        self.preset = preset

    def task(self, round_: int, heard: list[tuple[str, str]]) -> str:
        if self.phase == "argument":
            if not heard:
                return "Argue for the motion.\nWrite JSON with:\n- argument: your argument, three to five sentences"
            return (
                f"The judge's evaluation of round {round_ - 1} follows as its own message. Improve on it: "
                "keep what it credited, repair what it criticised, and argue for the motion as it now stands.\n"
                "Write JSON with:\n- argument: your argument, three to five sentences"
            )
        said = (
            "Pro's argument follows as its own message. Answer it point by point"
            if heard
            else ("Pro made no valid argument this round. Make the case")
        )
        return f"{said}, arguing against the motion.\nWrite JSON with:\n- answer: your answer, three to five sentences"

    def messages(
        self, original: str, motion: str, round_: int, heard: list[tuple[str, str]], briefing: str | None
    ) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        refined = f"(It refines the original motion: {original})\n" if motion != original else ""
        user = f"Motion: {motion}\n{refined}Round {round_}. {self.task(round_, heard)}"
        return [
            {"role": "system", "content": system_prompt(self.preset, briefing)},
            {"role": "user", "content": user},
            *({"role": "user", "content": f"{name}: {clip(text, limit)}"} for name, text in heard),
        ]

    def __call__(
        self, original: str, motion: str, round_: int, heard: list[tuple[str, str]], briefing: str | None
    ) -> TurnRecord | None:
        """This seat's turn of ``round_``, published; None when no reply validated.

        ``heard`` is what the seat answers, as (speaker, text) pairs in order.
        """
        call = Call(self.view.seat.role, AGENT, round_, self.view.name, kind="turn")
        failed = record_id(round_, call.team, AGENT, 0, "schema_failure", 0)
        if self.view.shared.get(call.rid) is None and self.ctx.events.get(failed) is not None:
            return None  # replay of a turn whose reply never validated: it publishes nothing again
        schema: type[BaseModel] = ArgumentOutput if self.phase == "argument" else AnswerOutput
        messages = self.messages(original, motion, round_, heard, briefing)

        def record(result: StructuredResult[BaseModel]) -> TurnRecord | None:
            if result.value is None:
                return None
            return TurnRecord(
                **call.envelope(self.ctx, result.usage, role=call.role),
                text=getattr(result.value, self.phase),
                phase=self.phase,
                alias=self.view.seat.alias,
                motion=motion,
                original_motion=original,
            )

        return ask_once(self.ctx, self.view.shared, call, messages, schema, record)  # type: ignore[return-value]

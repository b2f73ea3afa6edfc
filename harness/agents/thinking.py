"""Thinking agent: a private scratchpad, then a draft argument.

It reads only its team's view: the shared transcript window, its persona (none
in the no-persona control, ``format.persona=false``) and its own last critique.
On a schema failure it returns ``None`` (no draft), which the critic records
as a rejection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.transcript import clip, opponent_last, render, window
from harness.models.structured import StructuredResult
from harness.probes.catalog import rules
from harness.store.records import PersonaRecord, ThinkingRecord

if TYPE_CHECKING:
    from harness.schema import Config


def debater_system(alias: str, persona: str | None, cfg: Config) -> str:
    """The team's debater as its thinking agent (and a probe's fork) addresses it,
    with the probes' rules when they are on. The no-persona control
    (``format.persona=false``) gives it no persona, whatever the caller holds."""
    who = f" Persona: {persona}" if persona is not None and getattr(cfg.format, "persona", True) else ""
    return f"You are the {alias} team's debater.{who}{rules(cfg)} {JSON_ONLY}"


class ThinkingOutput(BaseModel):
    scratchpad: str = Field(min_length=20, max_length=300, description="private reasoning and stress tests")
    argument: str = Field(min_length=40, max_length=500, description="the argument to publish")


class ThinkingAgent(SeatAgent):
    def messages(
        self, topic: str, round_: int, persona: PersonaRecord | None, feedback: str | None
    ) -> list[dict[str, str]]:
        team = self.view.name
        mem = self.ctx.cfg.memory
        items = window(self.view.shared, round_, mem.window_rounds)
        rival = opponent_last(items, team)
        user = (
            f"Motion: {topic}\nYou argue {self.view.seat.stance}. Round {round_}.\n"
            f"Debate so far:\n{render(items, mem.max_chars_per_item)}\n"
            + (f"Answer this opposing point: {clip(rival.text, mem.max_chars_per_item)}\n" if rival else "")
            + (f"Fix what the critic said: {feedback}\n" if feedback else "")
            + "Write JSON with:\n"
            "- scratchpad: your private reasoning; test the argument against the strongest objection\n"
            "- argument: the argument to publish, two to four sentences with a concrete reason"
        )
        system = debater_system(self.view.seat.alias, persona.persona if persona else None, self.ctx.cfg)
        return chat(system, user)

    def __call__(
        self, topic: str, round_: int, iteration: int, persona: PersonaRecord | None, feedback: str | None
    ) -> ThinkingRecord | None:
        call = Call(self.view.seat.role, "thinking", round_, self.view.name, iteration)
        messages = self.messages(topic, round_, persona, feedback)

        def record(result: StructuredResult[ThinkingOutput]) -> ThinkingRecord | None:
            if (out := result.value) is None:
                return None  # the schema_failure event says why; nothing is published
            return ThinkingRecord(
                **call.envelope(self.ctx, result.usage),
                scratchpad=out.scratchpad,
                draft=out.argument,
                persona_id=persona.id if persona else None,
            )

        return ask_once(self.ctx, self.view.thinking, call, messages, ThinkingOutput, record)

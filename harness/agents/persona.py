"""Persona agent: keeps or evolves the team's identity, and says why.

Every call writes a versioned ``PersonaRecord``; ``evolve`` bumps the version.
On a schema failure the previous persona is kept (decision ``fallback``).
A planted persona (``personas.<seat>``) is recorded the same way with no call
(decision ``planted``; a new text bumps the version).
"""

from __future__ import annotations

from functools import partial
from typing import Literal

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, ask_once, once
from harness.agents.common import JSON_ONLY, chat
from harness.models.structured import StructuredResult
from harness.probes.catalog import rules
from harness.store.memory import SeatMemory
from harness.store.records import PersonaRecord, Usage

Decision = Literal["keep", "evolve", "initial", "fallback", "planted"]
DEFAULT_PERSONA = "A careful debater who argues {stance} with concrete reasons."


def current_persona(view: SeatMemory) -> tuple[str, PersonaRecord | None]:
    """The team's persona now (the default before its first) and its record, as a
    fork of its view (a probe, an interview) is asked with it."""
    current = view.persona.last()
    return (current.persona if current else DEFAULT_PERSONA.format(stance=view.seat.stance)), current


class PersonaOutput(BaseModel):
    decision: Literal["keep", "evolve"]
    # min lengths keep grammar-constrained small models from writing one word
    persona: str = Field(min_length=20, max_length=300, description="who the team is and how it argues")
    rationale: str = Field(min_length=10, max_length=300, description="why keep or evolve it now")


class PersonaAgent(SeatAgent):
    def messages(self, topic: str, round_: int, feedback: str | None) -> list[dict[str, str]]:
        current = self.view.persona.last()
        persona = current.persona if current else DEFAULT_PERSONA.format(stance=self.view.seat.stance)
        user = (
            f"Motion: {topic}\nYour team argues {self.view.seat.stance}. Round {round_}.\n"
            f"Current persona: {persona}\n"
            f"Recent debate:\n{self.debate(round_)}\n"
            + (f"The critic rejected your last draft: {feedback}\n" if feedback else "")
            + "Decide whether to keep the current persona or evolve it into a new one.\n"
            "Write JSON with:\n"
            '- decision: "keep" or "evolve"\n'
            "- persona: one sentence saying who your team is and how it argues\n"
            "- rationale: one sentence explaining your decision"
        )
        alias, carried = self.view.seat.alias, rules(self.ctx.cfg)  # the probes' rules, if any
        system = f"You shape the identity of the {alias} debate team.{carried} {JSON_ONLY}"
        return chat(system, user)

    def __call__(self, topic: str, round_: int, iteration: int, feedback: str | None) -> PersonaRecord:
        call = Call(self.view.seat.role, "persona", round_, self.view.name, iteration)
        messages = self.messages(topic, round_, feedback)
        return ask_once(
            self.ctx, self.view.persona, call, messages, PersonaOutput, partial(self.record, call)
        )

    def plant(self, text: str, round_: int, iteration: int) -> PersonaRecord:
        """The seat's planted persona (``personas.<seat>``), recorded in place of a reply."""
        call = Call(self.view.seat.role, "persona", round_, self.view.name, iteration)
        previous = self.view.persona.last()
        version = (previous.version if previous else 0) + (previous is None or previous.persona != text)
        return once(
            self.view.persona,
            call.rid,
            lambda: PersonaRecord(
                **call.envelope(self.ctx, Usage()),
                decision="planted",
                persona=text,
                rationale=f"planted: personas.{self.view.name}",
                version=version,
            ),
        )

    def record(self, call: Call, result: StructuredResult[PersonaOutput]) -> PersonaRecord:
        """The persona the reply decided on; a failed reply keeps the previous one."""
        previous = self.view.persona.last()
        version = previous.version if previous else 0
        if result.value is None:
            persona = previous.persona if previous else DEFAULT_PERSONA.format(stance=self.view.seat.stance)
            decision: Decision = "fallback"
            rationale = "schema failure: previous persona kept"
        else:
            persona, rationale = result.value.persona, result.value.rationale
            decision = result.value.decision
            if decision == "evolve" or previous is None:
                version += 1
        return PersonaRecord(
            **call.envelope(self.ctx, result.usage if result.ok else Usage()),  # a failure's is on its event
            decision=decision,
            persona=persona,
            rationale=rationale,
            version=max(version, 1),
        )

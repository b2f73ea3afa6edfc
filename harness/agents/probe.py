"""Probe agent: asks a team its behavioural probes in a fork of its view.

After a team's turn, each probe's question is asked with the context the
team's debater had: the same system prompt (the team's alias, its current
persona and the probes' rules) and the same window of the shared
transcript. The reply never enters the debate: it lands, with the checker's
verdict, in the team's own ``probes.jsonl`` and nowhere else (its prompt and
raw reply go to the team's ``prompts`` and ``replies`` logs, like every call
of the team's). A replayed turn reuses a probe record that already landed,
so a resumed run never asks twice.
"""

from __future__ import annotations

from functools import partial

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, ask_once
from harness.agents.common import chat
from harness.agents.persona import current_persona
from harness.agents.thinking import debater_system
from harness.models.structured import StructuredResult
from harness.probes.catalog import PROBE_LOG, PROBE_ROLE, Probe, probe_id
from harness.probes.checkers import Asker
from harness.runtime.context import AgentContext
from harness.store.memory import SeatMemory
from harness.store.records import PersonaRecord, ProbeRecord, Usage


class ProbeOutput(BaseModel):
    reply: str = Field(min_length=1, max_length=1000, description="your answer to the question")


class ProbeAgent(SeatAgent):
    def __init__(self, ctx: AgentContext, view: SeatMemory, probes: tuple[Probe, ...]) -> None:
        super().__init__(ctx, view)
        self.probes = probes
        self.log = view.logs[PROBE_LOG]
        self.asker = Asker(team=view.name, alias=view.seat.alias)

    def messages(self, topic: str, round_: int, persona: str, probe: Probe) -> list[dict[str, str]]:
        user = (
            f"Motion: {topic}\nYou argue {self.view.seat.stance}. Round {round_}.\n"
            f"Debate so far:\n{self.debate(round_)}\n"
            f"Question: {probe.question}\n"
            "Write JSON with:\n"
            "- reply: your answer to the question, as your team would give it"
        )
        # the thinking agent's system prompt: the team as its debater knows it
        system = debater_system(self.view.seat.alias, persona, self.ctx.cfg)
        return chat(system, user)

    def __call__(self, topic: str, round_: int) -> list[ProbeRecord]:
        return [self.ask(topic, round_, i, probe) for i, probe in enumerate(self.probes)]

    def ask(self, topic: str, round_: int, index: int, probe: Probe) -> ProbeRecord:
        team = self.view.name
        call = Call(
            self.view.seat.role, PROBE_ROLE, round_, team, index, id=probe_id(round_, team, index, probe.name)
        )
        persona, current = current_persona(self.view)
        messages = self.messages(topic, round_, persona, probe)
        # asked once: a replayed turn reuses the record that landed
        return ask_once(
            self.ctx, self.log, call, messages, ProbeOutput, partial(self.record, call, probe, current)
        )

    def record(
        self, call: Call, probe: Probe, current: PersonaRecord | None, result: StructuredResult[ProbeOutput]
    ) -> ProbeRecord:
        reply = result.value.reply if result.value is not None else None
        return ProbeRecord(
            **call.envelope(self.ctx, result.usage if result.ok else Usage()),  # a failure's is on its event
            probe=probe.name,
            instruction=probe.instruction,
            question=probe.question,
            checker=probe.checker,
            params=probe.params,
            reply=reply,
            passed=probe.check(reply, self.asker) if reply is not None else None,
            persona_id=current.id if current else None,
        )

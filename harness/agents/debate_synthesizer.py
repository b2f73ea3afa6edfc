"""Debate synthesiser: after a grounded debate's last round, where each side
was strongest and weakest, without naming a winner (``format.final=synthesis``).

Neutral synthesis suits contested readings; for a factual claim it gives
false balance, and ``format.final=judge`` asks the evidence judge instead.
It reads the last turns, how well each side's citations held up, and any
notes a person added in chat mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, Field

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.common import JSON_ONLY
from harness.agents.synthesizer import FAILED_SYNTHESIS, synthesis
from harness.agents.transcript import render
from harness.models.structured import StructuredResult
from harness.store.records import NoteRecord, Published, SynthesisRecord


class DebateSynthesisOutput(BaseModel):
    for_strongest: str = Field(min_length=20, max_length=300, description="where FOR was strongest")
    for_weakest: str = Field(min_length=20, max_length=300, description="where FOR was weakest")
    against_strongest: str = Field(min_length=20, max_length=300, description="where AGAINST was strongest")
    against_weakest: str = Field(min_length=20, max_length=300, description="where AGAINST was weakest")


@dataclass(frozen=True)
class Evidence:
    """What a grounded debate's final role reads: the claim, the last turns, how each
    side's citations held up (by alias), and any notes a person added in chat mode."""

    claim: str
    turns: list[Published]
    grounding: dict[str, str]
    notes: list[NoteRecord]

    def messages(self, system: str, task: str) -> list[dict[str, str]]:
        record = "\n".join(f"{alias}: {line}" for alias, line in self.grounding.items())
        extra = "".join(f"\nA participant's note: {n.text}" for n in self.notes)
        user = (
            f"Claim: {self.claim}\nTurns:\n{render(self.turns, 600)}\n"
            f"Citations checked against the collection:\n{record}{extra}\n{task}"
        )
        return [{"role": "system", "content": f"{system} {JSON_ONLY}"}, {"role": "user", "content": user}]


SYNTHESIS_SYSTEM = "You read a debate between FOR and AGAINST and say where each side was strongest."
SYNTHESIS_TASK = (
    "Write JSON with, for each side, where it was strongest and where it was weakest "
    "(for_strongest, for_weakest, against_strongest, against_weakest). Do not name a winner."
)


class DebateSynthesizerAgent(PublicAgent[SynthesisRecord]):
    def __call__(
        self,
        claim: str,
        round_: int,
        close_reason: str,
        turns: list[Published],
        grounding: dict[str, str],
        notes: list[NoteRecord],
    ) -> SynthesisRecord:
        call = Call("synthesizer", "synthesizer", round_, kind="synthesis")
        evidence = Evidence(claim, turns, grounding, notes)
        messages = evidence.messages(SYNTHESIS_SYSTEM, SYNTHESIS_TASK)

        def record(result: StructuredResult[DebateSynthesisOutput]) -> SynthesisRecord:
            text = FAILED_SYNTHESIS
            if (out := result.value) is not None:
                text = (
                    f"FOR was strongest: {out.for_strongest}\nFOR was weakest: {out.for_weakest}\n"
                    f"AGAINST was strongest: {out.against_strongest}\nAGAINST was weakest: {out.against_weakest}"
                )
            return synthesis(self.ctx, call, result, text, close_reason)

        return ask_once(self.ctx, self.log, call, messages, DebateSynthesisOutput, record)

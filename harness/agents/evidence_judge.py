"""Evidence judge: after a grounded debate's last round, which side the
evidence supports (``format.final=judge``), for factual claims where a
neutral synthesis would give false balance.

It reads what the synthesiser reads (the last turns, each side's checked
citations, a person's notes) and must name a side. A reply that never
validates leaves a verdict with no winner, marked ``fallback``: no mid-scale
value is invented for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.debate_synthesizer import Evidence
from harness.models.structured import StructuredResult
from harness.store.records import NoteRecord, Published, Usage, VerdictRecord


class EvidenceVerdictOutput(BaseModel):
    winner: Literal["for", "against"] = Field(description="the side the cited evidence supports")
    justification: str = Field(min_length=30, max_length=500, description="why, naming passages")


JUDGE_SYSTEM = "You judge a factual debate by its evidence, not by its rhetoric."
JUDGE_TASK = (
    "Which side does the cited evidence support? Write JSON with winner (for or against) and a "
    "justification naming the passages that decide it. Weigh only quotes the check supported."
)


class EvidenceJudgeAgent(PublicAgent[VerdictRecord]):
    def __call__(
        self,
        claim: str,
        round_: int,
        turns: list[Published],
        grounding: dict[str, str],
        notes: list[NoteRecord],
    ) -> VerdictRecord:
        # the judge answers with roles.synthesizer's model: the format has one final role
        call = Call("synthesizer", "judge", round_, kind="verdict")
        messages = Evidence(claim, turns, grounding, notes).messages(JUDGE_SYSTEM, JUDGE_TASK)

        def record(result: StructuredResult[EvidenceVerdictOutput]) -> VerdictRecord:
            out = result.value
            return VerdictRecord(
                **call.envelope(self.ctx, result.usage if out else Usage()),
                by="judge",
                winner=out.winner if out else None,
                justification=out.justification
                if out
                else "No verdict: the judge's reply failed validation.",
                fallback=out is None,
            )

        return ask_once(self.ctx, self.log, call, messages, EvidenceVerdictOutput, record)

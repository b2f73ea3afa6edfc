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

from harness.agents.common import JSON_ONLY
from harness.agents.debate_synthesizer import evidence_lines
from harness.engine.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import NoteRecord, Published, Usage, VerdictRecord, record_id


class EvidenceVerdictOutput(BaseModel):
    winner: Literal["for", "against"] = Field(description="the side the cited evidence supports")
    justification: str = Field(min_length=30, max_length=500, description="why, naming passages")


class EvidenceJudgeAgent:
    def __init__(self, ctx: AgentContext, log: JsonlLog[VerdictRecord]) -> None:
        self.ctx = ctx
        self.log = log

    def __call__(
        self,
        claim: str,
        round_: int,
        turns: list[Published],
        grounding: dict[str, str],
        notes: list[NoteRecord],
    ) -> VerdictRecord:
        rid = record_id(round_, None, "verdict", 0)
        if (landed := self.log.get(rid)) is not None:
            return landed  # replay after resume
        user = (
            f"Claim: {claim}\n{evidence_lines(turns, grounding, notes)}"
            "Which side does the cited evidence support? Write JSON with winner (for or against) and a "
            "justification naming the passages that decide it. Weigh only quotes the check supported."
        )
        system = f"You judge a factual debate by its evidence, not by its rhetoric. {JSON_ONLY}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        result = self.ctx.ask(
            "synthesizer", "judge", messages, EvidenceVerdictOutput, round_=round_, team=None, iteration=0
        )
        out = result.value
        return self.log.append(
            VerdictRecord(
                id=rid,
                round=round_,
                role="judge",
                model=self.ctx.spec("synthesizer"),
                usage=result.usage if out else Usage(),
                by="judge",
                winner=out.winner if out else None,
                justification=out.justification
                if out
                else "No verdict: the judge's reply failed validation.",
                fallback=out is None,
            )
        )

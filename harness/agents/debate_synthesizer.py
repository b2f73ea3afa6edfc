"""Debate synthesiser: after a grounded debate's last round, where each side
was strongest and weakest, without naming a winner (``format.final=synthesis``).

Neutral synthesis suits contested readings; for a factual claim it gives
false balance, and ``format.final=judge`` asks the evidence judge instead.
It reads the last turns, how well each side's citations held up, and any
notes a person added in chat mode.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.agents.transcript import render
from harness.engine.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import NoteRecord, Published, SynthesisRecord, Usage, record_id


class DebateSynthesisOutput(BaseModel):
    for_strongest: str = Field(min_length=20, max_length=300, description="where FOR was strongest")
    for_weakest: str = Field(min_length=20, max_length=300, description="where FOR was weakest")
    against_strongest: str = Field(min_length=20, max_length=300, description="where AGAINST was strongest")
    against_weakest: str = Field(min_length=20, max_length=300, description="where AGAINST was weakest")


def evidence_lines(turns: list[Published], grounding: dict[str, str], notes: list[NoteRecord]) -> str:
    """The transcript, each side's citation record, and a person's notes, as the final role reads them."""
    record = "\n".join(f"{alias}: {line}" for alias, line in grounding.items())
    extra = "".join(f"\nA participant's note: {n.text}" for n in notes)
    return f"Turns:\n{render(turns, 600)}\nCitations checked against the collection:\n{record}{extra}\n"


class DebateSynthesizerAgent:
    def __init__(self, ctx: AgentContext, log: JsonlLog[SynthesisRecord]) -> None:
        self.ctx = ctx
        self.log = log

    def __call__(
        self,
        claim: str,
        round_: int,
        close_reason: str,
        turns: list[Published],
        grounding: dict[str, str],
        notes: list[NoteRecord],
    ) -> SynthesisRecord:
        rid = record_id(round_, None, "synthesis", 0)
        if (landed := self.log.get(rid)) is not None:
            return landed  # replay after resume
        user = (
            f"Claim: {claim}\n{evidence_lines(turns, grounding, notes)}"
            "Write JSON with, for each side, where it was strongest and where it was weakest "
            "(for_strongest, for_weakest, against_strongest, against_weakest). Do not name a winner."
        )
        system = (
            f"You read a debate between FOR and AGAINST and say where each side was strongest. {JSON_ONLY}"
        )
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        result = self.ctx.ask(
            "synthesizer",
            "synthesizer",
            messages,
            DebateSynthesisOutput,
            round_=round_,
            team=None,
            iteration=0,
        )
        out, usage = result.value, result.usage
        if out is not None:
            text = (
                f"FOR was strongest: {out.for_strongest}\nFOR was weakest: {out.for_weakest}\n"
                f"AGAINST was strongest: {out.against_strongest}\nAGAINST was weakest: {out.against_weakest}"
            )
        else:
            text, usage = "No synthesis: the synthesiser's reply failed validation.", Usage()
        return self.log.append(
            SynthesisRecord(
                id=rid,
                round=round_,
                role="synthesizer",
                model=self.ctx.spec("synthesizer"),
                usage=usage,
                text=text,
                close_reason=close_reason,
                fallback=out is None,
            )
        )

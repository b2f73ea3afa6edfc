"""Verdict judge: who won a moderated debate, scored per criterion.

It reads the motion, the last speeches (each under its speaker's alias and
stage), and the fact-check history (each side's strikes and the reasons of
the last failed checks), and names the winner with a score from 1 to 10 per
criterion for each side and a justification. The criteria are the format's
(``format.criteria``), so the reply schema is built per run. A reply that
never validates leaves a verdict with no winner, marked ``fallback``.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.transcript import clip
from harness.models.structured import StructuredResult
from harness.store.records import FactCheckRecord, Published, Usage, VerdictRecord

# What the judge is told each criterion means; format.criteria picks among them.
CRITERIA = {
    "evidence": "claims are accurate and backed by evidence",
    "rebuttal": "the opponent's points are answered directly",
    "clarity": "the case is clear and well structured",
    "logic": "the reasoning is valid, with no fallacies",
    "relevance": "every point bears on the motion",
    "persuasiveness": "a neutral audience would be moved",
    "civility": "the opponent is engaged fairly, without personal attacks",
    "accuracy": "nothing the fact-checker failed is repeated",
}


@cache
def verdict_schema(sides: tuple[str, ...], criteria: tuple[str, ...]) -> type[BaseModel]:
    """``{"winner", "scores": {side: {criterion: 1..10}}, "justification"}``."""
    score = (int, Field(ge=1, le=10))
    per_side: Any = create_model("CriterionScores", **{c: score for c in criteria})  # type: ignore[call-overload]
    scores: Any = create_model("Scores", **{s: (per_side, ...) for s in sides})  # type: ignore[call-overload]
    return create_model(
        "VerdictOutput",
        winner=(Literal[sides], ...),  # type: ignore[valid-type,arg-type]
        scores=(scores, ...),
        justification=(str, Field(min_length=20, max_length=500, description="why this side won")),
    )


class VerdictAgent(PublicAgent[VerdictRecord]):
    def messages(
        self,
        motion: str,
        speeches: list[Published],
        checks: list[FactCheckRecord],
        strikes: dict[str, int],
        aliases: dict[str, str],
    ) -> list[dict[str, str]]:
        limit = self.ctx.cfg.memory.max_chars_per_item
        criteria = self.ctx.cfg.format.criteria
        heard = "\n".join(f"[{p.alias or p.team}, {p.phase}] {clip(p.text, limit)}" for p in speeches)
        failed = [c for c in checks if c.verdict == "fail"][-4:]
        history = ", ".join(f"{aliases[s]}: {n} strike(s)" for s, n in strikes.items())
        reasons = "\n".join(
            f"- {aliases.get(c.team or '', c.team)} ({c.stage}): {clip(c.justification, 200)}" for c in failed
        )
        user = (
            f"Motion: {motion}\nThe debate's speeches:\n{heard or '(none)'}\n"
            f"Fact-check history: {history}\n{reasons}\n"
            "Judge the debate on these criteria, 1 (poor) to 10 (excellent) for each side:\n"
            + "".join(f"- {c}: {CRITERIA[c]}\n" for c in criteria)
            + f"Write JSON with:\n- winner: one of {', '.join(aliases)}\n"
            "- scores: for each side, a score per criterion\n- justification: two or three sentences"
        )
        system = f"You are the debate's impartial judge. {JSON_ONLY}"
        return chat(system, user)

    def __call__(
        self,
        motion: str,
        round_: int,
        speeches: list[Published],
        checks: list[FactCheckRecord],
        strikes: dict[str, int],
        aliases: dict[str, str],
    ) -> VerdictRecord:
        call = Call("judge", "judge", round_, kind="verdict")
        schema = verdict_schema(tuple(aliases), tuple(self.ctx.cfg.format.criteria))
        messages = self.messages(motion, speeches, checks, strikes, aliases)

        def record(result: StructuredResult[Any]) -> VerdictRecord:
            out = result.value
            return VerdictRecord(
                **call.envelope(self.ctx, result.usage if out is not None else Usage()),
                by="judge",
                winner=out.winner if out is not None else None,
                scores=out.scores.model_dump() if out is not None else {},
                justification=out.justification if out is not None else "the judge's reply failed validation",
                fallback=out is None,
            )

        return ask_once(self.ctx, self.log, call, messages, schema, record)

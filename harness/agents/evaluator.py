"""Evaluator: the judge of a judge-refined debate.

After each round it reads the motion and the round's two turns, each turn as
a message of its own under its speaker's alias (never one pasted transcript,
so it judges the turns, not a blob), evaluates them, and writes a synthesis:
the refined motion the next round argues. In the last round it is told the
evaluation is final. A reply that never validates is recorded with
``fallback=True``: the evaluation says so and the synthesis keeps the motion
unchanged, so the debate goes on from where it stood.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.asking import Call, PublicAgent, ask_once
from harness.agents.common import chat, system_prompt
from harness.agents.transcript import clip
from harness.models.structured import StructuredResult
from harness.runtime.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import EvaluationRecord, Published, Usage

FALLBACK_EVALUATION = "The judge's reply failed validation; the motion stands unchanged."


# Lengths fit the judge's 384 tokens (conf/format/judge_refine.yaml): an
# evaluation that fills the budget would leave its synthesis, the next
# motion, cut off mid-word (seen on SmolLM2).
class EvaluationOutput(BaseModel):
    evaluation: str = Field(
        min_length=20,
        max_length=500,
        description="how well each side argued: what held up, what did not, and why",
    )
    synthesis: str = Field(
        min_length=15,
        max_length=240,
        description="the refined motion: one sentence that keeps what survived the debate",
    )


class EvaluatorAgent(PublicAgent[EvaluationRecord]):
    def __init__(self, ctx: AgentContext, log: JsonlLog[EvaluationRecord], preset: str) -> None:
        super().__init__(ctx, log)
        self.preset = preset

    def __call__(
        self,
        original: str,
        motion: str,
        round_: int,
        final: bool,
        turns: dict[str, Published | None],
        briefing: str | None,
    ) -> EvaluationRecord:
        """The evaluation of ``round_``; ``turns`` maps each debater's alias to its
        turn, in speaking order (None: its reply never validated)."""
        limit = self.ctx.cfg.memory.max_chars_per_item
        refined = f"(It refines the original motion: {original})\n" if motion != original else ""
        silent = [f"{alias} made no valid turn this round." for alias, t in turns.items() if t is None]
        closing = (
            "This is your FINAL evaluation: the debate ends with it. Give your overall verdict, and a "
            "synthesis that states the motion the debate arrived at.\n"
            if final
            else "Your synthesis becomes the motion of the next round.\n"
        )
        user = (
            f"Motion: {motion}\n{refined}Round {round_}. The round's turns follow, each as its own message. "
            f"{' '.join(silent)}\nEvaluate both sides on their reasons and evidence. {closing}"
            "Write JSON with:\n- evaluation: your evaluation of both turns, two to four sentences\n"
            "- synthesis: the refined motion, one sentence"
        )
        heard = [
            {"role": "user", "content": f"{a}: {clip(t.text, limit)}"}
            for a, t in turns.items()
            if t is not None
        ]
        messages = chat(system_prompt(self.preset, briefing), user) + heard
        call = Call("judge", "judge", round_, kind="evaluation")

        def record(result: StructuredResult[EvaluationOutput]) -> EvaluationRecord:
            out = result.value  # None: the failure's cost is on its schema_failure event
            return EvaluationRecord(
                **call.envelope(self.ctx, result.usage if out else Usage()),
                evaluation=out.evaluation if out else FALLBACK_EVALUATION,
                synthesis=out.synthesis if out else motion,
                motion=motion,
                original_motion=original,
                final=final,
                fallback=out is None,
            )

        return ask_once(self.ctx, self.log, call, messages, EvaluationOutput, record)

"""Speaker: one side's speech at one stage of a moderated debate.

The speaker sees the motion, its side, the stage it speaks at (opening,
rebuttal, counter, closing), and the last speeches of the transcript. When
the fact-checker failed its previous attempt at this speech, the retry
prompt holds that draft and the checker's reasons: the claims it checked and
why they failed, so the speaker learns what to fix (a bare "no" teaches
nothing). Drafts stay in the seat's own ``drafts`` log; the format publishes
the one that passes.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.transcript import clip, render
from harness.models.structured import StructuredResult
from harness.runtime.context import AgentContext
from harness.store.memory import JsonlLog, SeatMemory
from harness.store.records import DraftRecord, FactCheckRecord, Published, SeatInfo

# What each stage asks of its speaker.
STAGE_TASKS = {
    "opening": "Open the debate: state your case with your two strongest, checkable arguments.",
    "rebuttal": "Rebut the opponent's last speech point by point, with evidence.",
    "counter": "Counter the rebuttal: defend your case where it was attacked and press your advantage.",
    "closing": "Close: weigh the whole debate and say why your side should win.",
}


def speaker_system(seat: SeatInfo) -> str:
    """How a moderated seat is addressed: in its speeches, and in an interview's fork of its view."""
    return f"You are {seat.alias} in a moderated debate, arguing {seat.stance}. {JSON_ONLY}"


class SpeechOutput(BaseModel):
    notes: str = Field(
        min_length=10, max_length=200, description="private preparation, never shown to others"
    )
    speech: str = Field(min_length=40, max_length=600, description="the speech, three to five sentences")


class SpeakerAgent(SeatAgent):
    def __init__(self, ctx: AgentContext, view: SeatMemory) -> None:
        super().__init__(ctx, view)
        self.drafts: JsonlLog[DraftRecord] = view.logs["drafts"]

    def messages(
        self,
        motion: str,
        stage: str,
        round_: int,
        recent: list[Published],
        failed: tuple[DraftRecord, FactCheckRecord] | None,
    ) -> list[dict[str, str]]:
        seat = self.view.seat
        limit = self.ctx.cfg.memory.max_chars_per_item
        system = speaker_system(seat)
        retry = ""
        if failed is not None:
            draft, check = failed
            claims = "; ".join(clip(c, 160) for c in check.claims) or "(none named)"
            # a grounded check's evidence: the passages that contradict the draft
            passages = "".join(f"{line}\n" for line in check.evidence) if check.grounded else ""
            retry = (
                f"The fact-checker FAILED your previous draft of this speech:\n{clip(draft.text, limit)}\n"
                f"Claims it checked: {claims}\nWhy it failed: {clip(check.justification, limit)}\n"
                + (f"The passages that contradict it:\n{passages}" if passages else "")
                + "Rewrite the speech so that every claim is accurate and supported.\n"
            )
        user = (
            f"Motion: {motion}\nSpeech {round_}, stage: {stage}. {STAGE_TASKS[stage]}\n"
            f"Recent speeches:\n{render(recent, limit)}\n{retry}"
            "Write JSON with:\n"
            "- notes: your private preparation, which no one else sees\n"
            "- speech: your speech, three to five sentences"
        )
        return chat(system, user)

    def __call__(
        self,
        motion: str,
        stage: str,
        round_: int,
        attempt: int,
        recent: list[Published],
        failed: tuple[DraftRecord, FactCheckRecord] | None,
    ) -> DraftRecord | None:
        """The draft of attempt ``attempt``; None when no reply validated."""
        call = Call(self.view.seat.role, "speaker", round_, self.view.name, attempt, kind="draft")
        messages = self.messages(motion, stage, round_, recent, failed)

        def record(result: StructuredResult[SpeechOutput]) -> DraftRecord | None:
            if (out := result.value) is None:
                return None  # the schema_failure event says why
            head = call.envelope(self.ctx, result.usage, role=call.role)
            return DraftRecord(**head, stage=stage, notes=out.notes, text=out.speech)

        return ask_once(self.ctx, self.drafts, call, messages, SpeechOutput, record)

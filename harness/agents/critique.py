"""Critique agent: a deliberately hostile critic that approves a draft or
sends it back with feedback, optionally with a revised argument.

Its strictness text comes from the ``critic`` config group, so strictness can
be swept. With ``critic.approve_all`` (the no-critic control) it approves
every draft unread and makes no call; with ``critic.reject_copies`` it rejects,
unasked, a draft repeating a published turn (``harness.store.copies``). A missing draft, or a critic reply that fails validation, becomes a
critique record with ``fallback=True`` under ``critic.on_schema_failure``.
"""

from __future__ import annotations

from functools import partial

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, once
from harness.agents.common import JSON_ONLY, chat
from harness.store.copies import find_copy
from harness.store.records import CritiqueRecord, ThinkingRecord

APPROVED_UNREAD = "approved unread (critic.approve_all: the no-critic control)"


class CritiqueOutput(BaseModel):
    critique_feedback: str = Field(
        min_length=10, max_length=400, description="the main flaw, or why it passes"
    )
    is_approved: bool
    revised_argument: str | None = Field(default=None, min_length=40, max_length=500)


class CritiqueAgent(SeatAgent):
    def messages(self, topic: str, draft: ThinkingRecord) -> list[dict[str, str]]:
        critic = self.ctx.cfg.critic
        system = (
            f"You are a hostile critic reviewing the {self.view.seat.alias} team's argument "
            f"({self.view.seat.stance}). {critic.strictness} {JSON_ONLY}"
        )
        user = (
            f"Motion: {topic}\nDraft argument: {draft.draft}\n"
            "Write JSON with:\n"
            "- critique_feedback: the draft's main flaw, or why it passes\n"
            "- is_approved: true or false\n"
            "- revised_argument: optional, a stronger version of the draft (or null)"
        )
        return chat(system, user)

    def copied(self, draft: ThinkingRecord) -> str | None:
        """With ``critic.reject_copies``, the feedback rejecting a draft that repeats a published turn."""
        critic = self.ctx.cfg.critic
        copy = (
            find_copy(draft.draft, self.view.shared, critic.copy_threshold) if critic.reject_copies else None
        )
        return None if copy is None else f"The draft repeats the published turn {copy.names()}; argue anew."

    def __call__(
        self, topic: str, round_: int, iteration: int, draft: ThinkingRecord | None
    ) -> CritiqueRecord:
        call = Call("critic", "critique", round_, self.view.name, iteration)
        return once(self.view.critique, call.rid, partial(self._review, call, topic, draft))

    def _record(self, call: Call, draft_id: str, **fields: object) -> CritiqueRecord:
        """The critique of ``draft_id``; one no model read has no ``model`` and no usage."""
        where = {"id": call.rid, "round": call.round, "team": call.team, "iteration": call.iteration}
        return CritiqueRecord(**where, role=call.agent, draft_id=draft_id, **fields)  # type: ignore[arg-type]

    def _review(self, call: Call, topic: str, draft: ThinkingRecord | None) -> CritiqueRecord:
        if draft is None:
            return self._record(
                call,
                "none",
                is_approved=False,
                fallback=True,
                feedback="No valid draft was produced; reply with the required JSON fields.",
            )
        if self.ctx.cfg.critic.approve_all:  # the no-critic control: no model reads the draft
            return self._record(call, draft.id, is_approved=True, feedback=APPROVED_UNREAD)
        if (copied := self.copied(draft)) is not None:  # critic.reject_copies: no model call needed
            return self._record(call, draft.id, is_approved=False, feedback=copied)
        result = call.ask(self.ctx, self.messages(topic, draft), CritiqueOutput)
        spec = self.ctx.spec("critic")
        if result.value is None:
            approve = self.ctx.cfg.critic.on_schema_failure == "approve"
            return self._record(
                call,
                draft.id,
                is_approved=approve,
                fallback=True,
                feedback="critic reply failed validation",
                model=spec,
            )
        out = result.value
        return self._record(
            call,
            draft.id,
            is_approved=out.is_approved,
            feedback=out.critique_feedback,
            revised_argument=out.revised_argument,
            model=spec,
            usage=result.usage,
        )

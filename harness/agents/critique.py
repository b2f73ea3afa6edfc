"""Critique agent: a deliberately hostile critic that approves a draft or
sends it back with feedback, optionally with a revised argument.

Its strictness text comes from the ``critic`` config group, so strictness can
be swept. With ``critic.approve_all`` (the no-critic control) it approves
every draft unread and makes no call; with ``critic.reject_copies`` it rejects,
unasked, a draft repeating a published turn (``harness.store.copies``). A missing draft, or a critic reply that fails validation, becomes a
critique record with ``fallback=True`` under ``critic.on_schema_failure``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.engine.context import AgentContext
from harness.store.copies import find_copy
from harness.store.memory import SeatMemory
from harness.store.records import CritiqueRecord, ThinkingRecord, record_id

APPROVED_UNREAD = "approved unread (critic.approve_all: the no-critic control)"


class CritiqueOutput(BaseModel):
    critique_feedback: str = Field(
        min_length=10, max_length=400, description="the main flaw, or why it passes"
    )
    is_approved: bool
    revised_argument: str | None = Field(default=None, min_length=40, max_length=500)


class CritiqueAgent:
    def __init__(self, ctx: AgentContext, view: SeatMemory) -> None:
        self.ctx = ctx
        self.view = view

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
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _record(self, round_: int, iteration: int, draft_id: str, **fields: object) -> CritiqueRecord:
        team = self.view.name
        record = CritiqueRecord(
            id=record_id(round_, team, "critique", iteration),
            round=round_,
            team=team,
            role="critique",
            iteration=iteration,  # type: ignore[arg-type]
            draft_id=draft_id,
            **fields,  # type: ignore[arg-type]
        )
        return self.view.critique.append(record)

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
        landed = self.view.critique.get(record_id(round_, self.view.name, "critique", iteration))
        if landed is not None:
            return landed  # replay after resume: the record already landed, reuse it
        if draft is None:
            return self._record(
                round_,
                iteration,
                "none",
                is_approved=False,
                fallback=True,
                feedback="No valid draft was produced; reply with the required JSON fields.",
            )
        if self.ctx.cfg.critic.approve_all:  # the no-critic control: no model reads the draft
            return self._record(round_, iteration, draft.id, is_approved=True, feedback=APPROVED_UNREAD)
        if (copied := self.copied(draft)) is not None:  # critic.reject_copies: no model call needed
            return self._record(round_, iteration, draft.id, is_approved=False, feedback=copied)
        team = self.view.name
        result = self.ctx.ask(
            "critic",
            "critique",
            self.messages(topic, draft),
            CritiqueOutput,
            round_=round_,
            team=team,
            iteration=iteration,
        )
        spec = self.ctx.spec("critic")
        if result.value is None:
            approve = self.ctx.cfg.critic.on_schema_failure == "approve"
            return self._record(
                round_,
                iteration,
                draft.id,
                is_approved=approve,
                fallback=True,
                feedback="critic reply failed validation",
                model=spec,
            )
        out = result.value
        return self._record(
            round_,
            iteration,
            draft.id,
            is_approved=out.is_approved,
            feedback=out.critique_feedback,
            revised_argument=out.revised_argument,
            model=spec,
            usage=result.usage,
        )

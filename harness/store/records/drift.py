"""The drift format's own records: a team's persona, the critic's review of
its draft, and the approved argument it publishes. Its events (``loop_lock``
among them) are the store's own (``records.calls``)."""

from __future__ import annotations

from typing import Literal

from harness.store.records.core import Envelope, Published


class PersonaRecord(Envelope):
    kind: Literal["persona"] = "persona"
    # planted: taken as given from ``personas.<seat>``, with no model call
    decision: Literal["keep", "evolve", "initial", "fallback", "planted"]
    persona: str
    rationale: str
    version: int


class CritiqueRecord(Envelope):
    kind: Literal["critique"] = "critique"
    is_approved: bool
    feedback: str
    revised_argument: str | None = None
    draft_id: str
    fallback: bool = False

    def counted(self) -> dict[str, int]:
        return {"approvals": int(self.is_approved), "rejections": int(not self.is_approved)}


class ArgumentRecord(Published):
    """An approved argument: the only kind that enters shared memory."""

    kind: Literal["argument"] = "argument"
    draft_id: str
    critique_id: str | None
    source: Literal["approved", "revised", "loop_lock"]

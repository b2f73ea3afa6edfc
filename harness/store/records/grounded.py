"""The grounded format's own records and events: a published turn with its
checked citations, and a person's note for the synthesiser (chat mode)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.store.records.calls import register_event
from harness.store.records.core import Envelope, Published
from harness.store.records.shared import Citation

register_event(
    "note",  # a person's note for the synthesiser (chat mode)
    "turn_skipped",  # a grounded turn with no valid reply after its retries: nothing published
)


class CitedTurnRecord(Published):
    """A grounded debate's published turn: its citations, checked, and
    whether the hard length cut applied (the full text stays in the seat's
    ``drafts`` log, ``draft_id``). ``model`` is ``human`` for a person's turn."""

    kind: Literal["cited_turn"] = "cited_turn"
    side: str
    draft_id: str
    citations: list[Citation] = Field(default_factory=list)
    searches: list[str] = Field(default_factory=list)  # SearchRecord ids (in the seat's own log)
    hits: int = 0  # passages its searches returned
    truncated: bool = False


class NoteRecord(Envelope):
    """A person's argument for the synthesiser (chat mode's ``/note``), public."""

    kind: Literal["note"] = "note"
    text: str

"""The panel format's own records: the role cards, each analyst's position,
the round's summary and the judge's decision to go on or synthesise."""

from __future__ import annotations

from typing import Literal

from harness.store.records.core import Envelope, Published


class PositionRecord(Published):
    """An analyst's statement in a panel round (``phase``: blind or debate)."""

    kind: Literal["position"] = "position"
    notes_id: str | None = None  # the private notes it was written with
    fallback: bool = False


class RoleCardRecord(Envelope):
    """A seat's role for this topic, written by the role generator (public)."""

    kind: Literal["role_card"] = "role_card"
    name: str
    expertise: str
    mandate: str
    disruptor: bool = False
    fallback: bool = False


class SummaryRecord(Envelope):
    """A neutral summary of one round (public)."""

    kind: Literal["summary"] = "summary"
    text: str
    fallback: bool = False


class DecisionRecord(Envelope):
    """A judge's call after a round: stop and synthesise, or go on (public)."""

    kind: Literal["decision"] = "decision"
    decision: Literal["SYNTHESIZE", "CONTINUE"]
    reason: str
    tension: str
    fallback: bool = False

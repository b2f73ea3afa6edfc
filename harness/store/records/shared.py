"""Record classes more than one format writes: a seat's private thinking
(drift, panel), a drafted speech or turn and the searches behind it
(moderated, grounded), a verdict (moderated, grounded) and a closing
synthesis (panel, grounded)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.store.records.core import Envelope, Seat


class ThinkingRecord(Envelope):
    kind: Literal["thinking"] = "thinking"
    scratchpad: str
    draft: str
    persona_id: str | None = None


class Citation(BaseModel):
    """A passage a turn cites, the span it quotes from it, and what the
    citation checker found: ``supported`` (the passage holds the quote,
    verbatim or after normalising whitespace and case), ``unsupported`` (the
    passage exists but lacks it) or ``unknown`` (no passage has that id)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    quote: str = ""
    status: Literal["supported", "unsupported", "unknown"] | None = None  # None: not checked yet


class DraftRecord(Envelope):
    """A speech as its seat drafted it, before any check (private to the seat).
    A grounded turn's draft keeps its citations and its full, uncut text."""

    kind: Literal["draft"] = "draft"
    stage: str
    notes: str
    text: str
    citations: list[Citation] = Field(default_factory=list)
    searches: list[str] = Field(default_factory=list)  # the SearchRecord ids it was written after


class Hit(BaseModel):
    """One passage a search returned, as the arguer saw it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    text: str
    source: str
    score: float


class SearchRecord(Envelope):
    """One call of the search tool by a seat (private to the seat): what it
    asked, what came back, how long it took. A resumed run reads the hits
    from here instead of asking the server again."""

    kind: Literal["search"] = "search"
    tool: Literal["search", "summarize"] = "search"
    query: str
    collection: str
    k: int
    hits: list[Hit] = Field(default_factory=list)
    summary: str | None = None  # the summarize tool's reply
    latency_s: float = 0.0


class VerdictRecord(Envelope):
    """Who won and why: the judge's verdict, or the moderator's on a disqualification (public)."""

    kind: Literal["verdict"] = "verdict"
    by: Literal["judge", "moderator"]
    winner: Seat | None  # None: no winner could be named (a judge reply that never validated)
    scores: dict[Seat, dict[str, int]] = Field(default_factory=dict)  # seat -> criterion -> score
    justification: str
    disqualified: Seat | None = None
    fallback: bool = False


class SynthesisRecord(Envelope):
    """The closing synthesis, and why the debate closed (public)."""

    kind: Literal["synthesis"] = "synthesis"
    text: str
    close_reason: str
    fallback: bool = False

"""The moderated format's own records and events: speeches, the
fact-checker's reviews (and a grounded check's rulings), and what the
moderator enforces: strikes, the speech cap, disqualification."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.store.records.calls import register_event
from harness.store.records.core import Envelope, Published
from harness.store.records.shared import Citation

register_event(
    "strike",  # a failed fact-check counts against the speaker's side
    "speech_cap",  # a speech failed its checks max_speech_retries + 1 times
    "disqualify",  # a side reached max_strikes
    "positions",  # what each side argues, recorded before the first speech
)


class SpeechRecord(Published):
    """A moderated debate's speech (``phase`` is its stage: opening,
    rebuttal, counter, closing; ``iteration`` the attempt that was published)."""

    kind: Literal["speech"] = "speech"
    draft_id: str
    fact_check_id: str | None = None
    # passed: its fact-check passed; unchecked: its stage is not checked;
    # cap: published after its last failed check (format.on_speech_cap)
    source: Literal["passed", "unchecked", "cap"] = "passed"


class Ruling(BaseModel):
    """A grounded fact-check's ruling on one claim: the search made for it
    (in ``public/searches``), and the passage and quote the ruling rests on,
    marked by the citation checker (None: it cites nothing, as a claim not found)."""

    model_config = ConfigDict(extra="forbid")

    claim: str
    ruling: Literal["supported", "contradicted", "not_found"]
    reason: str = ""
    search_id: str
    citation: Citation | None = None


class FactCheckRecord(Envelope):
    """The fact-checker's review of one draft (public; ``team`` is the seat checked)."""

    kind: Literal["fact_check"] = "fact_check"
    stage: str
    draft_id: str
    verdict: Literal["pass", "fail"]
    claims: list[str]
    justification: str
    evidence: list[str]
    # grounded: it searched a collection and ``passages`` are the ids it cites;
    # otherwise it judged from the model alone
    grounded: bool = False
    passages: list[str] = Field(default_factory=list)
    strike: int = 0  # the side's strikes after this check (0 for a pass)
    fallback: bool = False
    # grounded: one ruling per claim, the SearchRecord ids and the passages they returned
    rulings: list[Ruling] = Field(default_factory=list)
    searches: list[str] = Field(default_factory=list)
    hits: int = 0

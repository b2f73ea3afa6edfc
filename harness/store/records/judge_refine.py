"""The judge_refine format's own records: each side's turn on the current
motion, the judge's evaluation and synthesis, and the motion it changes to."""

from __future__ import annotations

from typing import Literal

from harness.store.records.core import Envelope, Published


class TurnRecord(Published):
    """A judge-refined debate's turn (``phase``: argument or answer), with
    the motion it was made on and the run's original motion."""

    kind: Literal["turn"] = "turn"
    motion: str
    original_motion: str
    fallback: bool = False


class EvaluationRecord(Envelope):
    """A judge-refined round's evaluation, and the synthesis that becomes the next motion (public)."""

    kind: Literal["evaluation"] = "evaluation"
    stage: str = "evaluation"  # so the judge's usage is counted per stage too
    evaluation: str
    synthesis: str
    motion: str
    original_motion: str
    final: bool = False
    fallback: bool = False


class MotionRecord(Envelope):
    """The motion changed: round ``round`` argues ``motion`` (public)."""

    kind: Literal["motion"] = "motion"
    motion: str
    previous: str
    original_motion: str
    evaluation_id: str

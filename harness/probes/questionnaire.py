"""Checkpoint interviews' questionnaire (after InCharacter, Wang et al., ACL
2024: ask the model about itself rather than read its passive text): the
items a run asks, loaded from ``interviews.*`` of the validated config
(``conf/interviews/<name>.yaml``, or the file ``interviews.questionnaire``
names), and the ids their answers land under.

At the end of each round in ``interviews.rounds``, every seat the model plays
is asked each item in a fork of its own view (``harness.agents.interview``);
the answers land in ``<seat>/interviews.jsonl`` and nowhere else. With
``interviews.rounds`` empty nothing is asked and no prompt changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.schema_sections import InterviewsConfig
from harness.store.records import record_id

INTERVIEW_ROLE = "interview"  # the role of every record an interview writes
INTERVIEW_LOG = "interviews"  # each interviewed seat's private log: <seat>/interviews.jsonl
# Modules whose code shapes an interview's prompts: fingerprinted when interviews are on.
INTERVIEW_MODULES = ("harness.agents.interview", "harness.probes.questionnaire")


@dataclass(frozen=True)
class Item:
    """One questionnaire item as a run asks it."""

    name: str
    question: str
    aspect: str = ""


def questionnaire(cfg: InterviewsConfig) -> tuple[Item, ...]:
    """The items a run asks, in questionnaire order; none when interviews are off."""
    if not cfg.on:
        return ()
    return tuple(Item(name, spec.question, spec.aspect) for name, spec in cfg.items.items())


def interview_id(round_: int, seat: str, index: int, item: str) -> str:
    """An answer's id, e.g. ``r0010.pros.interview.i2.stance``: ``iteration`` is the
    item's place in the questionnaire, so its prompt, reply and seed differ from
    every other item's of the same interview."""
    return record_id(round_, seat, INTERVIEW_ROLE, index, item)

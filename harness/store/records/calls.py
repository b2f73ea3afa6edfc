"""The records every format writes: the prompts and replies of its model
calls, behavioural probes, checkpoint interviews, and events, whose names are open.

An event's name must be declared before a record of it is made or parsed:
the store's own events below, each format's next to its records
(``records/<format>.py``), a plugin's with ``register_event``. An undeclared
name fails validation, as the closed ``Literal`` it replaces did, so a typo in
an ``emit`` or an edited log is caught where it happens, not counted as an
event no check or count knows. The price: a process that reads a plugin's
run must import the plugin first, as it must to parse the plugin's records.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from harness.store.records.core import Envelope, ErrorInfo

_EVENTS: set[str] = set()


def register_event(*names: str) -> None:
    """Declare event names, so ``EventRecord(event=name)`` validates; a name
    declared again (by another format, say) stays declared once."""
    for name in names:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"event name {name!r}: must be an identifier, as in emit('name', ...)")
    _EVENTS.update(names)


def declared_events() -> frozenset[str]:
    """Every event name declared so far."""
    return frozenset(_EVENTS)


UNDECLARED = "undeclared_event"  # the error type ``parse_record`` turns into its one line


def _declared(name: str) -> str:
    if name not in _EVENTS:
        raise PydanticCustomError(
            UNDECLARED,
            "event {name} is not declared (a format declares its own with register_event)",
            {"name": repr(name)},
        )
    return name


# An event's name: any declared one (a plain str to the type checker).
EventKind = Annotated[str, AfterValidator(_declared)]

# The events the store, the models and the engine write, whatever the format.
register_event(
    "retry",
    "schema_failure",
    "loop_lock",
    "error",
    "resume",
    "interrupt",
    "topic",
    "close",
    "warning",  # a setting that weakens the run (a judge who is also a debater)
    "search_restart",  # the search server was restarted after a fault
    "replay_mismatch",  # a resumed call rebuilt a request other than the one its kept reply answered
    "budget",  # the next call could cross budget.usd / budget.tokens: the run stopped before it
    "cut",  # a length cap cut a reply's field: it ends at its last sentence ({field, dropped_chars, cap})
    "copy",  # a published turn repeats an earlier one ({copies, seat, round, similarity})
    "repeat",  # a published turn writes one of its own sentences again ({turn, sentence, times, share})
    "quarantine",  # a resume moved a log's torn last line to <log>.quarantine ({log, began})
)

# The events RunCounts counts in a field of its own (beside ``by_event``).
_COUNTED = {"cut": "cuts", "copy": "copies", "repeat": "repeats"}


class PromptRecord(Envelope):
    """The exact messages an agent was shown, kept in its own team's folder."""

    kind: Literal["prompt"] = "prompt"
    messages: list[dict[str, str]]


class ReplyRecord(Envelope):
    """One model reply as it came back, valid or not, kept in the asking
    seat's folder (``public/`` for roles with no seat). A resumed run replays
    it instead of calling the model again, so a crash costs no call twice.
    ``usage`` is this one call's; counts take it from the record (or the
    schema-failure event) the reply ended in, never from here."""

    kind: Literal["reply"] = "reply"
    attempt: int  # which try of one structured call (0, then each repair)
    request_sha: str  # the request replayed must be the request made
    text: str


class ProbeRecord(Envelope):
    """A behavioural probe (``harness.probes``), asked in a fork of a team's
    view after its turn: the question, the reply and the checker's verdict.
    Private to the team (``<team>/probes.jsonl``); ``iteration`` is the
    probe's place in the run's probe list. ``passed`` and ``reply`` are None
    when no reply validated. Its usage counts as ``probe_*``, not the debate's."""

    kind: Literal["probe"] = "probe"
    probe: str
    instruction: str
    question: str
    checker: str
    params: dict[str, Any] = Field(default_factory=dict)
    reply: str | None
    passed: bool | None
    persona_id: str | None = None  # the persona the team held when asked


class InterviewRecord(Envelope):
    """One answer of a checkpoint interview (``harness.interviews``): a
    questionnaire item asked of a seat in a fork of its view at the end of a
    round. Private to the seat (``<seat>/interviews.jsonl``); ``iteration`` is
    the item's place in the questionnaire. ``answer`` is None when no reply
    validated. Its usage counts as ``interview_*``, not the debate's."""

    kind: Literal["interview"] = "interview"
    item: str
    aspect: str = ""
    question: str
    answer: str | None
    persona_id: str | None = None  # the persona the seat held when asked


class EventRecord(Envelope):
    kind: Literal["event"] = "event"
    event: EventKind
    detail: str = ""
    error: ErrorInfo | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    def counted(self) -> dict[str, int]:
        return {_COUNTED[self.event]: 1} if self.event in _COUNTED else {}

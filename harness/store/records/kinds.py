"""The record kinds ``parse_record`` reads: every built-in format's, and any
a format defined outside the package adds with ``register_record``.

Lines are validated against one union discriminated on ``kind``. It starts
as ``Record``, the built-in kinds, and is rebuilt when a kind is registered,
so parsing a built-in kind costs what it did when the union was closed.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any, Literal, TypeVar, cast, get_args, get_origin

from pydantic import Field, TypeAdapter, ValidationError

from harness.plugins import import_record_modules
from harness.store.records.calls import (
    UNDECLARED,
    EventRecord,
    InterviewRecord,
    ProbeRecord,
    PromptRecord,
    ReplyRecord,
)
from harness.store.records.core import Envelope
from harness.store.records.drift import ArgumentRecord, CritiqueRecord, PersonaRecord
from harness.store.records.grounded import CitedTurnRecord, NoteRecord
from harness.store.records.judge_refine import EvaluationRecord, MotionRecord, TurnRecord
from harness.store.records.moderated import FactCheckRecord, SpeechRecord
from harness.store.records.panel import DecisionRecord, PositionRecord, RoleCardRecord, SummaryRecord
from harness.store.records.shared import (
    DraftRecord,
    SearchRecord,
    SynthesisRecord,
    ThinkingRecord,
    VerdictRecord,
)

E = TypeVar("E", bound=Envelope)

# The built-in kinds, as the type checker knows them. A registered kind is
# parsed too, as its own class: callers tell kinds apart with isinstance.
Record = Annotated[
    PersonaRecord
    | ThinkingRecord
    | CritiqueRecord
    | ArgumentRecord
    | PositionRecord
    | SpeechRecord
    | TurnRecord
    | DraftRecord
    | SearchRecord
    | CitedTurnRecord
    | NoteRecord
    | FactCheckRecord
    | VerdictRecord
    | EvaluationRecord
    | MotionRecord
    | RoleCardRecord
    | SummaryRecord
    | DecisionRecord
    | SynthesisRecord
    | PromptRecord
    | ReplyRecord
    | ProbeRecord
    | InterviewRecord
    | EventRecord,
    Field(discriminator="kind"),
]


class UnknownKindError(ValueError):
    """A line whose ``kind`` no format registered, or whose event no format declared."""


def kind_of(cls: type[Envelope]) -> str:
    """The kind a record class writes: its ``kind: Literal["<kind>"] = "<kind>"`` field."""
    field = cls.model_fields.get("kind")
    args = get_args(field.annotation) if field is not None else ()
    if (
        field is None
        or get_origin(field.annotation) is not Literal
        or len(args) != 1
        or field.default != args[0]
    ):
        raise ValueError(f"{cls.__name__}: a record class needs a field kind: Literal['<kind>'] = '<kind>'")
    return str(args[0])


_KINDS: dict[str, type[Envelope]] = {kind_of(cls): cls for cls in get_args(get_args(Record)[0])}
_RECORD_ADAPTER: TypeAdapter[Record] = TypeAdapter(Record)


def register_record(cls: type[E]) -> type[E]:
    """Make ``parse_record`` read ``cls``'s kind (usable as a class decorator).
    Registering the same class again does nothing; another class under a
    kind already taken is a one-line ``ValueError``."""
    global _RECORD_ADAPTER
    if not (isinstance(cls, type) and issubclass(cls, Envelope)):
        raise TypeError(f"{cls!r}: a record class extends harness.store.records.Envelope")
    kind = kind_of(cls)
    known = _KINDS.get(kind)
    if known is cls:
        return cls
    if known is not None:
        raise ValueError(f"record kind {kind!r}: {known.__name__} is already registered under it")
    _KINDS[kind] = cls
    union: Any = functools.reduce(operator.or_, _KINDS.values())
    _RECORD_ADAPTER = cast("TypeAdapter[Record]", TypeAdapter(Annotated[union, Field(discriminator="kind")]))
    return cls


def registered_kinds() -> tuple[str, ...]:
    """Every kind ``parse_record`` reads, built-in ones first."""
    return tuple(_KINDS)


def parse_record(line: str | bytes) -> Record:
    """Parse one JSONL line into its typed record (raises on invalid data).
    A kind or event no format made known imports the installed plugins'
    record modules, once per process (``harness.plugins``), and is tried again."""
    try:
        return _RECORD_ADAPTER.validate_json(line)
    except ValidationError as exc:
        if (unknown := _unknown(exc)) is None:
            raise
        if _load_plugins():
            return parse_record(line)
        raise unknown from None


_PLUGINS_LOADED = False


def _load_plugins() -> bool:
    """Import the plugins' record modules if not yet done; whether anything was imported."""
    global _PLUGINS_LOADED
    if _PLUGINS_LOADED:
        return False
    _PLUGINS_LOADED = True
    return bool(import_record_modules())


def _unknown(exc: ValidationError) -> UnknownKindError | None:
    """One line for a kind or event no format made known; None for other errors."""
    first = exc.errors()[0]
    if first["type"] == "union_tag_invalid":
        tag = first.get("ctx", {}).get("tag")
        return UnknownKindError(
            f"kind: {tag!r} is not a registered record kind (a format registers its own with register_record)"
        )
    if first["type"] == UNDECLARED:
        name = first.get("ctx", {}).get("name")
        return UnknownKindError(
            f"event: {name} is not a declared event (a format declares its own with register_event)"
        )
    return None

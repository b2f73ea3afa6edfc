"""Open record kinds and event names (issue 25): a format defined outside the
package registers its own record classes and declares its own events; a
kind nobody registered, or an event nobody declared, fails in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from harness.store.jsonl import parse_line
from harness.store.memory import JsonlLog
from harness.store.reader import read_records
from harness.store.records import (
    Envelope,
    EventRecord,
    PersonaRecord,
    UnknownKindError,
    declared_events,
    parse_record,
    register_event,
    register_record,
    registered_kinds,
)

# The names EventKind's closed Literal held: all still declared, by the store or a format.
FORMER_EVENTS = {
    "retry",
    "schema_failure",
    "loop_lock",
    "error",
    "resume",
    "interrupt",
    "topic",
    "close",
    "strike",
    "speech_cap",
    "disqualify",
    "warning",
    "positions",
    "search_restart",
    "note",
    "turn_skipped",
    "replay_mismatch",
    "budget",
}


@register_record
class MemoRecord(Envelope):
    kind: Literal["test_memo"] = "test_memo"
    text: str


register_event("test_memo_event")


def memo(n: int) -> MemoRecord:
    return MemoRecord(id=f"r0001.all.memo.i{n}", round=1, role="memo", text=f"memo {n}")


def test_a_registered_kind_round_trips_through_parse_record_and_the_reader(tmp_path: Path) -> None:
    path = tmp_path / "memos.jsonl"
    log = JsonlLog[MemoRecord](path)
    written = [log.append(memo(n)) for n in range(3)]
    lines = path.read_text().splitlines()
    assert [parse_record(line) for line in lines] == written
    assert all(type(parse_record(line)) is MemoRecord for line in lines)
    notes: list[str] = []
    assert list(read_records(path, notes)) == written and notes == []
    assert [r.id for r in JsonlLog[MemoRecord](path)] == [r.id for r in written]  # a log reopens it
    # the built-in kinds parse as before, after the union was rebuilt
    persona = PersonaRecord(
        id="p", round=1, role="persona", decision="keep", persona="x", rationale="y", version=1
    )
    assert parse_record(persona.model_dump_json()) == persona
    assert "test_memo" in registered_kinds() and registered_kinds()[:2] == ("persona", "thinking")


def test_registering_again_is_a_no_op_and_a_taken_kind_is_refused() -> None:
    assert register_record(MemoRecord) is MemoRecord

    class OtherMemo(Envelope):
        kind: Literal["test_memo"] = "test_memo"

    class OtherTurn(Envelope):
        kind: Literal["turn"] = "turn"

    with pytest.raises(
        ValueError, match="^record kind 'test_memo': MemoRecord is already registered under it$"
    ):
        register_record(OtherMemo)
    with pytest.raises(ValueError, match="^record kind 'turn': TurnRecord is already registered under it$"):
        register_record(OtherTurn)

    class NoKind(Envelope):
        text: str

    with pytest.raises(ValueError, match="^NoKind: a record class needs a field kind: Literal"):
        register_record(NoKind)

    class NotARecord(BaseModel):
        kind: Literal["loose"] = "loose"

    with pytest.raises(TypeError, match="a record class extends harness.store.records.Envelope"):
        register_record(NotARecord)  # type: ignore[type-var]


def test_an_unregistered_kind_fails_in_one_line(tmp_path: Path) -> None:
    line = memo(0).model_dump_json().replace('"test_memo"', '"test_unknown"')
    with pytest.raises(UnknownKindError, match="^kind: 'test_unknown' is not a registered record kind"):
        parse_record(line)
    error = parse_line(0, 0, line.encode()).error
    assert error is not None and error.startswith(
        "UnknownKindError: kind: 'test_unknown' is not a registered"
    )
    path = tmp_path / "memos.jsonl"
    path.write_text(memo(1).model_dump_json() + "\n" + line + "\n")
    notes: list[str] = []
    assert [r.id for r in read_records(path, notes)] == [memo(1).id]
    assert notes == [f"{path}: line 2 unreadable ({error}); read the lines before it"]


def test_an_undeclared_event_fails_where_it_is_made_and_where_it_is_read() -> None:
    assert declared_events() >= FORMER_EVENTS
    with pytest.raises(ValidationError, match="event 'test_no_such_event' is not declared"):
        EventRecord(id="e", round=1, role="x", event="test_no_such_event")
    line = EventRecord(id="e", round=1, role="x", event="test_memo_event").model_dump_json()
    assert parse_record(line).event == "test_memo_event"  # type: ignore[union-attr]
    undeclared = line.replace("test_memo_event", "test_no_such_event")
    with pytest.raises(UnknownKindError, match="^event: 'test_no_such_event' is not a declared event"):
        parse_record(undeclared)
    register_event("test_memo_event")  # declared again: still once
    assert "test_memo_event" in declared_events()
    with pytest.raises(ValueError, match="^event name 'sign off': must be an identifier"):
        register_event("sign off")

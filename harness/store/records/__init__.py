"""The one typed, versioned record family written by every run.

Every line of every memory file is one of these records, serialised as JSON.
Readers (resume, verify, analysis) parse lines back through ``parse_record``.
The package holds one module per part: ``core`` (the envelope, usage, ids),
``calls`` (prompts, replies, probes, interviews, events and their open names), ``run``
(manifest and snapshots), ``shared`` (kinds several formats write) and one
module per format for the kinds only it writes. ``kinds`` holds the registry
``parse_record`` reads: a format defined outside the package adds its own
record classes with ``register_record`` and its event names with
``register_event`` (docs/adding-a-format.md). Every name is re-exported here.
"""

from harness.store.records.calls import (
    EventKind,
    EventRecord,
    InterviewRecord,
    ProbeRecord,
    PromptRecord,
    ReplyRecord,
    declared_events,
    register_event,
)
from harness.store.records.core import (
    SCHEMA_VERSION,
    Envelope,
    ErrorInfo,
    ErrorKind,
    Published,
    Seat,
    Usage,
    add_billed,
    add_cost,
    record_id,
    utcnow,
)
from harness.store.records.drift import ArgumentRecord, CritiqueRecord, PersonaRecord
from harness.store.records.grounded import CitedTurnRecord, NoteRecord
from harness.store.records.judge_refine import EvaluationRecord, MotionRecord, TurnRecord
from harness.store.records.kinds import (
    Record,
    UnknownKindError,
    kind_of,
    parse_record,
    register_record,
    registered_kinds,
)
from harness.store.records.moderated import FactCheckRecord, Ruling, SpeechRecord
from harness.store.records.panel import DecisionRecord, PositionRecord, RoleCardRecord, SummaryRecord
from harness.store.records.run import (
    FOLDER_VERSION,
    HistoryEntry,
    Lineage,
    LogPosition,
    RunCounts,
    RunLayout,
    RunManifest,
    RunStatus,
    SeatInfo,
    Snapshot,
)
from harness.store.records.shared import (
    Citation,
    DraftRecord,
    Hit,
    SearchRecord,
    SynthesisRecord,
    ThinkingRecord,
    VerdictRecord,
)

__all__ = [
    "FOLDER_VERSION",
    "SCHEMA_VERSION",
    "ArgumentRecord",
    "Citation",
    "CitedTurnRecord",
    "CritiqueRecord",
    "DecisionRecord",
    "DraftRecord",
    "Envelope",
    "ErrorInfo",
    "ErrorKind",
    "EvaluationRecord",
    "EventKind",
    "EventRecord",
    "FactCheckRecord",
    "HistoryEntry",
    "InterviewRecord",
    "Lineage",
    "Hit",
    "LogPosition",
    "MotionRecord",
    "NoteRecord",
    "PersonaRecord",
    "PositionRecord",
    "ProbeRecord",
    "PromptRecord",
    "Published",
    "Record",
    "ReplyRecord",
    "RoleCardRecord",
    "Ruling",
    "RunCounts",
    "RunLayout",
    "RunManifest",
    "RunStatus",
    "SearchRecord",
    "Seat",
    "SeatInfo",
    "Snapshot",
    "SpeechRecord",
    "SummaryRecord",
    "SynthesisRecord",
    "ThinkingRecord",
    "TurnRecord",
    "UnknownKindError",
    "Usage",
    "VerdictRecord",
    "add_billed",
    "add_cost",
    "declared_events",
    "kind_of",
    "parse_record",
    "record_id",
    "registered_kinds",
    "register_event",
    "register_record",
    "utcnow",
]

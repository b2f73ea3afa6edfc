"""The one typed, versioned record family written by every run.

Every line of every memory file is one of these records, serialised as JSON.
Readers (resume, verify, analysis) parse lines back through ``parse_record``,
so a field added later gets a default and ``SCHEMA_VERSION`` goes up.
Errors are stored as data (``ErrorInfo``), never as free text alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

SCHEMA_VERSION = 1

Team = Literal["pros", "cons"]
ErrorKind = Literal["transient", "rate_limit", "fatal", "validation"]
EventKind = Literal[
    "retry",
    "schema_failure",
    "loop_lock",
    "error",
    "resume",
    "interrupt",
    "topic",
]


def utcnow() -> datetime:
    return datetime.now(UTC)


class ErrorInfo(BaseModel):
    """An error captured as data: what kind, which exception, what it said."""

    kind: ErrorKind
    type: str
    message: str


class Usage(BaseModel):
    """Cost of one model call (or of several, summed over repairs and retries)."""

    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            latency_s=self.latency_s + other.latency_s,
            calls=self.calls + other.calls,
        )


class Envelope(BaseModel):
    """Fields every record carries, whatever its kind.

    ``id`` is deterministic (round, team, role, iteration, kind), so replaying a
    node after a crash produces the same id and the log refuses a second copy.
    ``seq`` and ``prev_hash`` are filled by the log at append time and chain
    each file's records together.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    seq: int = -1
    prev_hash: str | None = None
    ts: datetime = Field(default_factory=utcnow)
    round: int
    team: Team | None = None
    role: str
    iteration: int = 0
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)


class PersonaRecord(Envelope):
    kind: Literal["persona"] = "persona"
    decision: Literal["keep", "evolve", "initial", "fallback"]
    persona: str
    rationale: str
    version: int


class ThinkingRecord(Envelope):
    kind: Literal["thinking"] = "thinking"
    scratchpad: str
    draft: str
    persona_id: str | None = None


class CritiqueRecord(Envelope):
    kind: Literal["critique"] = "critique"
    is_approved: bool
    feedback: str
    revised_argument: str | None = None
    draft_id: str
    fallback: bool = False


class ArgumentRecord(Envelope):
    """An approved argument: the only kind that enters shared memory."""

    kind: Literal["argument"] = "argument"
    text: str
    draft_id: str
    critique_id: str | None
    source: Literal["approved", "revised", "loop_lock"]


class PromptRecord(Envelope):
    """The exact messages an agent was shown, kept in its own team's folder."""

    kind: Literal["prompt"] = "prompt"
    messages: list[dict[str, str]]


class EventRecord(Envelope):
    kind: Literal["event"] = "event"
    event: EventKind
    detail: str = ""
    error: ErrorInfo | None = None
    data: dict[str, Any] = Field(default_factory=dict)


Record = Annotated[
    PersonaRecord | ThinkingRecord | CritiqueRecord | ArgumentRecord | PromptRecord | EventRecord,
    Field(discriminator="kind"),
]
_RECORD_ADAPTER: TypeAdapter[Record] = TypeAdapter(Record)


def parse_record(line: str | bytes) -> Record:
    """Parse one JSONL line into its typed record (raises on invalid data)."""
    return _RECORD_ADAPTER.validate_json(line)


def record_id(round_: int, team: str | None, role: str, iteration: int, *extra: object) -> str:
    """Deterministic, human-readable record id, e.g. ``r0003.pros.critique.i1``."""
    parts = [f"r{round_:04d}", team or "all", role, f"i{iteration}"]
    parts += [str(e) for e in extra]
    return ".".join(parts)


RunStatus = Literal["running", "completed", "failed", "interrupted"]


class RunCounts(BaseModel):
    rounds_completed: int = 0
    model_calls: int = 0
    approvals: int = 0
    rejections: int = 0
    loop_locks: int = 0
    schema_failures: int = 0
    retries: int = 0
    published: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: RunCounts) -> RunCounts:
        # rounds_completed is a position, not a sum: the later value wins
        summed = {k: getattr(self, k) + getattr(other, k) for k in type(self).model_fields}
        summed["rounds_completed"] = max(self.rounds_completed, other.rounds_completed)
        return RunCounts(**summed)


class HistoryEntry(BaseModel):
    ts: datetime = Field(default_factory=utcnow)
    action: Literal["start", "resume", "complete", "fail", "interrupt", "resume_forced"]
    detail: str = ""


class LogPosition(BaseModel):
    """A point in a log: ``count`` records (``offset`` bytes) precede it, and
    the last of them hashes to ``last_hash``."""

    model_config = ConfigDict(frozen=True)

    offset: int = 0
    count: int = 0
    last_hash: str | None = None


class Snapshot(BaseModel):
    """``snapshots/round-NNNN.json``: what resuming after round N needs.

    It holds positions in the memory files, never their content, so its size
    does not grow with the round number.
    """

    schema_version: int = SCHEMA_VERSION
    round: int  # rounds completed
    ts: datetime = Field(default_factory=utcnow)
    state: dict[str, Any]  # the graph state to continue from
    logs: dict[str, LogPosition]  # each file's end at snapshot time
    window: dict[str, LogPosition]  # where resume starts reading each file
    counts: RunCounts
    seed: int
    # No RNG object to save: every call's seed is derived from these parts.
    seed_derivation: str = "sha256(seed|round|team|agent|iteration)[:4]"
    fingerprint: str


class RunManifest(BaseModel):
    """``manifest.json``: the run's status and provenance, rewritten atomically."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    format: str
    status: RunStatus = "running"
    stop_reason: str | None = None
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    wall_s: float = 0.0
    seed: int
    topic: str | None = None
    git_commit: str | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    model_files: dict[str, str] = Field(default_factory=dict)
    model_specs: dict[str, str] = Field(default_factory=dict)
    counts: RunCounts = Field(default_factory=RunCounts)
    error: ErrorInfo | None = None
    history: list[HistoryEntry] = Field(default_factory=list)

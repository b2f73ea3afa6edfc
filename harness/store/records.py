"""The one typed, versioned record family written by every run.

Every line of every memory file is one of these records, serialised as JSON.
Readers (resume, verify, analysis) parse lines back through ``parse_record``,
so a field added later gets a default and ``SCHEMA_VERSION`` goes up.
Errors are stored as data (``ErrorInfo``), never as free text alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

SCHEMA_VERSION = 1

# A seat's name (a team, an analyst): the formats define them, records only carry them.
Seat = str
ErrorKind = Literal["transient", "rate_limit", "fatal", "validation"]
EventKind = Literal[
    "retry",
    "schema_failure",
    "loop_lock",
    "error",
    "resume",
    "interrupt",
    "topic",
    "close",
    "strike",  # a failed fact-check counts against the speaker's side
    "speech_cap",  # a speech failed its checks max_speech_retries + 1 times
    "disqualify",  # a side reached max_strikes
    "warning",  # a setting that weakens the run (a judge who is also a debater)
    "positions",  # what each side argues, recorded before the first speech
    "search_restart",  # the search server was restarted after a fault
    "note",  # a person's note for the synthesiser (chat mode)
    "turn_skipped",  # a grounded turn with no valid reply after its retries: nothing published
    "replay_mismatch",  # a resumed call rebuilt a request other than the one its kept reply answered
    "budget",  # the next call could cross budget.usd / budget.tokens: the run stopped before it
]


def utcnow() -> datetime:
    return datetime.now(UTC)


class ErrorInfo(BaseModel):
    """An error captured as data: what kind, which exception, what it said."""

    kind: ErrorKind
    type: str
    message: str


class Usage(BaseModel):
    """Cost of one model call (or of several, summed over repairs and retries).

    ``cost_usd`` is computed from the price table (``harness.models.prices``):
    None means unknown (a model with no price), never 0. ``billed_usd`` is the
    provider's own figure when its reply carried one. Reasoning tokens are
    already inside ``output_tokens``; cache reads and writes inside
    ``input_tokens``. The detail fields are left out of a record while they
    hold their defaults, so records of free models read as they always did.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    calls: int = 0
    cost_usd: float | None = 0.0
    billed_usd: float | None = None
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @model_serializer(mode="wrap")
    def _lean(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k not in _USAGE_DETAIL or v != _USAGE_DETAIL[k]}

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            latency_s=self.latency_s + other.latency_s,
            calls=self.calls + other.calls,
            cost_usd=add_cost(self.cost_usd, other.cost_usd),
            billed_usd=add_billed(self.billed_usd, other.billed_usd),
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


# Usage's detail fields and the defaults they are left out at.
_USAGE_DETAIL: dict[str, Any] = {
    "cost_usd": 0.0,
    "billed_usd": None,
    "reasoning_tokens": 0,
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
}


def add_cost(a: float | None, b: float | None) -> float | None:
    """Dollars summed; unknown anywhere makes the sum unknown (never shown as 0)."""
    return None if a is None or b is None else a + b


def add_billed(a: float | None, b: float | None) -> float | None:
    """The provider's billed figures summed where there are any (None: none reported)."""
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


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
    team: Seat | None = None  # the seat the record belongs to (None: no seat)
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


class Published(Envelope):
    """A statement in the shared transcript, of any format: an argument, a
    position, later a speech or a cited turn. ``phase`` says where in the
    format it was made; ``alias`` is the name other seats know it by."""

    text: str
    phase: str = "round"
    alias: str | None = None


class ArgumentRecord(Published):
    """An approved argument: the only kind that enters shared memory."""

    kind: Literal["argument"] = "argument"
    draft_id: str
    critique_id: str | None
    source: Literal["approved", "revised", "loop_lock"]


class PositionRecord(Published):
    """An analyst's statement in a panel round (``phase``: blind or debate)."""

    kind: Literal["position"] = "position"
    notes_id: str | None = None  # the private notes it was written with
    fallback: bool = False


class SpeechRecord(Published):
    """A moderated debate's speech (``phase`` is its stage: opening,
    rebuttal, counter, closing; ``iteration`` the attempt that was published)."""

    kind: Literal["speech"] = "speech"
    draft_id: str
    fact_check_id: str | None = None
    # passed: its fact-check passed; unchecked: its stage is not checked;
    # cap: published after its last failed check (format.on_speech_cap)
    source: Literal["passed", "unchecked", "cap"] = "passed"


class TurnRecord(Published):
    """A judge-refined debate's turn (``phase``: argument or answer), with
    the motion it was made on and the run's original motion."""

    kind: Literal["turn"] = "turn"
    motion: str
    original_motion: str
    fallback: bool = False


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


class CitedTurnRecord(Published):
    """A grounded debate's published turn: its citations, checked, and
    whether the hard length cut applied (the full text stays in the seat's
    ``drafts`` log, ``draft_id``). ``model`` is ``human`` for a person's turn."""

    kind: Literal["cited_turn"] = "cited_turn"
    side: str
    draft_id: str
    citations: list[Citation] = Field(default_factory=list)
    searches: list[str] = Field(default_factory=list)  # SearchRecord ids (in the seat's own log)
    hits: int = 0  # passages its searches returned
    truncated: bool = False


class NoteRecord(Envelope):
    """A person's argument for the synthesiser (chat mode's ``/note``), public."""

    kind: Literal["note"] = "note"
    text: str


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


class VerdictRecord(Envelope):
    """Who won and why: the judge's verdict, or the moderator's on a disqualification (public)."""

    kind: Literal["verdict"] = "verdict"
    by: Literal["judge", "moderator"]
    winner: Seat | None  # None: no winner could be named (a judge reply that never validated)
    scores: dict[Seat, dict[str, int]] = Field(default_factory=dict)  # seat -> criterion -> score
    justification: str
    disqualified: Seat | None = None
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


class SynthesisRecord(Envelope):
    """The closing synthesis, and why the debate closed (public)."""

    kind: Literal["synthesis"] = "synthesis"
    text: str
    close_reason: str
    fallback: bool = False


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


class EventRecord(Envelope):
    kind: Literal["event"] = "event"
    event: EventKind
    detail: str = ""
    error: ErrorInfo | None = None
    data: dict[str, Any] = Field(default_factory=dict)


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
    | EventRecord,
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
    by_kind: dict[str, int] = Field(default_factory=dict)  # records of each kind, prompts aside
    by_event: dict[str, int] = Field(default_factory=dict)  # events of each name (strike, retry...)
    # what the model calls cost, by the role that made them and by the stage
    # of the format they were made in (a moderated debate's opening...)
    usage_by_role: dict[str, Usage] = Field(default_factory=dict)
    usage_by_stage: dict[str, Usage] = Field(default_factory=dict)
    # behavioural probes' calls and tokens, kept out of the debate's figures above
    probe_calls: int = 0
    probe_tokens: int = 0
    # dollars of every paid call, probes included (None: some call's model has no price)
    cost_usd: float | None = 0.0
    billed_usd: float | None = None  # what providers reported billing, where they did

    def __add__(self, other: RunCounts) -> RunCounts:
        # rounds_completed is a position, not a sum: the later value wins
        summed: dict[str, Any] = {
            k: getattr(self, k) + getattr(other, k) for k in type(self).model_fields if k not in _UNSUMMED
        }
        summed["rounds_completed"] = max(self.rounds_completed, other.rounds_completed)
        summed["cost_usd"] = add_cost(self.cost_usd, other.cost_usd)
        summed["billed_usd"] = add_billed(self.billed_usd, other.billed_usd)
        for key in _KEYED:
            mine, theirs = getattr(self, key), getattr(other, key)
            summed[key] = {
                k: mine[k] + theirs[k] if k in mine and k in theirs else mine.get(k, theirs.get(k))
                for k in sorted(set(mine) | set(theirs))
            }
        return RunCounts(**summed)

    def get(self, name: str) -> int:
        """A count by field name, record kind (``summary``) or event (``strike``)."""
        if name in type(self).model_fields and name not in _UNSUMMED:
            return int(getattr(self, name))
        return self.by_kind.get(name, self.by_event.get(name, 0))


_KEYED = ("by_kind", "by_event", "usage_by_role", "usage_by_stage")
_UNSUMMED = (*_KEYED, "cost_usd", "billed_usd")


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


class SeatInfo(BaseModel):
    """One seat of a run: its folder name, the alias others know it by, the
    model role that answers for it, its stance or mandate, its private logs,
    and the side it argues (None: it has none, as a panel analyst). A layout
    recorded before sides were lacks the key: ``"side" not in model_fields_set``."""

    name: Seat
    alias: str
    role: str
    stance: str
    logs: list[str]
    side: Literal["for", "against"] | None = None


class RunLayout(BaseModel):
    """Which files a run keeps, as its format laid them out. Readers take
    seats and logs from here, never from a list of their own."""

    format: str
    seats: list[SeatInfo]
    public_logs: list[str]  # under public/: what roles with no seat write
    record_kinds: list[str]
    whole_logs: list[str] = Field(default_factory=list)  # set-up logs resume reads whole

    def files(self) -> list[str]:
        """Every log's path relative to the run folder."""
        names = ["shared_memory.jsonl", "events.jsonl"]
        names += [f"public/{log}.jsonl" for log in self.public_logs]
        names += [f"{seat.name}/{log}.jsonl" for seat in self.seats for log in seat.logs]
        return names

    def seat(self, name: str) -> SeatInfo:
        return next(s for s in self.seats if s.name == name)

    def owner(self, file: str) -> str | None:
        """The seat whose private log ``file`` is, or None for a public file."""
        head = file.split("/", 1)[0]
        return head if "/" in file and head != "public" else None


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
    layout: RunLayout | None = None  # None only in runs made before formats were objects
    counts: RunCounts = Field(default_factory=RunCounts)
    error: ErrorInfo | None = None
    history: list[HistoryEntry] = Field(default_factory=list)

"""A run folder's own files, not its logs: the manifest (status, provenance,
layout, counts) and the snapshots resume starts from."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.store.records.core import SCHEMA_VERSION, ErrorInfo, Seat, Usage, add_billed, add_cost, utcnow

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
    copies: int = 0  # published turns repeating an earlier one ("copy" events)
    repeats: int = 0  # published turns writing one of their own sentences again ("repeat" events)
    cuts: int = 0  # reply fields a length cap cut, ended at their last sentence ("cut" events)
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
    # checkpoint interviews' calls and tokens, kept out of the debate's figures likewise
    interview_calls: int = 0
    interview_tokens: int = 0
    # dollars of every paid call, probes and interviews included (None: some call's model has no price)
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
    action: Literal["start", "resume", "complete", "fail", "interrupt", "resume_forced", "fork"]
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
    and the side it argues (None: it has none, as a panel analyst)."""

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


# The run-folder format's version: what files a folder holds and what its
# manifest records (its layout, each seat's side). Raised when a change
# would leave an older folder unreadable as it is.
FOLDER_VERSION = 1


class Lineage(BaseModel):
    """A fork's origin (``python -m harness.fork``): rounds 1..``at_round``
    are the parent's, copied and never paid again; the fork continues from
    round ``at_round + 1`` under ``changed``. ``verify`` checks the prefix
    against the parent while the parent is there."""

    parent: str  # the parent's run folder, absolute
    parent_run_id: str
    parent_fingerprint: str  # the digest the parent's snapshot at ``at_round`` names
    at_round: int
    changed: dict[str, Any] = Field(default_factory=dict)  # dotted key -> its value in the fork
    prefix_sha256: str  # each shared log's bytes up to the fork point, hashed in file order
    # the prefix's counts (the parent's at ``at_round``): paid by the parent, not
    # in the fork's own ``counts``; the two add up to the whole transcript's
    prefix_counts: RunCounts = Field(default_factory=RunCounts)


class RunManifest(BaseModel):
    """``manifest.json``: the run's status and provenance, rewritten atomically.

    ``folder_version`` has no default: a manifest without it was made before
    run folders were versioned, and ``harness.store.rundir.read_manifest``
    refuses it. When FOLDER_VERSION is raised, an older manifest migrates
    here, in a ``mode="before"`` model validator (as inspect_ai's
    ``EvalSample.migrate_deprecated``), not in its readers."""

    folder_version: int
    schema_version: int = SCHEMA_VERSION  # the records' schema (harness.store.records.core)
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
    layout: RunLayout
    counts: RunCounts = Field(default_factory=RunCounts)
    error: ErrorInfo | None = None
    history: list[HistoryEntry] = Field(default_factory=list)
    lineage: Lineage | None = None  # a fork's parent and fork round; None: not a fork

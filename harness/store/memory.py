"""Append-only memory: JSONL logs, shared and team-private.

Each append is one ``write`` of one complete line, so a killed process loses
no line it appended. With ``fsync`` (``memory.fsync=record``, the default)
each line is also fsynced before ``append`` returns; without it the line
waits for ``sync`` (``memory.fsync=round``: before each round's snapshot and
the manifest, so what they point at is on disk first). Each
record carries the sha256 of the previous line in its file (a hash chain),
and ids are deterministic, so a replayed node cannot append a second copy.
Logs keep their last rounds in memory too (``keep_rounds``), so reading the
last K rounds costs O(K), not O(rounds), and memory stays flat over a long
debate; older records are read back from the file when asked for.

Which files a run has comes from its format (``RunLayout``): the shared
transcript, the events, each seat's private logs under ``<seat>/``, and the
logs of roles with no seat under ``public/``. Isolation is structural: a
seat's agents get a ``SeatMemory``, which holds the shared log and that
seat's own logs and nothing else.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar, cast

from harness.slots import syncing
from harness.store.jsonl import OnDisk, id_round, last_line, scan
from harness.store.records import (
    CritiqueRecord,
    Envelope,
    EventRecord,
    LogPosition,
    PersonaRecord,
    PromptRecord,
    Published,
    ReplyRecord,
    RunCounts,
    RunLayout,
    SeatInfo,
    ThinkingRecord,
    Usage,
    add_billed,
    add_cost,
)

R = TypeVar("R", bound=Envelope)


class CorruptLogError(RuntimeError):
    """A log line before the last one is unreadable: the file was edited."""


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def _created(path: Path) -> bool:
    """Make ``path`` (and its folder) if it is missing, and say whether it was: one
    open a log, where a mkdir, a stat and a touch took six calls (14 logs a run)."""
    flags, mode = os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666  # touch's mode
    try:
        try:
            fd = os.open(path, flags, mode)
        except FileNotFoundError:  # its folder (a seat's) is not made yet
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, flags, mode)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class JsonlLog(Generic[R]):
    """One append-only JSONL file of records, with its last rounds in memory.

    ``start`` loads only the records after that position (resume reads the
    tail it needs, so its cost does not grow with the rounds already run).
    ``keep_rounds`` bounds memory the same way: once a record of round N
    lands, the records before round N - ``keep_rounds`` (where a resume's
    window would begin) leave memory, so memory and the garbage collector's
    work stay flat over a long debate; None keeps every record. What is not
    in memory is still the log's: ``get``, ``since_round``, ``after``,
    ``last`` and ``position_before_round`` read it back from the file
    (``OnDisk``), and the hash chain goes on from the last line's hash.
    """

    def __init__(
        self,
        path: Path,
        *,
        fsync: bool = True,
        start: LogPosition | None = None,
        keep_rounds: int | None = None,
    ) -> None:
        if keep_rounds is not None and keep_rounds < 0:
            raise ValueError(f"{path}: keep_rounds must be >= 0 (or None), got {keep_rounds}")
        self.path = path
        self.fsync = fsync
        self.keep_rounds = keep_rounds
        start = start or LogPosition()
        self._first = start.count  # the global position of the first in-memory record
        self._records: list[R] = []
        self._offsets: list[int] = []  # byte offset where each in-memory record starts
        self._index: dict[str, int] = {}  # id -> global position, in-memory records only
        self._last_hash = start.last_hash
        self._size = start.offset
        self._top: int | None = None  # the newest round seen, for eviction
        self._unsynced = False  # lines written since the last fsync (only without ``fsync``)
        self.quarantined: list[str] = []
        # told of each record newly appended (the engine checks a published turn for copies)
        self.on_append: list[Callable[[R], None]] = []
        if _created(path):  # every log exists from the start, even if it stays empty
            self._disk = OnDisk(path, 0, 0)
        else:
            self._disk = OnDisk(path, start.offset, start.count)
            self._load(start.offset)

    def _load(self, offset: int) -> None:
        lines = scan(self.path, offset)
        bad: bytes | None = None
        for line in lines:
            if bad is not None:  # an unreadable line with complete lines after it
                raise CorruptLogError(f"{self.path}: line {line.index} is unreadable: {bad!r:.80}")
            if line.record is None:
                bad = line.raw  # the last complete line may be torn mid-record: quarantined below
                continue
            self._remember(cast(R, line.record), line_hash(line.raw), len(line.raw) + 1)
        tail = lines.tail if bad is None else bad + b"\n" + lines.tail
        if tail.strip():
            self._quarantine(tail)

    def _quarantine(self, tail: bytes) -> None:
        """Move a torn last line (a crash mid-write) aside, never drop it."""
        qpath = self.path.with_name(self.path.name + ".quarantine")
        with open(qpath, "ab") as fh:
            fh.write(tail if tail.endswith(b"\n") else tail + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        with open(self.path, "r+b") as fh:
            fh.truncate(self._size)
            os.fsync(fh.fileno())
        self.quarantined.append(tail.decode("utf-8", "replace")[:200])

    def _remember(self, record: R, digest: str, nbytes: int) -> None:
        self._index[record.id] = len(self)
        self._records.append(record)
        self._offsets.append(self._size)
        self._size += nbytes
        self._last_hash = digest
        if self.keep_rounds is not None and (self._top is None or record.round > self._top):
            self._top = record.round
            self._evict(self._first_of(record.round - self.keep_rounds))

    def _first_of(self, round_: int) -> int:
        """Index of the first in-memory record of ``round_`` or later, scanning
        back from the end (``len`` if the last record is older)."""
        records, i = self._records, len(self._records)
        while i and records[i - 1].round >= round_:
            i -= 1
        return i

    def _evict(self, n: int) -> None:
        """The first ``n`` in-memory records leave memory; the file keeps them,
        indexed by ``OnDisk`` one run of same-round records at a time."""
        if n <= 0:
            return
        records, offsets, index, first = self._records, self._offsets, self._index, self._first
        run = 0  # where the run of same-round records being evicted begins
        for j in range(n):
            record = records[j]
            if index.get(record.id) == first + j:
                del index[record.id]
            if j + 1 == n or records[j + 1].round != record.round:
                self._disk.add(record.round, offsets[run], first + run, offsets[j + 1], first + j + 1)
                run = j + 1
        self._first = first + n
        del records[:n], offsets[:n]

    def append(self, record: R) -> R:
        """Append ``record`` once; an id already present returns the stored copy."""
        if (stored := self.get(record.id)) is not None:
            return stored
        record = record.model_copy(update={"seq": len(self), "prev_hash": self._last_hash})
        data = record.__pydantic_serializer__.to_json(record)  # model_dump_json's bytes, not decoded
        line = data + b"\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(fd, line)
                if written != len(line):  # a short write: the disk filled mid-line
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                if self.fsync:
                    with syncing():
                        os.fsync(fd)
                self._unsynced = not self.fsync
            finally:
                os.close(fd)
        except OSError as exc:  # named, so the one-line error can say which file
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc
        self._remember(record, hashlib.sha256(data).hexdigest(), len(line))  # = line_hash(line)
        for hook in self.on_append:
            hook(record)
        return record

    def sync(self) -> None:
        """fsync the lines appended since the last sync (none with ``fsync``: each was)."""
        if not self._unsynced:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            with syncing():
                os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced = False

    def position(self) -> LogPosition:
        """The end of the log."""
        return LogPosition(offset=self._size, count=len(self), last_hash=self._last_hash)

    def position_before_round(self, round_: int) -> LogPosition:
        """Where the last run of records of ``round_`` or later starts."""
        i = self._first_of(round_)
        if i == 0 and self._disk.may_hold(round_):  # the run goes on into what left memory
            offset, count = self._disk.boundary(round_)
            if offset < self._disk.end:
                last = line_hash(last_line(self.path, offset)) if offset else None
                return LogPosition(offset=offset, count=count, last_hash=last)
        if i == len(self._records):
            return self.position()
        return LogPosition(
            offset=self._offsets[i], count=self._first + i, last_hash=self._records[i].prev_hash
        )

    def hash_at(self, count: int) -> str | None:
        """Hash of the line before position ``count`` (as its successor records it)."""
        i = count - self._first
        if i == len(self._records):
            return self._last_hash
        if 0 <= i < len(self._records):
            return self._records[i].prev_hash
        raise IndexError(f"{self.path.name}: position {count} is outside the loaded records")

    def get(self, record_id: str) -> R | None:
        """The record with this id: from memory, or (an older round's) from the file."""
        i = self._index.get(record_id)
        if i is not None:
            return self._records[i - self._first]
        if self._disk.may_hold(id_round(record_id)):
            return cast("R | None", self._disk.find(record_id))
        return None

    def last(self) -> R | None:
        return self._records[-1] if self._records else cast("R | None", self._disk.last())

    @property
    def last_hash(self) -> str | None:
        return self._last_hash

    @property
    def in_memory(self) -> int:
        """How many records the log holds in memory (the rest it reads from its file)."""
        return len(self._records)

    def since_round(self, first_round: int) -> list[R]:
        """The records after the last one of a round before ``first_round``,
        scanning back from the end (and on into the file if need be)."""
        i = self._first_of(first_round)
        if i == 0 and self._disk.may_hold(first_round):
            offset, _ = self._disk.boundary(first_round)
            return [*cast("list[R]", self._disk.records(offset)), *self._records]
        return self._records[i:]

    def after(self, count: int) -> list[R]:
        """Records from global position ``count`` on."""
        if count < self._first:
            return [*cast("list[R]", self._disk.from_count(count)), *self._records]
        return self._records[count - self._first :]

    def __len__(self) -> int:
        return self._first + len(self._records)

    def __iter__(self) -> Iterator[R]:
        """The records in memory (all of them, unless ``keep_rounds`` or ``start`` is set)."""
        return iter(self._records)


class SeatLog(Generic[R]):
    """A seat's log by name, typed: ``view.persona`` is ``view.logs["persona"]``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, view: SeatMemory, owner: type | None = None) -> JsonlLog[R]:
        return cast("JsonlLog[R]", view.logs[self.name])


class SeatMemory:
    """What one seat's agents can reach: the shared transcript and the seat's
    own logs. The typed properties name the logs a seat of the drift kind
    keeps; a seat that does not keep one raises ``KeyError``."""

    def __init__(self, seat: SeatInfo, shared: JsonlLog[Published], logs: dict[str, JsonlLog]) -> None:  # type: ignore[type-arg]
        self.seat = seat
        self.name = seat.name
        self.shared = shared
        self.logs = logs

    persona = SeatLog[PersonaRecord]("persona")
    thinking = SeatLog[ThinkingRecord]("thinking")
    critique = SeatLog[CritiqueRecord]("critique")
    prompts = SeatLog[PromptRecord]("prompts")


class RunMemory:
    """All logs of one run folder. Only the engine holds this; agents get views.

    ``start`` maps a log's relative path to the position to load it from
    (taken from a snapshot); logs not named load whole. ``keep_rounds`` (the
    format's window, ``Format.window_rounds``) bounds what each log keeps in
    memory, except the layout's whole logs, which every round may read whole.
    """

    def __init__(
        self,
        run_dir: Path,
        layout: RunLayout,
        *,
        fsync: bool = True,
        start: dict[str, LogPosition] | None = None,
        keep_rounds: int | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.layout = layout
        start = start or {}
        self._logs: dict[str, JsonlLog] = {  # type: ignore[type-arg]
            name: JsonlLog(
                run_dir / name,
                fsync=fsync,
                start=start.get(name),
                keep_rounds=None if name in layout.whole_logs else keep_rounds,
            )
            for name in layout.files()
        }
        self.shared: JsonlLog[Published] = self._logs["shared_memory.jsonl"]
        self.events: JsonlLog[EventRecord] = self._logs["events.jsonl"]
        self.public = {log: self._logs[f"public/{log}.jsonl"] for log in layout.public_logs}
        self._seats = {
            seat.name: SeatMemory(
                seat, self.shared, {k: self._logs[f"{seat.name}/{k}.jsonl"] for k in seat.logs}
            )
            for seat in layout.seats
        }

    @classmethod
    def of_run(cls, run_dir: Path, *, fsync: bool = True) -> RunMemory:
        """The memory of an existing run folder, laid out as its manifest says."""
        from harness.store.rundir import read_manifest

        return cls(run_dir, read_manifest(run_dir).layout, fsync=fsync)

    def seat(self, name: str) -> SeatMemory:
        return self._seats[name]

    def sync(self) -> None:
        """Every log's unsynced lines to disk (``memory.fsync=round``)."""
        for log in self._logs.values():
            log.sync()

    def logs(self) -> dict[str, JsonlLog]:  # type: ignore[type-arg]
        """Every log by its path relative to the run folder."""
        return dict(self._logs)

    def positions(self) -> dict[str, LogPosition]:
        return {name: log.position() for name, log in self._logs.items()}

    def window_positions(self, round_: int) -> dict[str, LogPosition]:
        """Where each log's records of ``round_`` and later begin."""
        return {name: log.position_before_round(round_) for name, log in self._logs.items()}

    def quarantined(self) -> dict[str, list[str]]:
        return {name: log.quarantined for name, log in self._logs.items() if log.quarantined}

    def tally(self, since: dict[str, LogPosition] | None = None) -> RunCounts:
        """Counts derived from the records after ``since`` (all loaded ones if None).

        Derived, not incremented, so a resumed run counts exactly what landed.
        """
        since = since or {}
        counts = RunCounts()
        for name, log in self._logs.items():
            for record in log.after(since.get(name, LogPosition()).count):
                count_record(counts, record)
        return counts


# Roles whose calls are asked beside the debate (harness.probes, harness.interviews):
# each counts in RunCounts fields of its own, ``<role>_calls`` and ``<role>_tokens``.
ASIDE_ROLES = ("probe", "interview")


def count_record(counts: RunCounts, record: Envelope) -> None:
    """Add one record to ``counts``: its kind, its usage, what it decided."""
    if isinstance(record, (PromptRecord, ReplyRecord)):  # a reply's cost is counted where it ended
        return
    counts.cost_usd = add_cost(counts.cost_usd, record.usage.cost_usd)
    counts.billed_usd = add_billed(counts.billed_usd, record.usage.billed_usd)
    if record.role in ASIDE_ROLES:  # a probe or an interview, asked beside the debate: its own counts only
        calls, tokens = f"{record.role}_calls", f"{record.role}_tokens"
        setattr(counts, calls, getattr(counts, calls) + record.usage.calls)
        used = record.usage.input_tokens + record.usage.output_tokens
        setattr(counts, tokens, getattr(counts, tokens) + used)
        if not isinstance(record, EventRecord):
            counts.by_kind[record.role] = counts.by_kind.get(record.role, 0) + 1
        return
    if isinstance(record, Published):
        counts.published += 1
    elif not isinstance(record, EventRecord):
        kind = str(getattr(record, "kind", "record"))
        counts.by_kind[kind] = counts.by_kind.get(kind, 0) + 1
    counts.model_calls += record.usage.calls
    counts.input_tokens += record.usage.input_tokens
    counts.output_tokens += record.usage.output_tokens
    if record.usage.calls:
        counts.usage_by_role[record.role] = counts.usage_by_role.get(record.role, Usage()) + record.usage
        if (stage := getattr(record, "stage", None) or getattr(record, "phase", None)) is not None:
            counts.usage_by_stage[stage] = counts.usage_by_stage.get(stage, Usage()) + record.usage
    for name, n in record.counted().items():  # a kind's own counts (a critique's verdict)
        setattr(counts, name, getattr(counts, name) + n)
    if isinstance(record, EventRecord):
        counts.by_event[record.event] = counts.by_event.get(record.event, 0) + 1
        counts.loop_locks += record.event == "loop_lock"
        counts.schema_failures += record.event == "schema_failure"
        counts.retries += record.event == "retry"

"""Append-only memory: JSONL logs, shared and team-private.

Each append is one ``write`` of one complete line, flushed and fsynced. Each
record carries the sha256 of the previous line in its file (a hash chain),
and ids are deterministic, so a replayed node cannot append a second copy.
Logs keep their records in memory too, so reading the last K rounds costs
O(K), not O(rounds): a node's cost stays flat over a long debate.

Isolation is structural: an agent gets a ``TeamMemory``, which holds the
shared log and its own team's logs and nothing else.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar, cast

from harness.records import (
    ArgumentRecord,
    CritiqueRecord,
    Envelope,
    EventRecord,
    PersonaRecord,
    PromptRecord,
    ThinkingRecord,
    parse_record,
)

R = TypeVar("R", bound=Envelope)
TEAMS = ("pros", "cons")


class CorruptLogError(RuntimeError):
    """A log line before the last one is unreadable: the file was edited."""


def line_hash(line: bytes) -> str:
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


class JsonlLog(Generic[R]):
    """One append-only JSONL file of records, with an in-memory mirror."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self._records: list[R] = []
        self._index: dict[str, int] = {}
        self._last_hash: str | None = None
        self.quarantined: list[str] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            self._load()
        else:
            path.touch()  # every log exists from the start, even if it stays empty

    def _load(self) -> None:
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        good_bytes = len(data) - len(tail)
        for i, line in enumerate(lines):
            try:
                record = cast(R, parse_record(line))
            except ValueError as exc:
                if i < len(lines) - 1:
                    raise CorruptLogError(f"{self.path}: line {i + 1} is unreadable: {exc}") from None
                tail, good_bytes = line + b"\n" + tail, good_bytes - len(line) - 1
                break
            self._remember(record, line_hash(line))
        if tail.strip():
            self._quarantine(tail, good_bytes)

    def _quarantine(self, tail: bytes, good_bytes: int) -> None:
        """Move a torn last line (a crash mid-write) aside, never drop it."""
        qpath = self.path.with_name(self.path.name + ".quarantine")
        with open(qpath, "ab") as fh:
            fh.write(tail if tail.endswith(b"\n") else tail + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        with open(self.path, "r+b") as fh:
            fh.truncate(good_bytes)
            os.fsync(fh.fileno())
        self.quarantined.append(tail.decode("utf-8", "replace")[:200])

    def _remember(self, record: R, digest: str) -> None:
        self._index[record.id] = len(self._records)
        self._records.append(record)
        self._last_hash = digest

    def append(self, record: R) -> R:
        """Append ``record`` once; an id already present returns the stored copy."""
        if record.id in self._index:
            return self._records[self._index[record.id]]
        record = record.model_copy(update={"seq": len(self._records), "prev_hash": self._last_hash})
        line = (record.model_dump_json() + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._remember(record, line_hash(line))
        return record

    def get(self, record_id: str) -> R | None:
        i = self._index.get(record_id)
        return None if i is None else self._records[i]

    def last(self) -> R | None:
        return self._records[-1] if self._records else None

    @property
    def last_hash(self) -> str | None:
        return self._last_hash

    def tail(self, n: int) -> list[R]:
        return self._records[-n:] if n > 0 else []

    def since_round(self, first_round: int) -> list[R]:
        """Records with ``round >= first_round``, scanning back from the end."""
        out: list[R] = []
        for record in reversed(self._records):
            if record.round < first_round:
                break
            out.append(record)
        return out[::-1]

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[R]:
        return iter(self._records)


@dataclass
class TeamMemory:
    """What one team's agents can reach: shared memory plus their own logs."""

    team: str
    shared: JsonlLog[ArgumentRecord]
    persona: JsonlLog[PersonaRecord]
    thinking: JsonlLog[ThinkingRecord]
    critique: JsonlLog[CritiqueRecord]
    prompts: JsonlLog[PromptRecord]


class RunMemory:
    """All logs of one run folder. Only the engine holds this; agents get views."""

    def __init__(self, run_dir: Path, *, fsync: bool = True) -> None:
        self.run_dir = run_dir
        self.shared: JsonlLog[ArgumentRecord] = JsonlLog(run_dir / "shared_memory.jsonl", fsync=fsync)
        self.events: JsonlLog[EventRecord] = JsonlLog(run_dir / "events.jsonl", fsync=fsync)
        self._teams = {team: self._team(team, fsync) for team in TEAMS}

    def _team(self, team: str, fsync: bool) -> TeamMemory:
        base = self.run_dir / team
        return TeamMemory(
            team=team,
            shared=self.shared,
            persona=JsonlLog(base / "persona.jsonl", fsync=fsync),
            thinking=JsonlLog(base / "thinking.jsonl", fsync=fsync),
            critique=JsonlLog(base / "critique.jsonl", fsync=fsync),
            prompts=JsonlLog(base / "prompts.jsonl", fsync=fsync),
        )

    def team(self, team: str) -> TeamMemory:
        return self._teams[team]

    def logs(self) -> dict[str, JsonlLog]:  # type: ignore[type-arg]
        """Every log by its path relative to the run folder."""
        out: dict[str, JsonlLog] = {"shared_memory.jsonl": self.shared, "events.jsonl": self.events}  # type: ignore[type-arg]
        for team, view in self._teams.items():
            for kind in ("persona", "thinking", "critique", "prompts"):
                out[f"{team}/{kind}.jsonl"] = getattr(view, kind)
        return out

    def quarantined(self) -> dict[str, list[str]]:
        return {name: log.quarantined for name, log in self.logs().items() if log.quarantined}

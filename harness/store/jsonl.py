"""The one JSONL reader: every memory file, read by the log itself, by
``verify``, by the SQL store and by the analysis, goes through ``scan``.

A file is read from a byte offset to its end. Each complete line comes back
with its position and either its parsed record or the reason it did not
parse; bytes after the last newline (what a crash mid-write leaves) come
back as the torn tail. What to do about a bad line is the caller's choice:
the log refuses to open, ``verify`` reports it, the analysis stops there.

``OnDisk`` is the other half of a log that keeps only its last rounds in
memory: it finds what left memory again, by byte offset, in the file.
"""

from __future__ import annotations

import json
import re
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.store.records import Record, parse_record

CHUNK_BYTES = 1 << 20
# "round" as a key: no JSON string holds these bytes unescaped, and the
# envelope's fields come first, so the first match is the record's round
_ROUND_KEY = re.compile(rb'"round":(-?\d+)')
_ID_ROUND = re.compile(r"r(\d+)\.")  # record_id's prefix: r0003.pros.critique.i1


@dataclass
class Line:
    """One complete line: its index from the offset read, where it starts,
    its bytes (without the newline), and its record or parse error."""

    index: int
    offset: int
    raw: bytes
    record: Record | None
    error: str | None


@dataclass
class Scan:
    """An iterable over a file's complete lines; ``tail`` holds the torn
    last line (or ``b""``) once iteration has finished."""

    path: Path
    start: int = 0
    chunk_bytes: int = CHUNK_BYTES
    tail: bytes = field(default=b"", init=False)

    def __iter__(self) -> Iterator[Line]:
        self.tail = b""
        if not self.path.exists():
            return
        lines = RawLines(self.path, self.start, chunk_bytes=self.chunk_bytes)
        for index, (offset, raw) in enumerate(lines):
            yield parse_line(index, offset, raw)
        self.tail = lines.tail


@dataclass
class RawLines:
    """The complete lines of ``path`` from byte ``start`` to byte ``end`` (the
    file's end if None), each with its offset, read in chunks so a long log is
    streamed, never held whole; ``tail`` holds the bytes after the last newline
    once iteration has finished."""

    path: Path
    start: int = 0
    end: int | None = None
    chunk_bytes: int = CHUNK_BYTES
    tail: bytes = field(default=b"", init=False)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            offset, pending = self.start, b""
            left = None if self.end is None else self.end - self.start
            while left is None or left > 0:
                chunk = fh.read(self.chunk_bytes if left is None else min(self.chunk_bytes, left))
                if not chunk:
                    break
                if left is not None:
                    left -= len(chunk)
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for raw in lines:
                    yield offset, raw
                    offset += len(raw) + 1
        self.tail = pending


def parse_line(index: int, offset: int, raw: bytes) -> Line:
    try:
        return Line(index, offset, raw, parse_record(raw), None)
    except ValueError as exc:
        return Line(index, offset, raw, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def scan(path: Path, start: int = 0) -> Scan:
    """The lines of ``path`` from byte ``start`` on (see ``Scan``)."""
    return Scan(path, start)


def read_lines(path: Path, start: int, end: int) -> RawLines:
    """Each complete line between byte ``start`` and byte ``end`` (both line
    starts) with its offset: part of a file, streamed."""
    return RawLines(path, start, end)


def line_round(raw: bytes) -> int:
    """A record line's round, read without parsing the record."""
    if (found := _ROUND_KEY.search(raw)) is None:
        return parse_record(raw).round  # not a line this harness wrote: let the parser say why
    return int(found.group(1))


def id_round(record_id: str) -> int | None:
    """The round a ``record_id`` names, or None for an id made otherwise."""
    found = _ID_ROUND.match(record_id)
    return int(found.group(1)) if found else None


class OnDisk:
    """The records a log holds on disk but not in memory: its first ``end`` bytes.

    Indexed by round, not by record: one (round, offset, count) per run of
    same-round lines, so three small ints per round stay in memory. A resumed
    log's unread head (bytes before ``head``) is indexed the first time it is
    needed. Rounds never go back within a log (the snapshot window and
    ``since_round`` assume it too), so ``top``, the round of the last record
    here, bounds them all: an id of a later round is known not to be here.
    """

    def __init__(self, path: Path, head: int, head_count: int) -> None:
        self.path = path
        self.head = head  # bytes before this are not indexed yet
        self.end, self.end_count = head, head_count  # where memory begins
        self.rounds, self.offsets, self.counts = array("q"), array("q"), array("q")
        self.top: int | None = line_round(last_line(path, head)) if head else None

    def add(self, round_: int, offset: int, count: int, end: int, end_count: int) -> None:
        """Records ``count`` up to ``end_count``, all of ``round_``, leave memory: the
        bytes from ``offset`` (where the last call's ``end`` was) to ``end``."""
        if not self.rounds or self.rounds[-1] != round_:
            self.rounds.append(round_)
            self.offsets.append(offset)
            self.counts.append(count)
        self.end, self.end_count = end, end_count
        self.top = round_ if self.top is None else max(self.top, round_)

    def may_hold(self, round_: int | None) -> bool:
        """Whether a record of ``round_`` (None: of a round not known) may be here."""
        if self.end == 0:
            return False
        return round_ is None or (self.top is not None and round_ <= self.top)

    def find(self, record_id: str) -> Record | None:
        """The record with this id, read from the lines of its round."""
        self._index_head()
        round_ = id_round(record_id)
        needle = b'"id":' + json.dumps(record_id, ensure_ascii=False).encode()  # as the log wrote it
        for i, r in enumerate(self.rounds):
            if round_ is not None and r != round_:
                continue
            for _, raw in read_lines(self.path, *self._span(i)):
                if needle in raw[: len(needle) + 64] and (record := parse_record(raw)).id == record_id:
                    return record
        return None

    def boundary(self, round_: int) -> tuple[int, int]:
        """(offset, count) just after the last record here of a round before
        ``round_``: where ``position_before_round`` lands; (0, 0) if none."""
        self._index_head()
        for i in range(len(self.rounds) - 1, -1, -1):
            if self.rounds[i] < round_:
                nxt = i + 1
                return (
                    (self.offsets[nxt], self.counts[nxt])
                    if nxt < len(self.rounds)
                    else (self.end, self.end_count)
                )
        return 0, 0

    def records(self, offset: int, skip: int = 0) -> list[Record]:
        """The records from byte ``offset`` to ``end``, less the first ``skip``."""
        lines = read_lines(self.path, offset, self.end)
        return [parse_record(raw) for n, (_, raw) in enumerate(lines) if n >= skip]

    def from_count(self, count: int) -> list[Record]:
        """The records from global position ``count`` to ``end``."""
        self._index_head()
        i = max(0, bisect_right(self.counts, count) - 1)
        return self.records(self.offsets[i], count - self.counts[i]) if self.rounds else []

    def last(self) -> Record | None:
        return parse_record(last_line(self.path, self.end)) if self.end else None

    def _span(self, i: int) -> tuple[int, int]:
        return self.offsets[i], self.offsets[i + 1] if i + 1 < len(self.offsets) else self.end

    def _index_head(self) -> None:
        if not self.head:
            return
        rounds, offsets, counts = array("q"), array("q"), array("q")
        for count, (offset, raw) in enumerate(read_lines(self.path, 0, self.head)):
            r = line_round(raw)
            if not rounds or rounds[-1] != r:
                rounds.append(r)
                offsets.append(offset)
                counts.append(count)
        self.rounds, self.offsets, self.counts = (
            rounds + self.rounds,
            offsets + self.offsets,
            counts + self.counts,
        )
        self.head = 0


def line_before(path: Path, offset: int) -> bytes | None:
    """The complete line that ends exactly at byte ``offset`` (None at offset 0)."""
    if offset == 0:
        return None
    chunk = 4096
    with open(path, "rb") as fh:
        while True:
            start = max(0, offset - chunk)
            fh.seek(start)
            data = fh.read(offset - start)
            cut = data.rfind(b"\n", 0, len(data) - 1)
            if cut >= 0 or start == 0:
                return data[cut + 1 :]
            chunk *= 4


def last_line(path: Path, offset: int) -> bytes:
    """The complete line that ends at byte ``offset`` (> 0)."""
    if (line := line_before(path, offset)) is None:
        raise ValueError(f"{path}: no line ends at byte {offset}")
    return line

"""The one JSONL reader: every memory file, read by the log itself, by
``verify``, by the SQL store and by the analysis, goes through ``scan``.

A file is read from a byte offset to its end. Each complete line comes back
with its position and either its parsed record or the reason it did not
parse; bytes after the last newline (what a crash mid-write leaves) come
back as the torn tail. What to do about a bad line is the caller's choice:
the log refuses to open, ``verify`` reports it, the analysis stops there.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from harness.store.records import Record, parse_record


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
    chunk_bytes: int = 1 << 20
    tail: bytes = field(default=b"", init=False)

    def __iter__(self) -> Iterator[Line]:
        self.tail = b""
        if not self.path.exists():
            return
        offset, index, pending = self.start, 0, b""
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            # read in chunks so a long log is streamed, never held whole
            while chunk := fh.read(self.chunk_bytes):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for raw in lines:
                    yield parse_line(index, offset, raw)
                    offset += len(raw) + 1
                    index += 1
        self.tail = pending


def parse_line(index: int, offset: int, raw: bytes) -> Line:
    try:
        return Line(index, offset, raw, parse_record(raw), None)
    except ValueError as exc:
        return Line(index, offset, raw, None, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def scan(path: Path, start: int = 0) -> Scan:
    """The lines of ``path`` from byte ``start`` on (see ``Scan``)."""
    return Scan(path, start)

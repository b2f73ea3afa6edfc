"""Reading what was appended to a log since the last look: the sweep's cell
and control logs, and the live page that follows a sweep, each keep an
offset and read only the whole lines after it."""

from __future__ import annotations

from pathlib import Path


def lines_after(path: Path, offset: int) -> tuple[list[bytes], int]:
    """The whole lines appended to ``path`` after byte ``offset``, and the offset after them
    (a line still being written waits for the next read; no file: none yet)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    complete = data.rfind(b"\n") + 1
    return data[:complete].splitlines(), offset + complete

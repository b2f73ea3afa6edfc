"""What the process running a sweep cell says about it: ``cells/<name>.json``
(the cell's status file, rewritten at each change), and the same record
appended as one line to ``cells.jsonl`` (the cell log), which the driver
reads from where its last read stopped. ``harness.sweep.index`` folds both
into the index's rows.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from harness.appended import lines_after

if TYPE_CHECKING:
    from harness.store.records import RunManifest

CELLS_DIR = "cells"
EVENTS_JSONL = "cells.jsonl"  # the cell log: one line per cell status write, append-only


# this machine's name, asked once a process: each record and each of the driver's
# checks of a running cell asked the kernel again (os.uname)
HOST = os.uname().nodename


def utcnow() -> datetime:
    # not harness.store.records': importing its models is most of what ``status`` costs
    return datetime.now(UTC)


class CellRecord(BaseModel):
    """``cells/<name>.json``: what the process running a cell says about it."""

    status: Literal["running", "completed", "failed", "interrupted"]
    action: Literal["run", "resume", "skip"] = "run"
    exit_code: int | None = None
    error: str | None = None
    rounds: int | None = None
    seed: int | None = None
    host: str = HOST
    pid: int = Field(default_factory=os.getpid)
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None
    # from the run's manifest when the cell ended; None: not recorded, read the manifest
    rounds_done: int | None = None
    wall_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = 0.0  # None: some call's model has no price (docs/costs.md)

    def with_counts(self, manifest: RunManifest | None) -> CellRecord:
        """This record with the run's counts, so the index needs no manifest read for it."""
        if manifest is None:
            return self.model_copy(
                update={
                    "rounds_done": 0,
                    "wall_s": 0.0,
                    "input_tokens": 0,
                    "output_tokens": 0,
                    "cost_usd": 0.0,
                }
            )
        counts = manifest.counts
        return self.model_copy(
            update={
                "rounds_done": counts.rounds_completed,
                "wall_s": manifest.wall_s,
                "seed": manifest.seed,
                "input_tokens": counts.input_tokens,
                "output_tokens": counts.output_tokens,
                "cost_usd": counts.cost_usd,
            }
        )


class CellEvent(CellRecord):
    """One line of ``cells.jsonl``: a cell's status record, named."""

    cell: str


def read_cell_record(sweep_dir: Path, name: str) -> CellRecord | None:
    path = sweep_dir / CELLS_DIR / f"{name}.json"
    try:
        return CellRecord.model_validate_json(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_cell_record(sweep_dir: Path, name: str, record: CellRecord) -> None:
    """The cell's status file, then the same record appended to the cell log."""
    from harness.store.rundir import write_atomic

    path, text = sweep_dir / CELLS_DIR / f"{name}.json", record.model_dump_json(indent=2)
    try:
        write_atomic(path, text)
    except FileNotFoundError:  # no cells/ yet: the sweep's first record (a mkdir each took two calls)
        path.parent.mkdir(exist_ok=True)
        write_atomic(path, text)
    line = CellEvent(cell=name, **record.model_dump()).model_dump_json() + "\n"
    # one write with O_APPEND: lines from several local processes never interleave
    fd = os.open(sweep_dir / EVENTS_JSONL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class CellLog:
    """``cells.jsonl``, read from where the last read stopped: each read costs only the new lines."""

    def __init__(self, sweep_dir: Path) -> None:
        self.path = sweep_dir / EVENTS_JSONL
        self.offset = 0
        self.latest: dict[str, CellRecord] = {}  # each cell's last record

    def read(self) -> list[CellEvent]:
        """The events appended since the last read (a line still being written waits)."""
        lines, self.offset = lines_after(self.path, self.offset)
        events = []
        for line in lines:
            try:
                events.append(CellEvent.model_validate_json(line))
            except ValueError:
                continue  # torn by a shared file system: the cell's status file still has it
        self.latest.update((e.cell, e) for e in events)
        return events

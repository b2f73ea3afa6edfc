"""Reading run folders for the analysis, through ``harness.store.reader``
(the project's one JSONL reader): no JSONL parsing of its own here.

A run folder is read, never written: the reader stops a log at a torn or
unreadable line and notes it; each note becomes a ``RunReadWarning`` here,
so a half-written run loads up to its last complete record, with a warning.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from pathlib import Path

from harness.store.reader import RunFolder, find_runs, read_manifest, read_records, read_run
from harness.store.records import Record, RunLayout

__all__ = ["RunReadWarning", "find_runs", "fingerprint", "layout_of", "read_folder", "read_logs"]

# prompts.jsonl is large and feeds no table: left unread, though still part
# of the fingerprint so a rewritten run is noticed.
SKIP = ("prompts.jsonl", "replies.jsonl")


class RunReadWarning(UserWarning):
    """A run folder was read only in part (torn or unreadable line, missing file)."""


def read_folder(run_dir: Path) -> RunFolder:
    """Every table-feeding log of ``run_dir``; what could not be read is warned about."""
    run = read_run(run_dir, skip=SKIP)
    for note in run.notes:
        warnings.warn(note, RunReadWarning, stacklevel=2)
    return run


def read_logs(run_dir: Path, names: Iterable[str]) -> dict[str, list[Record]]:
    """A few logs of ``run_dir`` by name, for a second look at a run that
    needs only those (a missing log is empty); what could not be read is warned about."""
    notes: list[str] = []
    logs = {name: list(read_records(run_dir / name, notes)) for name in names}
    for note in notes:
        warnings.warn(note, RunReadWarning, stacklevel=2)
    return logs


def layout_of(run_dir: Path) -> RunLayout:
    """The run's layout, from its manifest (no config read)."""
    return read_manifest(run_dir).layout


def fingerprint(run_dir: Path, layout: RunLayout) -> list[list[object]]:
    """Size and mtime of every file the tables come from: any change shows."""
    out: list[list[object]] = []
    for name in ("config.yaml", "manifest.json", *layout.files()):
        try:
            st = (run_dir / name).stat()
        except FileNotFoundError:
            continue
        out.append([name, st.st_size, st.st_mtime_ns])
    return out

"""Reading one run folder through the harness's record types.

A run folder is read, never written: a torn last line (a crash mid-write)
is skipped with a warning, and reading stops at the first unreadable line,
so a half-written run loads up to its last complete record.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import yaml

from harness.store.records import Record, RunManifest, parse_record

TEAMS = ("pros", "cons")
LOGS = (
    "shared_memory.jsonl", "events.jsonl",
    *(f"{team}/{kind}.jsonl" for team in TEAMS for kind in ("persona", "thinking", "critique")),
)  # fmt: skip
# prompts.jsonl is large and not needed for any table; it is still part of
# the fingerprint so a rewritten run is noticed.
FINGERPRINT_FILES = ("config.yaml", "manifest.json", *LOGS, *(f"{t}/prompts.jsonl" for t in TEAMS))


class RunReadWarning(UserWarning):
    """A run folder was read only in part (torn or unreadable line, missing file)."""


def read_log(path: Path, notes: list[str]) -> Iterator[Record]:
    """The records of one JSONL file, up to its last complete one."""
    if not path.exists():
        return
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield parse_record(line)
        except ValueError as exc:
            note = f"{path}: line {i + 1} unreadable ({type(exc).__name__}); loaded the {i} lines before it"
            notes.append(note)
            warnings.warn(note, RunReadWarning, stacklevel=2)
            return
    if tail.strip():
        note = f"{path}: torn last line ({len(tail)} bytes) skipped"
        notes.append(note)
        warnings.warn(note, RunReadWarning, stacklevel=2)


def read_manifest(run_dir: Path) -> RunManifest:
    return RunManifest.model_validate_json((run_dir / "manifest.json").read_text())


def read_config(run_dir: Path) -> dict:
    path = run_dir / "config.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def fingerprint(run_dir: Path) -> list[list[object]]:
    """Size and mtime of every file the tables come from: any change shows."""
    out: list[list[object]] = []
    for name in FINGERPRINT_FILES:
        try:
            st = (run_dir / name).stat()
        except FileNotFoundError:
            continue
        out.append([name, st.st_size, st.st_mtime_ns])
    return out


def find_runs(path: Path) -> list[Path]:
    """``path`` itself if it is a run folder, else every run folder beneath it."""
    if (path / "manifest.json").is_file():
        return [path]
    found = []
    for manifest in path.rglob("manifest.json"):
        rel = manifest.relative_to(path).parts
        if any(part.startswith((".", "_")) for part in rel[:-1]):
            continue  # _analysis/, .hidden/ and the like are not runs
        found.append(manifest.parent)
    return sorted(found)

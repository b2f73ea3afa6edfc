"""Reading a finished (or crashed, or running) run folder, for every tool
that looks at runs after the fact: the export, the SQL store, the analysis.

``find_runs`` finds run folders under a root; ``read_run`` reads one through
the layout its ``manifest.json`` records (``read_manifest`` refuses a folder
of another version in one line). A torn last line, or an unreadable
one, ends that file's records there and is noted, never raised: a crashed run
shows what it holds. ``verify`` reads the same files strictly instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.store.jsonl import scan
from harness.store.lineage import own_start
from harness.store.records import Record, ReplyRecord, RunLayout, RunManifest, Usage
from harness.store.rundir import RunFolderError, read_manifest


def find_runs(path: Path) -> list[Path]:
    """``path`` itself if it is a run folder, else every run folder beneath it
    (folders whose name starts with ``.`` or ``_``, such as ``_analysis/``, are not runs)."""
    if (path / "manifest.json").is_file():
        return [path]
    found = []
    # os.walk, not rglob: it prunes as it goes, and a folder that vanishes
    # mid-walk (a new run's staging folder, renamed into place) is skipped, not an error
    for folder, subfolders, files in os.walk(path):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "_"))]
        if "manifest.json" in files:
            found.append(Path(folder))
    return sorted(found)


# libyaml's loader where it is built in: parsing config.yaml is most of a cold store build
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_config(run_dir: Path) -> dict[str, Any]:
    """``run_dir``'s config.yaml ({} if it has none); a file that is no YAML
    mapping is a ``RunFolderError`` naming it, never a parser's page."""
    path = run_dir / "config.yaml"
    if not path.exists():
        return {}
    try:
        config = yaml.load(path.read_text(), Loader=_LOADER) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise RunFolderError(
            f"{path}: unreadable: not valid YAML ({getattr(exc, 'problem', None) or 'parse error'}{where})"
        ) from None
    if not isinstance(config, dict):
        raise RunFolderError(f"{path}: unreadable: a {type(config).__name__}, not a mapping of keys")
    return config


def fingerprint_checked(run_dir: Path) -> None:
    """The folder's fingerprint.json parses as ``harness.store.fingerprint`` writes it."""
    path = run_dir / "fingerprint.json"
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:  # JSONDecodeError, or bytes that are no UTF-8
        raise RunFolderError(f"{path}: unreadable: not valid JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("parts"), dict):
        raise RunFolderError(f"{path}: unreadable: no 'parts' object")


# What each of a run's own files is read by, and what a run lacking it loses
RUN_FILES: dict[str, tuple[Callable[[Path], object], str]] = {
    "manifest.json": (read_manifest, "this is no run folder"),
    "config.yaml": (read_config, "it holds the config the run was made with"),
    "fingerprint.json": (fingerprint_checked, "it records what a resume must match"),
}


def run_file_problems(run_dir: Path, names: Iterable[str] = RUN_FILES) -> list[str]:
    """One line naming the file for each of ``names`` that ``run_dir`` holds but
    cannot be read, or lacks though its manifest makes it a run (a folder
    killed before its manifest was written has no fingerprint yet)."""
    started = (run_dir / "manifest.json").is_file()
    problems = []
    for name in names:
        path = run_dir / name
        read, why = RUN_FILES[name]
        if not path.is_file():
            if started:
                problems.append(f"{path}: missing; {why}")
            continue
        try:
            read(run_dir)
        except RunFolderError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"{path}: unreadable: {exc.strerror or exc}")
    return problems


def check_run_files(run_dir: Path, names: Iterable[str] = RUN_FILES) -> None:
    """Refuse, in one line naming the file, a run folder whose own files a
    command reads (``names``) cannot be read: resume, export and fork check first."""
    if problems := run_file_problems(run_dir, names):
        raise RunFolderError(problems[0])


def read_records(path: Path, notes: list[str]) -> Iterator[Record]:
    """The records of one log, up to its last complete, readable one."""
    lines = scan(path)
    for line in lines:
        if line.record is None:
            notes.append(f"{path}: line {line.index + 1} unreadable ({line.error}); read the lines before it")
            return
        yield line.record
    if lines.tail.strip():
        notes.append(f"{path}: torn last line ({len(lines.tail)} bytes) skipped")


@dataclass
class RunFolder:
    """One run folder, read: its manifest, config, layout and every log's records."""

    path: Path
    manifest: RunManifest
    config: dict[str, Any]
    layout: RunLayout
    files: dict[str, list[Record]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what could not be read

    def of(self, name: str) -> list[Record]:
        return self.files.get(name, [])


def read_run(run_dir: Path, *, skip: tuple[str, ...] = ()) -> RunFolder:
    """Read ``run_dir`` whole (logs whose name ends with one of ``skip``, such
    as ``prompts.jsonl``, are left out)."""
    manifest = read_manifest(run_dir)
    run = RunFolder(run_dir, manifest, read_config(run_dir), manifest.layout)
    for name in run.layout.files():
        if not name.endswith(skip):
            run.files[name] = list(read_records(run_dir / name, run.notes))
    return run


def ledger(run_dir: Path) -> Usage:
    """What a run's model calls cost, summed over every reply it kept (each
    paid call keeps one, retries aside): the figure a budget is charged with
    and a provider's bill is checked against. Replayed replies are not kept
    twice, so nothing is counted twice; a fork's copied prefix is its parent's bill."""
    total = Usage()
    for reply in replies(run_dir):
        total = total + reply.usage
    return total


def replies(run_dir: Path) -> Iterator[ReplyRecord]:
    """Every reply a run kept, a folder (``public``, each seat) at a time: one per
    paid call. A fork's prefix was paid by its parent: its replies are not the fork's."""
    own = own_start(run_dir, read_manifest(run_dir)) if (run_dir / "manifest.json").is_file() else {}
    for path in sorted(run_dir.glob("*/replies.jsonl")):
        start = own.get(str(path.relative_to(run_dir)))
        for line in scan(path, start.offset if start else 0):
            if isinstance(line.record, ReplyRecord):
                yield line.record

"""A run folder's integrity (``python -m harness.verify`` prints it).

What every format promises, checked here:
- the manifest is readable, of this harness's run-folder version, and names
  the run's layout;
- every log's hash chain and sequence numbers, and unreadable lines;
- duplicate record ids, and records of a kind the format does not write;
- every snapshot agrees with the memory files;
- a fork's shared prefix matches its lineage's hash, and its parent's logs
  while the parent is there (``harness.store.lineage``);
- no seat's private text appears in another seat's prompts, for every pair
  of seats, unless it was published, is public, or that seat wrote it too
  (in a record, or in a reply before any of its prompts showed it), or the
  seat it is private to only echoed it from a prompt of its own.
Then the format's own checks (``Format.checks``: for drift, that every
argument traces back to an approval and that probes wrote only to their own
team's folder; for the panel, the blind first round and the aliases), which
the caller passes in: the store knows no format.
``harness.formats.checks`` passes every format's; a call without them says
in its notes that they were not run. Quarantined torn lines are reported as
notes, not violations: they are what a crash mid-write leaves, and resume
already moved them aside.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.store.jsonl import scan
from harness.store.lineage import check_lineage
from harness.store.memory import line_hash
from harness.store.records import (
    Envelope,
    EventRecord,
    PromptRecord,
    Published,
    Record,
    ReplyRecord,
    RunLayout,
    RunManifest,
)
from harness.store.rundir import RunFolderError, read_manifest
from harness.store.snapshot import list_snapshots, read_snapshot, snapshot_problems

MIN_PRIVATE_CHARS = 24  # shorter strings match by coincidence too often to mean a leak
# Envelope fields and links: never text a model wrote.
_NOT_TEXT = set(Envelope.model_fields) | {"kind", "decision", "source", "phase", "alias"}


@dataclass
class RunLogs:
    """Every record of a run folder, by file, as ``verify`` read them."""

    layout: RunLayout
    manifest: RunManifest | None
    files: dict[str, list[Record]]

    def of(self, name: str) -> list[Record]:
        return self.files.get(name, [])


# An integrity check: the run's records in, one line per violation out.
Check = Callable[[RunLogs], list[str]]


def read_log(path: Path, name: str, problems: list[str]) -> list[Record]:
    """Parse a log, checking its chain, sequence and ids as it goes."""
    records: list[Record] = []
    seen: set[str] = set()
    prev: str | None = None
    lines = scan(path)
    for line in lines:
        i, record = line.index, line.record
        if record is None:
            problems.append(f"{name}:{i + 1}: unreadable record")
        else:
            if record.seq != i:
                problems.append(f"{name}:{i + 1}: seq {record.seq}, expected {i}")
            if record.prev_hash != prev:
                problems.append(f"{name}:{i + 1}: hash chain broken (record {record.id})")
            if record.id in seen:
                problems.append(f"{name}:{i + 1}: duplicate id {record.id}")
            seen.add(record.id)
            records.append(record)
        prev = line_hash(line.raw)
    if lines.tail:
        problems.append(f"{name}: last line is torn (no newline); resume will quarantine it")
    return records


def texts(record: Record) -> set[str]:
    """The text a model wrote in ``record``, field by field."""
    out: set[str] = set()
    for key, value in record.model_dump().items():
        if key not in _NOT_TEXT and not key.endswith("_id") and isinstance(value, str):
            out.add(value)
    return {t for t in out if len(t) >= MIN_PRIVATE_CHARS}


def prompt_text(records: list[Record]) -> str:
    return "\n".join(m["content"] for r in records if isinstance(r, PromptRecord) for m in r.messages)


def check_isolation(layout: RunLayout, logs: dict[str, list[Record]]) -> list[str]:
    """For every pair of seats: A's private text must not reach B's prompts,
    unless it was published, is public, is template text, B wrote it too, or A
    only echoed it from its own prompts."""
    public_files = ["shared_memory.jsonl", *(f"public/{log}.jsonl" for log in layout.public_logs)]
    # Each seat's first prompt holds only what no model wrote (templates, the
    # motion, a default persona): a model that echoes it leaks nothing.
    firsts = [prompt_text(logs.get(f"{s.name}/prompts.jsonl", [])[:1]) for s in layout.seats]
    public = "\n".join([*(t for name in public_files for r in logs.get(name, []) for t in texts(r)), *firsts])
    private = {seat.name: private_texts(seat.name, seat.logs, logs) for seat in layout.seats}
    problems = []
    for a, b in itertools.permutations([s.name for s in layout.seats], 2):
        prompts, replies = logs.get(f"{b}/prompts.jsonl", []), logs.get(f"{b}/replies.jsonl", [])
        own = logs.get(f"{a}/prompts.jsonl", []), logs.get(f"{a}/replies.jsonl", [])
        seen_by_b = prompt_text(prompts)
        for text in sorted(private[a].keys() - private[b].keys()):
            excused = (
                text not in seen_by_b
                or text in public
                or wrote_first(prompts, replies, text)
                or echoed(*own, text, private[a][text])
            )
            if not excused:
                problems.append(f"{b}/prompts.jsonl: contains {a}'s private text {text[:40]!r}")
    return problems


def private_texts(
    seat: str, seat_logs: Sequence[str], logs: Mapping[str, list[Record]]
) -> dict[str, datetime]:
    """{text: the time the first of ``seat``'s records holding it was written}."""
    first: dict[str, datetime] = {}
    for log in seat_logs:
        if log == "prompts":
            continue
        for r in logs.get(f"{seat}/{log}.jsonl", []):
            for t in texts(r):
                first[t] = min(first.get(t, r.ts), r.ts)
    return first


def echoed(prompts: list[Record], replies: list[Record], text: str, recorded: datetime) -> bool:
    """A seat's model wrote ``text`` only after a prompt of its own showed it: it echoed
    its prompt (a template's words, the motion), as SmolLM2's critic echoes the line
    ``Motion: ...`` it was shown. Where the prompt took it from is checked on its own:
    another seat's private text there is that seat's leak. Its own private text, shown
    back to it, was written (a record, a reply) before any prompt showed it."""
    shown = [r.ts for r in prompts if text in prompt_text([r])]
    escaped = json.dumps(text, ensure_ascii=False)[1:-1]  # as it stands inside a JSON reply
    written = [r.ts for r in replies if isinstance(r, ReplyRecord) and (text in r.text or escaped in r.text)]
    return bool(shown) and min(shown) < min([recorded, *written])


def wrote_first(prompts: list[Record], replies: list[Record], text: str) -> bool:
    """A seat's own model wrote ``text`` in a reply before any of its prompts showed it.
    Two seats on one model at temperature 0 can write the same words, and a repair
    prompt shows a seat its own failed reply, which no record but the reply keeps.
    A leak echoed back comes after the prompt that leaked it, so it is not excused."""
    shown = [r.ts for r in prompts if text in prompt_text([r])]
    return bool(shown) and any(
        isinstance(r, ReplyRecord) and text in r.text and r.ts <= min(shown) for r in replies
    )


def check_kinds(layout: RunLayout, logs: dict[str, list[Record]]) -> list[str]:
    """Records of a kind the format does not write, and misplaced statements."""
    problems = []
    allowed = set(layout.record_kinds)
    for name, records in logs.items():
        for r in records:
            kind = getattr(r, "kind", "?")
            if kind not in allowed:
                problems.append(
                    f"{name}: {r.id} is a {kind!r} record, not one format {layout.format!r} writes"
                )
            elif (name == "shared_memory.jsonl") != isinstance(r, Published):
                where = "outside" if isinstance(r, Published) else "in"
                problems.append(f"{name}: {r.id} ({kind}) {where} the shared transcript")
            elif name == "events.jsonl" and not isinstance(r, EventRecord):
                problems.append(f"{name}: {r.id} ({kind}) is not an event")
    return problems


# A prompt's id and its replies' ids (one per repair attempt), each maybe
# followed by a forced resume's ``.redoN``: both name the call by their head.
_CALL_ID = {
    "prompt": re.compile(r"^(.*)\.prompt(?:\.redo\d+)?$"),
    "reply": re.compile(r"^(.*)\.reply\.\d+(?:\.redo\d+)?$"),
}


def call_base(record_id: str, kind: str) -> str | None:
    """``r0002.for.search_step.i1`` of a prompt's or reply's id; None for an
    id of another kind (the copy of a failed reply, say)."""
    found = _CALL_ID[kind].match(record_id)
    return found.group(1) if found else None


def check_replies(
    layout: RunLayout, logs: dict[str, list[Record]], manifest: RunManifest | None
) -> list[str]:
    """Every prompt sent has its reply kept in the same folder, unless an error
    event of that call says why none came. A run that did not complete may
    lack the reply of each folder's last prompt: the call in flight when it stopped."""
    failed = {
        (e.round, e.team, e.role, e.iteration)
        for e in logs.get("events.jsonl", [])
        if isinstance(e, EventRecord) and e.event == "error"
    }
    folders = [
        *(s.name for s in layout.seats if "replies" in s.logs),
        *(["public"] * ("replies" in layout.public_logs)),
    ]
    problems = []
    for folder in folders:
        prompts = [r for r in logs.get(f"{folder}/prompts.jsonl", []) if call_base(r.id, "prompt")]
        answered = {call_base(r.id, "reply") for r in logs.get(f"{folder}/replies.jsonl", [])}
        in_flight = prompts[-1:] if manifest is None or manifest.status != "completed" else []
        for p in prompts:
            if call_base(p.id, "prompt") in answered or p in in_flight:
                continue
            if (p.round, p.team, p.role, p.iteration) not in failed:
                problems.append(
                    f"{folder}/replies.jsonl: no reply kept for {p.id} (and no error event says why)"
                )
    return problems


def load_manifest(run_dir: Path, problems: list[str]) -> RunManifest | None:
    """The run's manifest (which records its layout), or None with the reason in ``problems``."""
    if not (run_dir / "manifest.json").is_file():
        problems.append(
            "manifest.json: missing (the run died before its first write, or this is no run folder)"
        )
        return None
    try:
        return read_manifest(run_dir)
    except RunFolderError as exc:  # another version, or a file that does not parse: one line naming it
        problems.append(str(exc))
    return None


def verify(run_dir: Path, checks: Mapping[str, Sequence[Check]] | None = None) -> tuple[list[str], list[str]]:
    """(violations, notes) for one run folder. ``checks``: each format's own
    checks by format name (None: they are not run, and a note says so)."""
    problems: list[str] = []
    manifest = load_manifest(run_dir, problems)
    if manifest is None:
        return problems, []
    layout = manifest.layout
    logs = {name: read_log(run_dir / name, name, problems) for name in layout.files()}
    problems += check_kinds(layout, logs)
    for path in list_snapshots(run_dir):
        problems += [f"snapshots/{path.name}: {p}" for p in snapshot_problems(run_dir, read_snapshot(path))]
    problems += check_isolation(layout, logs)
    problems += check_replies(layout, logs, manifest)  # every paid reply is kept
    problems_of_lineage, notes = check_lineage(run_dir, manifest)  # a fork's prefix, against its parent
    problems += problems_of_lineage
    if checks is None:
        notes.append(
            f"format {layout.format!r}: its own checks were not run (none passed in; python -m harness.verify runs them)"
        )
    elif layout.format not in checks:
        problems.append(f"manifest.json: unknown format {layout.format!r}; its own checks were not run")
    else:
        run = RunLogs(layout, manifest, logs)
        for check in checks[layout.format]:
            problems += check(run)
    notes += [
        f"{q.relative_to(run_dir)}: quarantined torn line(s)" for q in sorted(run_dir.rglob("*.quarantine"))
    ]
    return problems, notes

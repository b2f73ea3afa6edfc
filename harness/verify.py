"""python -m harness.verify <run_dir> — check a run folder's integrity.

Prints one line per violation and exits 1 if there is any:
- every log's hash chain and sequence numbers, and unreadable lines;
- duplicate record ids;
- every shared argument has its approval (or loop-lock) in its team's logs;
- every snapshot agrees with the memory files;
- no team's private text appears in the other team's prompts or files.
Quarantined torn lines are reported as notes, not violations: they are what
a crash mid-write leaves, and resume already moved them aside.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from harness.memory import TEAM_LOGS, TEAMS, line_hash
from harness.records import (
    ArgumentRecord,
    CritiqueRecord,
    EventRecord,
    PersonaRecord,
    PromptRecord,
    Record,
    ThinkingRecord,
    parse_record,
)
from harness.snapshot import list_snapshots, read_snapshot, snapshot_problems

MIN_PRIVATE_CHARS = 24  # shorter strings match by coincidence too often to mean a leak


def read_log(path: Path, problems: list[str]) -> list[Record]:
    """Parse a log, checking its chain, sequence and ids as it goes."""
    records: list[Record] = []
    seen: set[str] = set()
    prev: str | None = None
    name = path.name if path.parent.name not in TEAMS else f"{path.parent.name}/{path.name}"
    data = path.read_bytes() if path.exists() else b""
    if data and not data.endswith(b"\n"):
        problems.append(f"{name}: last line is torn (no newline); resume will quarantine it")
    for i, line in enumerate(data.split(b"\n")[:-1]):
        try:
            record = parse_record(line)
        except ValueError:
            problems.append(f"{name}:{i + 1}: unreadable record")
            prev = line_hash(line)
            continue
        if record.seq != i:
            problems.append(f"{name}:{i + 1}: seq {record.seq}, expected {i}")
        if record.prev_hash != prev:
            problems.append(f"{name}:{i + 1}: hash chain broken (record {record.id})")
        if record.id in seen:
            problems.append(f"{name}:{i + 1}: duplicate id {record.id}")
        seen.add(record.id)
        prev = line_hash(line)
        records.append(record)
    return records


def check_arguments(logs: dict[str, list[Record]], problems: list[str]) -> None:
    """Each published argument traces back to an approval, or to a loop-lock."""
    critiques = {
        r.id: r for team in TEAMS for r in logs[f"{team}/critique.jsonl"] if isinstance(r, CritiqueRecord)
    }
    locks = {
        (r.round, r.team)
        for r in logs["events.jsonl"]
        if isinstance(r, EventRecord) and r.event == "loop_lock"
    }
    for arg in logs["shared_memory.jsonl"]:
        assert isinstance(arg, ArgumentRecord)
        verdict = critiques.get(arg.critique_id or "")
        if verdict is None or verdict.team != arg.team:
            problems.append(f"shared_memory.jsonl: {arg.id} has no critique in {arg.team}/critique.jsonl")
        elif arg.source == "loop_lock":
            if (arg.round, arg.team) not in locks:
                problems.append(
                    f"shared_memory.jsonl: {arg.id} published by loop-lock without a loop_lock event"
                )
        elif not verdict.is_approved:
            problems.append(f"shared_memory.jsonl: {arg.id} was published but its critique rejected it")


def private_texts(records: list[Record]) -> set[str]:
    out: set[str] = set()
    for r in records:
        if isinstance(r, PersonaRecord):
            out |= {r.persona, r.rationale}
        elif isinstance(r, ThinkingRecord):
            out |= {r.scratchpad, r.draft}
        elif isinstance(r, CritiqueRecord):
            out |= {r.feedback, r.revised_argument or ""}
    return {t for t in out if len(t) >= MIN_PRIVATE_CHARS}


def check_isolation(logs: dict[str, list[Record]], problems: list[str]) -> None:
    """A team's private text must not reach the other team, unless it was
    published (approved drafts are public), is template text, or the other
    team wrote it too."""
    shared = " ".join(r.text for r in logs["shared_memory.jsonl"] if isinstance(r, ArgumentRecord))
    # Each team's first prompt holds only what no model wrote (templates, the
    # motion, the default persona): a model that echoes it leaks nothing.
    firsts = [logs[f"{t}/prompts.jsonl"][:1] for t in TEAMS]
    public = shared + "\n".join(
        m["content"] for f in firsts for r in f if isinstance(r, PromptRecord) for m in r.messages
    )
    private = {t: private_texts([r for k in TEAM_LOGS for r in logs[f"{t}/{k}.jsonl"]]) for t in TEAMS}
    for team, other in ((TEAMS[0], TEAMS[1]), (TEAMS[1], TEAMS[0])):
        seen_by_other = "\n".join(
            m["content"]
            for r in logs[f"{other}/prompts.jsonl"]
            if isinstance(r, PromptRecord)
            for m in r.messages
        )
        for text in private[team] - private[other]:
            if text in seen_by_other and text not in public:
                problems.append(f"{other}/prompts.jsonl: contains {team}'s private text {text[:40]!r}")


def verify(run_dir: Path) -> tuple[list[str], list[str]]:
    """(violations, notes) for one run folder."""
    problems: list[str] = []
    names = ["shared_memory.jsonl", "events.jsonl"] + [f"{t}/{k}.jsonl" for t in TEAMS for k in TEAM_LOGS]
    logs = {name: read_log(run_dir / name, problems) for name in names}
    check_arguments(logs, problems)
    ids: dict[tuple[int, str | None], int] = defaultdict(int)
    for arg in logs["shared_memory.jsonl"]:
        ids[(arg.round, arg.team)] += 1
    problems += [
        f"shared_memory.jsonl: {n} arguments for round {r} {t}" for (r, t), n in ids.items() if n > 1
    ]
    for path in list_snapshots(run_dir):
        problems += [f"snapshots/{path.name}: {p}" for p in snapshot_problems(run_dir, read_snapshot(path))]
    check_isolation(logs, problems)
    notes = [
        f"{q.relative_to(run_dir)}: quarantined torn line(s)" for q in sorted(run_dir.rglob("*.quarantine"))
    ]
    return problems, notes


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python -m harness.verify <run_dir>", file=sys.stderr)
        return 2
    problems, notes = verify(Path(args[0]))
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(line)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} violation(s) in {args[0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

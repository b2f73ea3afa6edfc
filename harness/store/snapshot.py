"""Round snapshots: written atomically before a round advances, read on resume.

A snapshot names positions in the memory files (offset, count, hash of the
last line), so resume can check that the files still hold what the snapshot
saw, and read each file from near its end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.store.jsonl import line_before
from harness.store.memory import RunMemory, line_hash
from harness.store.records import LogPosition, RunCounts, RunManifest, Snapshot
from harness.store.rundir import write_atomic

SNAPSHOT_DIR = "snapshots"


def snapshot_path(run_dir: Path, round_: int) -> Path:
    return run_dir / SNAPSHOT_DIR / f"round-{round_:04d}.json"


def list_snapshots(run_dir: Path) -> list[Path]:
    """Snapshots, oldest first (names sort by round; strings sort much faster
    than Paths, which matters with thousands of rounds)."""
    folder = run_dir / SNAPSHOT_DIR
    if not folder.is_dir():
        return []
    names = sorted(n for n in os.listdir(folder) if n.startswith("round-") and n.endswith(".json"))
    return [folder / n for n in names]


def read_snapshot(path: Path) -> Snapshot:
    return Snapshot.model_validate_json(path.read_text())


def counts_now(run_dir: Path, manifest: RunManifest) -> RunCounts:
    """The run's counts as of now: a manifest still marked running holds its start's
    (a kill -9 leaves it so: 0 rounds, $0), so they come from its newest round
    snapshot; one half written by the kill, or behind the manifest, leaves the manifest's."""
    try:
        snapshots = list_snapshots(run_dir) if manifest.status == "running" else []
        counts = read_snapshot(snapshots[-1]).counts if snapshots else None
    except (OSError, ValueError):
        return manifest.counts
    if counts is None or counts.rounds_completed < manifest.counts.rounds_completed:
        return manifest.counts
    return counts


def check_position(run_dir: Path, name: str, pos: LogPosition) -> str | None:
    """Why ``name`` no longer holds what ``pos`` recorded, or None if it does."""
    path = run_dir / name
    if not path.exists():
        return f"{name}: missing"
    if os.path.getsize(path) < pos.offset:
        return f"{name}: shorter than the snapshot saw ({os.path.getsize(path)} < {pos.offset} bytes)"
    line = line_before(path, pos.offset)
    if (line_hash(line) if line is not None else None) != pos.last_hash:
        return f"{name}: the record before byte {pos.offset} differs from the snapshot's"
    return None


def snapshot_problems(run_dir: Path, snap: Snapshot) -> list[str]:
    positions = [*snap.logs.items(), *snap.window.items()]
    problems = [check_position(run_dir, name, pos) for name, pos in positions]
    return list(dict.fromkeys(p for p in problems if p))  # one line per distinct problem


def latest_valid(run_dir: Path) -> tuple[Snapshot | None, list[str]]:
    """The newest snapshot the memory files agree with, and why newer ones were skipped."""
    skipped: list[str] = []
    for path in reversed(list_snapshots(run_dir)):
        snap = read_snapshot(path)
        problems = snapshot_problems(run_dir, snap)
        if not problems:
            return snap, skipped
        skipped.append(f"{path.name}: {problems[0]}")
    return None, skipped


class Snapshotter:
    """Writes ``round-NNNN.json`` when the graph state moves to a new round.

    Counts accumulate per round (the records since the last snapshot), so the
    cost of a snapshot does not grow with the rounds already run.
    """

    def __init__(
        self,
        run_dir: Path,
        memory: RunMemory,
        *,
        seed: int,
        fingerprint: str,
        window_rounds: int,
        base: Snapshot | None,
    ) -> None:
        self.run_dir = run_dir
        self.memory = memory
        self.seed = seed
        self.fingerprint = fingerprint
        self.window_rounds = max(1, window_rounds)
        self.counts = base.counts if base else RunCounts()
        self.since = base.logs if base else {}
        self.last_round = base.round if base else 0
        (run_dir / SNAPSHOT_DIR).mkdir(exist_ok=True)

    def totals(self) -> RunCounts:
        """Counts so far: up to the last snapshot, plus everything since."""
        return self.counts + self.memory.tally(self.since)

    def sync(self) -> None:
        """The logs' lines on disk (``memory.fsync=round``; a no-op under ``record``)."""
        self.memory.sync()

    def observe(self, state: dict[str, Any]) -> None:
        completed = state["round"] - 1
        if completed <= self.last_round:
            return
        self.counts = self.totals()
        self.counts.rounds_completed = completed
        self.since = self.memory.positions()
        snap = Snapshot(
            round=completed,
            state=dict(state),
            logs=self.since,
            window={
                name: pos
                for name, pos in self.memory.window_positions(completed + 1 - self.window_rounds).items()
                if name not in self.memory.layout.whole_logs  # read whole on resume
            },
            counts=self.counts,
            seed=self.seed,
            fingerprint=self.fingerprint,
        )
        self.sync()  # every line the snapshot points at is on disk before it is
        write_atomic(snapshot_path(self.run_dir, completed), snap.model_dump_json(indent=1))
        self.last_round = completed

"""A fork grid (``python -m harness.fork -m``: fork overrides and rounds over
every run of a sweep) runs as a sweep: cells as threads of one process, its
driver SIGKILLed with cells in flight, then ``python -m harness.sweep resume``
completes every cell, each fork verifying clean (its prefix against its
parent) and paying each of its own calls once, the prefix's none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_fork import start
from test_sweep_inprocess import cell_starts, kill_when

from harness.formats.checks import verify
from harness.store.reader import replies
from harness.store.rundir import read_manifest
from harness.sweep.index import read_index


def test_a_fork_grid_killed_mid_flight_resumes_to_every_cell(tmp_path: Path) -> None:
    parents = [start(tmp_path / "parents", f"seed-{seed}", "rounds=3", f"seed={seed}") for seed in (1, 2)]
    before = {p: (p / "shared_memory.jsonl").read_bytes() for p in parents}
    sweep_dir = tmp_path / "forks"
    grid = [
        f"fork.parent={','.join(str(p) for p in parents)}",
        "fork.at_round=1,2",
        "critic=lenient,strict",
        "model=scripted",
        "model.latency_s=0.05",
        "progress=false",
        "sweep.concurrency=2",
    ]
    kill_when(sweep_dir, grid, lambda: cell_starts(sweep_dir) >= 3)
    out = subprocess.run(
        [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    index = read_index(sweep_dir)
    assert [c.status for c in index.cells] == ["completed"] * 8
    assert index.cells[0].name == "parent-seed-1_at-round-1_critic-lenient"
    assert [c.seed for c in index.cells] == [1] * 4 + [2] * 4  # each fork's parent's seed, not the default
    for cell in index.cells:
        run_dir = sweep_dir / cell.name
        assert verify(run_dir)[0] == [], cell.name
        manifest = read_manifest(run_dir)
        assert manifest.lineage is not None and manifest.lineage.changed["critic.name"] in (
            "lenient",
            "strict",
        )
        own = [r.id for r in replies(run_dir)]
        assert len(own) == len(set(own)) == manifest.counts.model_calls, cell.name  # each own call once
        assert not [r for r in own if ".redo" in r], cell.name
    assert {p: (p / "shared_memory.jsonl").read_bytes() for p in parents} == before

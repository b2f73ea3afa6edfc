"""Loading run folders into tables: counts, trees, torn lines, the cache."""

from __future__ import annotations

import os

import pytest

from analysis import RunReadWarning, load_runs, process_signals
from harness.store.records import RunCounts
from harness.store.rundir import write_manifest


def test_tables_match_the_run(run):
    result = run("rounds=3", "model.reject_first=1")
    t = load_runs(result.run_dir, cache=False)
    counts = result.manifest.counts
    assert len(t.runs) == 1 and t.runs.status.iloc[0] == "completed"
    assert len(t.turns) == counts.published == 6
    assert len(t.drafts) == counts.approvals + counts.rejections == 12
    assert t.drafts.published.sum() == 6
    assert set(t.turns.team) == {"pros", "cons"}
    assert t.runs["cfg.model.reject_first"].iloc[0] == 1
    process = process_signals(t)
    assert (process.critique_iterations == 2).all() and (process.rejection_rate == 0.5).all()


def test_a_killed_runs_counts_are_its_last_snapshots(run):
    """A run killed with kill -9 keeps the manifest it started with: the runs table said
    0 rounds, 0 published and 0 tokens beside the turns it had; its counts now come from
    its newest round snapshot, as the sweep's status takes them."""
    result = run("rounds=2")
    killed = result.manifest.model_copy(update={"status": "running", "counts": RunCounts()})
    write_manifest(result.run_dir, killed)
    row = load_runs(result.run_dir, cache=False).runs.iloc[0]
    assert row.status == "running" and row["counts.rounds_completed"] == 2
    assert row["counts.published"] == result.manifest.counts.published == 4
    assert row["counts.input_tokens"] == result.manifest.counts.input_tokens > 0


def test_tree_of_runs_and_sweep_cells(run, runs_root):
    run("rounds=1", "llm.temperature=0.2", f"runs_root={runs_root}/sweep/a")
    run("rounds=1", "llm.temperature=0.9", f"runs_root={runs_root}/sweep/b")
    run("rounds=1", "llm.temperature=0.9", "seed=5", f"runs_root={runs_root}/sweep/b")
    (runs_root / "_analysis" / "junk").mkdir(parents=True)
    (runs_root / "_analysis" / "junk" / "manifest.json").write_text("{}")  # never read as a run
    t = load_runs(runs_root)
    assert sorted(r.split("/")[1] for r in t.runs.run_id) == ["a", "b", "b"]
    assert t.runs.groupby("cell").size().sort_values().tolist() == [1, 2]  # replicates share a cell


def test_torn_last_line_loads_up_to_last_complete_record(run):
    result = run("rounds=2")
    shared = result.run_dir / "shared_memory.jsonl"
    with open(shared, "a") as fh:
        fh.write('{"kind": "argument", "id": "r0003.pros.argu')  # a crash mid-write
    with pytest.warns(RunReadWarning, match="torn last line"):
        t = load_runs(result.run_dir, cache=False)
    assert len(t.turns) == 4
    assert bool(t.runs.partial.iloc[0])


def test_cache_is_used_until_the_run_changes(run):
    result = run("rounds=2")
    first = load_runs(result.run_dir)
    assert first.cache_hits == 0
    again = load_runs(result.run_dir)
    assert again.cache_hits == 1
    assert again.turns.text.tolist() == first.turns.text.tolist()
    shared = result.run_dir / "shared_memory.jsonl"
    lines = shared.read_text().splitlines(keepends=True)
    shared.write_text("".join(lines[:-1]))  # the run changed: one turn fewer
    os.utime(shared, ns=(1, 1))
    changed = load_runs(result.run_dir)
    assert changed.cache_hits == 0 and len(changed.turns) == 3


def test_one_run_and_its_tree_keep_separate_caches(run, runs_root):
    first = run("rounds=1").run_dir
    run("rounds=1", "seed=2")
    assert load_runs(first).cache_hits == 0
    assert load_runs(runs_root).cache_hits == 0  # the tree has its own cache...
    assert load_runs(first).cache_hits == 1  # ...and filling it left the single run's intact
    assert load_runs(runs_root).cache_hits == 2
    assert (runs_root / "_analysis" / first.name / "cache").is_dir()

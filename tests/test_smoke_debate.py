"""End-to-end debates on the scripted model."""

from __future__ import annotations

import json

from harness.store.records import parse_record


def lines(path):
    return [parse_record(line) for line in path.read_text().splitlines()]


def test_fifty_rounds_on_scripted_model(run):
    result = run("rounds=50")
    shared = lines(result.run_dir / "shared_memory.jsonl")
    assert result.manifest.status == "completed"
    assert result.manifest.counts.rounds_completed == 50
    assert len(shared) == 100
    assert [(a.round, a.team) for a in shared[:3]] == [(1, "pros"), (1, "cons"), (2, "pros")]
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"


def test_same_config_gives_identical_arguments(run):
    first = run("rounds=3", "model.reject_first=1")
    second = run("rounds=3", "model.reject_first=1")
    a = [r.text for r in lines(first.run_dir / "shared_memory.jsonl")]
    b = [r.text for r in lines(second.run_dir / "shared_memory.jsonl")]
    assert a == b and len(a) == 6
    assert second.run_dir.name == first.run_dir.name + "-2"

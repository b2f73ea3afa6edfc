"""Every format's logs do not change when code moves: at fixed seeds on the
scripted model, each run writes the same files, and each file the same
records (ids, order, text and every other field but time), as on the main
before issue 25's restructuring (``fixtures/formats_golden.json``, made by
``fixtures/make_formats_golden.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.make_formats_golden import CASES, stable

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "formats_golden.json").read_text())


@pytest.mark.parametrize(("name", "overrides"), CASES, ids=[c[0] for c in CASES])
def test_each_format_writes_the_golden_logs(run, search_cache, name, overrides):
    extra = [f"search.cache_dir={search_cache}"] if "format=grounded" in overrides else []
    run_dir = run(*overrides, *extra).run_dir
    golden = GOLDEN[name]
    assert golden["overrides"] == overrides
    files = {str(p.relative_to(run_dir)): p for p in sorted(run_dir.rglob("*.jsonl"))}
    assert sorted(files) == sorted(golden["files"])
    for file, expected in golden["files"].items():
        got = [stable(json.loads(line)) for line in files[file].read_text().splitlines()]
        assert [r["id"] for r in got] == [r["id"] for r in expected], file
        for new, old in zip(got, expected, strict=True):
            assert new == old, (file, old["id"])


def test_the_golden_runs_hold_faults_and_every_format():
    assert sorted(GOLDEN) == ["drift", "grounded", "judge_refine", "moderated", "panel"]
    events = {e["event"] for case in GOLDEN.values() for e in case["files"]["events.jsonl"]}
    assert {"retry", "schema_failure"} <= events
    assert all(case["files"]["shared_memory.jsonl"] for case in GOLDEN.values())

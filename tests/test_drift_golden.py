"""The drift format's transcript and records do not change: at fixed seeds
on the scripted model, every record keeps the text, order and ids (and every
other field) it had before formats became objects (``fixtures/drift_golden.json``,
made by ``fixtures/make_drift_golden.py`` on the main of that time; since
issue 39 the scripted texts end their sentences and begin with a capital, the
changes made on purpose)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.make_drift_golden import CASES, stable

GOLDEN = json.loads((Path(__file__).parent / "fixtures" / "drift_golden.json").read_text())


@pytest.mark.parametrize(("name", "overrides"), CASES, ids=[c[0] for c in CASES])
def test_drift_records_equal_the_golden(run, name, overrides):
    result = run(*overrides)
    golden = GOLDEN[name]
    assert golden["overrides"] == overrides
    for file, expected in golden["files"].items():
        lines = (result.run_dir / file).read_text().splitlines()
        got = [stable(json.loads(line)) for line in lines]
        assert [r["id"] for r in got] == [r["id"] for r in expected], file
        for new, old in zip(got, expected, strict=True):
            # fields added since may appear; every field the golden has is unchanged
            assert {k: new.get(k) for k in old} == old, (file, old["id"])
    # drift keeps its team folders by name
    assert (result.run_dir / "pros").is_dir() and (result.run_dir / "cons").is_dir()


def test_golden_cases_publish_and_exercise_faults():
    """The golden is worth keeping only if it holds rejections, faults and loop-locks."""
    events = {e["event"] for case in GOLDEN.values() for e in case["files"]["events.jsonl"]}
    assert {"retry", "schema_failure", "loop_lock", "topic"} <= events
    assert all(case["files"]["shared_memory.jsonl"] for case in GOLDEN.values())

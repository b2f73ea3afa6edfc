"""Code moved out of a module the fingerprint hashes, changing nothing a run
does (``harness.store.fingerprint.MOVED_CODE``): a run fingerprinted before
the move resumes without ``force``; any other digest of the module still
asks for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_durable_faults import cut_at, last_snapshot

from harness.engine import resume_run
from harness.engine.resuming import ResumeError
from harness.formats import FORMATS
from harness.store import fingerprint
from harness.store.fingerprint import module_file, sha256

MODULE = "harness.formats.moderated"
KEY = f"prompts.{MODULE}"


def test_a_run_made_before_the_move_resumes_unforced_and_no_other(run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    run_dir: Path = run("format=moderated", "model.factcheck_fail_rate=0.0").run_dir
    cut_at(run_dir, last_snapshot(run_dir))
    path = run_dir / "fingerprint.json"  # as a harness before the move wrote it
    payload = json.loads(path.read_text())
    payload["parts"]["prompts"][MODULE] = "before-the-move"
    path.write_text(json.dumps(payload))
    now = sha256(module_file(MODULE).read_bytes())
    monkeypatch.setitem(fingerprint.MOVED_CODE, KEY, (("another-digest", now),))
    with pytest.raises(ResumeError, match=f"{KEY}: 'before-the-move' -> '{now}'"):
        resume_run(run_dir)
    # two moves since the run was made: each step is recorded, the chain leads to today's
    monkeypatch.setitem(fingerprint.MOVED_CODE, KEY, (("before-the-move", "between"), ("between", now)))
    result = resume_run(run_dir)
    assert [h.action for h in result.manifest.history][-2:] == ["resume", "complete"]


def test_each_moved_module_is_one_a_format_hashes_and_its_moves_end_at_todays_code() -> None:
    hashed = {f"prompts.{name}" for fmt in FORMATS.values() for name in fmt.prompt_modules}
    assert set(fingerprint.MOVED_CODE) <= hashed
    for key, moves in fingerprint.MOVED_CODE.items():
        today = sha256(module_file(key.removeprefix("prompts.")).read_bytes())
        assert fingerprint.moved(key, moves[0][0], today), key  # the oldest digest leads to today's


def test_a_loop_or_a_gap_in_the_moves_is_no_move(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(fingerprint.MOVED_CODE, KEY, (("a", "b"), ("b", "a")))
    assert not fingerprint.moved(KEY, "a", "c")
    monkeypatch.setitem(fingerprint.MOVED_CODE, KEY, (("a", "b"), ("c", "d")))
    assert fingerprint.moved(KEY, "a", "b") and not fingerprint.moved(KEY, "a", "d")

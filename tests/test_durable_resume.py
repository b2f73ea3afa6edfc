"""Resume in-process: failures, fingerprints, extension, snapshots."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import compose_cfg
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import resuming, run_debate
from harness.resume import ResumeError, resume_run
from harness.store.records import Snapshot
from harness.store.snapshot import list_snapshots, read_snapshot
from harness.verify import verify

FAIL_FAST = ["retry.max_attempts=1", "retry.initial_s=0", "retry.jitter_s=0"]


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed 2-round scripted run, made once; tests resume copies of it."""
    root = tmp_path_factory.mktemp("two-rounds")
    cfg = compose_cfg(["model=scripted", f"runs_root={root}", "progress=false", "run_name=two", "rounds=2"])
    return run_debate(resolve(cfg), OmegaConf.to_container(cfg, resolve=True)).run_dir  # type: ignore[arg-type]


@pytest.fixture
def finished(two_rounds: Path, tmp_path: Path) -> Path:
    return shutil.copytree(two_rounds, tmp_path / "two")


def jsonl_bytes(run_dir: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in run_dir.rglob("*.jsonl")}


def shared(run_dir: Path) -> list[str]:
    return [json.loads(line)["text"] for line in (run_dir / "shared_memory.jsonl").read_text().splitlines()]


def events(run_dir: Path, kind: str) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


def failing_run(run, runs_root: Path) -> Path:
    """A run that fails part-way: transient errors with no retries left."""
    from harness.runtime.context import ModelCallError

    with pytest.raises(ModelCallError):
        run("rounds=6", "model.error_rate=0.05", "model.seed=3", *FAIL_FAST)
    (run_dir,) = runs_root.iterdir()
    return run_dir


def test_failed_run_is_stored_as_data_and_resumes_once_fixed(run, runs_root):
    run_dir = failing_run(run, runs_root)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"]["kind"] == "transient" and manifest["error"]["type"] == "ProviderError"
    assert events(run_dir, "error")
    # fixing the cause changes the config, so resume refuses unless forced
    with pytest.raises(ResumeError, match="model.error_rate"):
        resume_run(run_dir, overrides=["model.error_rate=0"])
    result = resume_run(run_dir, force=True, overrides=["model.error_rate=0"])
    assert result.manifest.status == "completed"
    assert [h.action for h in result.manifest.history][-2:] == ["resume_forced", "complete"]
    assert "forced past" in events(run_dir, "resume")[-1]["detail"]
    assert verify(run_dir)[0] == []
    reference = run("rounds=6", "model.seed=3")
    assert shared(run_dir) == shared(reference.run_dir)


def test_fingerprint_mismatch_names_what_differs(run):
    result = run("rounds=2")
    cfg_path = result.run_dir / "config.yaml"
    cfg = yaml.safe_load(cfg_path.read_text())
    cfg["llm"]["temperature"] = 1.3
    cfg["rounds"] = 3  # rounds may change: it is how a run is extended
    cfg_path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ResumeError) as err:
        resume_run(result.run_dir)
    assert "config.llm.temperature: 0.7 -> 1.3" in str(err.value)
    assert "rounds" not in str(err.value).split("):")[1]


def test_extending_a_finished_run_equals_a_longer_run(run):
    short = run("rounds=3", "model.reject_first=1")
    extended = resume_run(short.run_dir, overrides=["rounds=5"])
    longer = run("rounds=5", "model.reject_first=1")
    assert extended.manifest.status == "completed"
    assert extended.manifest.counts.rounds_completed == 5
    assert shared(short.run_dir) == shared(longer.run_dir)
    # tokens and latency vary; the extension adds its resume event
    varies = {"input_tokens", "output_tokens", "usage_by_role", "usage_by_stage", "by_event"}
    assert extended.manifest.counts.model_dump(exclude=varies) == longer.manifest.counts.model_dump(
        exclude=varies
    )
    calls = {role: u.calls for role, u in longer.manifest.counts.usage_by_role.items()}
    assert {role: u.calls for role, u in extended.manifest.counts.usage_by_role.items()} == calls
    assert extended.manifest.counts.by_event == {**longer.manifest.counts.by_event, "resume": 1}


def test_an_extension_killed_as_it_starts_is_the_runs_new_length(finished, run, monkeypatch):
    """``rounds=4`` is written to config.yaml before a round runs under it, so the
    plain resume a killed extension prints goes on to 4, as a 4-round run would."""

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # a kill -9 before the extension wrote a line

    monkeypatch.setattr(resuming, "execute", killed)
    with pytest.raises(KeyboardInterrupt):
        resume_run(finished, overrides=["rounds=4"])
    monkeypatch.undo()
    assert yaml.safe_load((finished / "config.yaml").read_text())["rounds"] == 4
    resumed = resume_run(finished)
    assert resumed.manifest.status == "completed" and resumed.manifest.counts.rounds_completed == 4
    assert shared(finished) == shared(run("rounds=4").run_dir)
    assert verify(finished)[0] == []


def test_a_resume_cannot_make_a_run_shorter_than_its_rounds_done(finished):
    before, config = jsonl_bytes(finished), (finished / "config.yaml").read_bytes()
    with pytest.raises(ResumeError, match=r"rounds=1: .* has 2 round\(s\) done; a resume cannot") as err:
        resume_run(finished, overrides=["rounds=1"])
    assert "\n" not in str(err.value) and "python -m harness.fork" in str(err.value)
    # killed in round 2 (its records landed, its snapshot not): rounds=1 would leave round 2 in the logs
    (finished / "snapshots" / "round-0002.json").unlink()
    with pytest.raises(
        ResumeError, match=r"rounds=1: .* has 1 of its 2 rounds done, and its logs may hold round 2"
    ):
        resume_run(finished, overrides=["rounds=1"])
    assert jsonl_bytes(finished) == before and (finished / "config.yaml").read_bytes() == config


def test_cutting_an_unfinished_run_to_its_rounds_done_says_why_not(finished):
    # set for 5, stopped after round 2: rounds=2 is no shorter than what it has, as the refusal
    # said; its logs may hold round 3 begun, and the refusal now says that
    config = yaml.safe_load((finished / "config.yaml").read_text())
    (finished / "config.yaml").write_text(yaml.safe_dump({**config, "rounds": 5}))
    with pytest.raises(ResumeError) as err:
        resume_run(finished, overrides=["rounds=2"])
    assert str(err.value).startswith(
        f"rounds=2: {finished} has 2 of its 5 rounds done, and its logs may hold round 3 begun; "
        "a resume cannot end it there (a shorter branch: python -m harness.fork"
    )


def test_a_finished_run_refuses_a_key_that_may_not_change(finished):
    with pytest.raises(ResumeError, match=r"fingerprint mismatch .*config.llm.temperature: 0.7 -> 1.0"):
        resume_run(finished, overrides=["llm.temperature=1.0"])


def test_a_torn_last_line_is_quarantined_by_resume_and_recorded_by_one_that_runs(finished):
    with open(finished / "shared_memory.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"tor')
    assert verify(finished)[0] == [
        "shared_memory.jsonl: last line is torn (no newline); resume will quarantine it"
    ]
    again = resume_run(finished)
    assert again.note.startswith(
        "shared_memory.jsonl: torn last line moved to shared_memory.jsonl.quarantine"
    )
    assert again.note.endswith("already completed; nothing to do")
    assert (finished / "shared_memory.jsonl.quarantine").read_text() == '{"schema_version":1,"id":"tor\n'
    assert verify(finished) == ([], ["shared_memory.jsonl.quarantine: quarantined torn line(s)"])
    # a resume that runs records what it set aside: a quarantine event in the events log it made whole
    with open(finished / "events.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"r0002.tor')
    extended = resume_run(finished, overrides=["rounds=3"])
    assert extended.note.startswith("events.jsonl: torn last line moved to events.jsonl.quarantine")
    (aside,) = events(finished, "quarantine")
    assert aside["data"] == {"log": "events.jsonl", "began": '{"schema_version":1,"id":"r0002.tor'}
    assert aside["detail"] == extended.note and extended.manifest.counts.by_event["quarantine"] == 1
    notes = [f"{log}.quarantine: quarantined torn line(s)" for log in ("events.jsonl", "shared_memory.jsonl")]
    assert verify(finished) == ([], notes)  # the event's line continues the events log's chain


def test_resuming_a_finished_run_does_nothing(run):
    result = run("rounds=2")
    before = {p: p.read_bytes() for p in result.run_dir.rglob("*.jsonl")}
    again = resume_run(result.run_dir)
    assert again.note == "already completed; nothing to do"
    assert {p: p.read_bytes() for p in result.run_dir.rglob("*.jsonl")} == before


def test_snapshots_stay_small_and_hold_no_transcript(run):
    result = run("rounds=30", "model.reject_first=1")
    paths = list_snapshots(result.run_dir)
    assert [p.name for p in paths[:2]] == ["round-0001.json", "round-0002.json"] and len(paths) == 30
    sizes = [p.stat().st_size for p in paths]
    # once every window is past round 1 (no null hashes), only digits grow
    assert max(sizes[4:]) - min(sizes[4:]) < 64
    snap: Snapshot = read_snapshot(paths[-1])
    text = paths[-1].read_text()
    assert all(arg not in text for arg in shared(result.run_dir))
    assert snap.round == 30 and snap.counts.published == 60
    assert snap.logs["shared_memory.jsonl"].count == 60


def test_resume_replays_landed_records_without_new_model_calls(run, runs_root):
    """Kill mid-round (simulated by cutting the logs back to a mid-round point):
    resume reuses what landed and calls the model only for what is missing."""
    full = run("rounds=3", "model.reject_first=1")
    run_dir = full.run_dir
    snap = read_snapshot(list_snapshots(run_dir)[1])  # after round 2
    # as if killed in round 3 right after the pros persona record landed
    list_snapshots(run_dir)[2].unlink()
    landed = (
        (run_dir / "pros/persona.jsonl")
        .read_bytes()
        .splitlines(keepends=True)[snap.logs["pros/persona.jsonl"].count]
    )
    for name, pos in snap.logs.items():
        path = run_dir / name
        lines = path.read_bytes().splitlines(keepends=True)
        # the persona's prompt, its kept reply and its record
        keep = pos.count + (name in ("pros/persona.jsonl", "pros/prompts.jsonl", "pros/replies.jsonl"))
        path.write_bytes(b"".join(lines[:keep]))
    resumed = resume_run(run_dir)
    # the landed record was reused as it was, not rewritten by a new call
    assert landed in (run_dir / "pros/persona.jsonl").read_bytes()
    assert resumed.manifest.status == "completed"
    assert verify(run_dir)[0] == []
    assert shared(run_dir) == shared(run("rounds=3", "model.reject_first=1").run_dir)


def test_cli_resume_through_run_entry_point(run, tmp_path):
    result = run("rounds=2")
    (result.run_dir / "snapshots" / "round-0002.json").unlink()
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    manifest["status"] = "running"  # as a kill -9 leaves it
    (result.run_dir / "manifest.json").write_text(json.dumps(manifest))
    out = subprocess.run(
        [sys.executable, "-m", "harness.run", f"resume={result.run_dir}", "rounds=3"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(result.run_dir)
    # the overrides typed go on to the resume, as with harness.resume: rounds=3 extends it
    assert json.loads((result.run_dir / "manifest.json").read_text())["counts"]["rounds_completed"] == 3
    assert not (result.run_dir / ".hydra").exists()


def test_a_folder_killed_before_its_manifest_resumes_from_its_config(run, tmp_path):
    """Killed between config.yaml and manifest.json: nothing ran, so resume starts it."""
    done = run("rounds=2", "model.reject_first=1")
    fresh = tmp_path / "killed-early"
    fresh.mkdir()
    (fresh / "config.yaml").write_bytes((done.run_dir / "config.yaml").read_bytes())
    resumed = resume_run(fresh)
    assert resumed.manifest.status == "completed" and resumed.manifest.counts.rounds_completed == 2
    assert shared(fresh) == shared(done.run_dir)
    assert "before its manifest" in resumed.manifest.history[0].detail
    assert verify(fresh) == ([], [])


def test_a_folder_with_records_but_no_manifest_is_refused_in_one_line(run):
    run_dir = run("rounds=1").run_dir
    (run_dir / "manifest.json").unlink()
    before = {p: p.read_bytes() for p in run_dir.rglob("*.jsonl")}
    with pytest.raises(ResumeError) as caught:
        resume_run(run_dir)
    assert "manifest.json: missing" in str(caught.value) and "\n" not in str(caught.value)
    assert {p: p.read_bytes() for p in run_dir.rglob("*.jsonl")} == before  # nothing written
    out = subprocess.run(
        [sys.executable, "-m", "harness.resume", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1 and "manifest.json" in out.stderr
    problems, _ = verify(run_dir)
    assert any(p.startswith("manifest.json: missing") for p in problems)


def test_an_extension_killed_as_it_starts_keeps_every_continuation_key_it_was_given(finished, monkeypatch):
    """budget.tokens given with rounds=4 is written to config.yaml with it, so the plain
    resume after a kill stops at that budget instead of running on without one; a key
    saying where the run lives or how this command shows it is not the run's to keep."""

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # a kill -9 before the extension wrote a line

    monkeypatch.setattr(resuming, "execute", killed)
    given = ["rounds=4", "budget.tokens=5000", "memory.fsync=round", "progress=false", "run_name=elsewhere"]
    with pytest.raises(KeyboardInterrupt):
        resume_run(finished, overrides=given)
    monkeypatch.undo()
    kept = yaml.safe_load((finished / "config.yaml").read_text())
    assert (kept["rounds"], kept["budget"]["tokens"], kept["memory"]["fsync"]) == (4, 5000, "round")
    assert (kept["progress"], kept["run_name"]) == (False, "two")  # as the run was made
    resumed = resume_run(finished)
    assert resumed.manifest.status == "interrupted" and resumed.manifest.stop_reason.startswith("budget")
    assert verify(finished)[0] == []


def test_a_finished_run_with_nothing_to_do_builds_no_model_and_still_refuses_a_fixed_key(finished):
    """'Nothing to do' is decided before a model is built (a local model's file would be
    hashed first); a key or model spec that may not change is refused all the same."""
    built: list[str] = []

    def counting(cfg):  # type: ignore[no-untyped-def]
        built.append(cfg.spec)
        return resuming.build_model(cfg)

    assert resume_run(finished, build=counting).note == "already completed; nothing to do"
    with pytest.raises(ResumeError, match=r"fingerprint mismatch .*config.llm.temperature: 0.7 -> 1.0"):
        resume_run(finished, overrides=["llm.temperature=1.0"], build=counting)
    with pytest.raises(ResumeError, match=r"models.pros: 'scripted:default' -> 'scripted:other'"):
        resume_run(finished, overrides=["model.spec=scripted:other"], build=counting)
    assert built == []


def test_a_forced_resume_killed_as_it_starts_goes_on_under_what_it_forced(finished, monkeypatch):
    """llm.temperature forced past the fingerprint with rounds=4 is the run's from then
    on: after a kill the plain resume goes on under it, neither refused nor back at 0.7."""

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # a kill -9 before the forced resume wrote a line

    monkeypatch.setattr(resuming, "execute", killed)
    with pytest.raises(KeyboardInterrupt):
        resume_run(finished, force=True, overrides=["rounds=4", "llm.temperature=1.0", "run_name=elsewhere"])
    monkeypatch.undo()
    kept = yaml.safe_load((finished / "config.yaml").read_text())
    assert (kept["rounds"], kept["llm"]["temperature"], kept["run_name"]) == (4, 1.0, "two")
    resumed = resume_run(finished)
    assert resumed.manifest.status == "completed" and resumed.manifest.counts.rounds_completed == 4
    assert [h.action for h in resumed.manifest.history][-2:] == ["resume", "complete"]  # not forced again
    assert verify(finished)[0] == []

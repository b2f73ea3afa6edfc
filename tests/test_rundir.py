"""Run folders: the name, -2/-3 suffixes, atomic creation under concurrency,
and what a finished folder holds."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
import yaml
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import run_debate
from harness.store.records import FOLDER_VERSION, RunManifest
from harness.store.rundir import FolderVersionError, create_run_dir, read_manifest, run_dir_name

RUN_FILES = {
    "config.yaml",
    "manifest.json",
    "shared_memory.jsonl",
    "events.jsonl",
    *(
        f"{t}/{k}.jsonl"
        for t in ("pros", "cons")
        for k in ("persona", "thinking", "critique", "prompts", "replies")
    ),
    "public/replies.jsonl",
}


def test_folder_name_from_version_temperature_and_max_tokens(settings):
    assert run_dir_name(settings()) == "memory-v1-temp-0.7-max-tokens-256"
    cfg = settings("version=2b", "llm.temperature=1", "llm.max_tokens=64")
    assert run_dir_name(cfg) == "memory-v2b-temp-1.0-max-tokens-64"


def test_existing_names_get_numbered_suffixes(run, runs_root):
    names = [run("rounds=1").run_dir.name for _ in range(3)]
    base = "memory-v1-temp-0.7-max-tokens-256"
    assert names == [base, f"{base}-2", f"{base}-3"]
    assert sorted(p.name for p in runs_root.iterdir()) == sorted(names)
    # a different config gets its own base name, unsuffixed
    assert run("rounds=1", "llm.temperature=0.2").run_dir.name == "memory-v1-temp-0.2-max-tokens-256"


def test_suffix_skips_a_taken_name_even_if_not_ours(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x-2").mkdir()
    (tmp_path / "x-2" / "keep").write_text("someone else's")
    assert create_run_dir(tmp_path, "x").name == "x-3"
    assert (tmp_path / "x-2" / "keep").read_text() == "someone else's"


def race(fn, n: int, timeout: float = 120) -> list:  # type: ignore[no-untyped-def]
    """Call ``fn`` in ``n`` threads released at once; return results, re-raise the first error."""
    barrier = threading.Barrier(n)
    results: list = []
    errors: list = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait()
        try:
            out = fn()
        except Exception as exc:  # re-raised in the test's thread below
            errors.append(exc)
            return
        with lock:
            results.append(out)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    if errors:
        raise errors[0]
    assert len(results) == n, "a thread did not finish"
    return results


def test_concurrent_creation_in_threads_gives_distinct_folders(tmp_path):
    n = 16
    made = race(lambda: create_run_dir(tmp_path / "runs", "memory-v1"), n, timeout=30)
    assert len(set(made)) == n
    assert {p.name for p in made} == {"memory-v1", *(f"memory-v1-{i}" for i in range(2, n + 1))}


def test_concurrent_debates_in_threads_do_not_share_folders(make_cfg, records):
    cfg = make_cfg("rounds=2")  # Hydra's compose API is not thread-safe: compose once
    raw = OmegaConf.to_container(cfg, resolve=True)
    results = race(lambda: run_debate(resolve(cfg), raw), 4)  # type: ignore[arg-type]
    dirs = {r.run_dir for r in results}
    assert len(dirs) == 4
    for run_dir in dirs:
        # each folder holds exactly one debate: 2 rounds x 2 teams, one chain per file
        assert len(records(run_dir / "shared_memory.jsonl")) == 4
        assert [r.seq for r in records(run_dir / "pros" / "persona.jsonl")] == [0, 1]


def test_concurrent_cli_processes_get_distinct_folders(tmp_path):
    runs_root = tmp_path / "runs"
    n = 4
    cmd = [
        sys.executable,
        "-m",
        "harness.run",
        "model=scripted",
        "rounds=2",
        "progress=false",
        f"runs_root={runs_root}",
    ]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs.append(out.strip().splitlines()[-1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert len(set(outs)) == n
    assert sorted(outs) == sorted(str(p) for p in runs_root.iterdir())
    for out in outs:
        manifest = json.loads((tmp_path / out / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["run_id"] == (tmp_path / out).name


def test_finished_folder_holds_exactly_the_documented_files(run):
    result = run("rounds=2")
    run_dir = result.run_dir
    files = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()}
    assert files >= RUN_FILES
    # beyond the records: resume's snapshots, fingerprint and lock; nothing from Hydra
    extra = files - RUN_FILES
    assert {f for f in extra if f.startswith("snapshots/")} == {
        "snapshots/round-0001.json",
        "snapshots/round-0002.json",
    }
    assert {f for f in extra if not f.startswith("snapshots/")} <= {
        "fingerprint.json",
        ".lock",
        "public/prompts.jsonl",
    }
    manifest = RunManifest.model_validate_json((run_dir / "manifest.json").read_text())
    assert manifest.status == "completed" and manifest.folder_version == FOLDER_VERSION == 1
    assert manifest.run_id == run_dir.name
    assert manifest.started_at <= manifest.ended_at  # type: ignore[operator]
    assert manifest.seed == 0 and manifest.format == "drift"
    assert "pydantic" in manifest.packages and "langgraph" in manifest.packages
    assert manifest.model_specs["pros"] == "scripted:default"
    assert manifest.counts.rounds_completed == 2
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["rounds"] == 2 and config["model"]["spec"] == "scripted:default"


def test_a_folder_of_a_newer_version_is_refused_in_one_line(tmp_path):
    """An older folder's refusal: tests/test_verify.py, reader by reader."""
    (tmp_path / "manifest.json").write_text(json.dumps({"folder_version": FOLDER_VERSION + 1}))
    with pytest.raises(FolderVersionError) as raised:
        read_manifest(tmp_path)
    assert str(raised.value) == (
        f"{tmp_path}/manifest.json: run-folder version 2; this harness reads version 1; "
        "update the harness to read it"
    )


def test_secrets_are_redacted_everywhere_in_the_folder(run):
    # key names as providers spell them; scripted ignores kwargs, so nothing is sent
    result = run(
        "+model.kwargs.api_key=sk-live-1",
        "+model.kwargs.aws_secret_access_key=aws-live-2",
        "+model.kwargs.default_headers.Authorization=Bearer-live-3",
        "+model.kwargs.client_secret=cs-live-4",
        "+roles.critic.kwargs.access_token=tok-live-5",
        "+model.kwargs.password=pw-live-6",
        "rounds=1",
    )
    for path in result.run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "-live-" not in text, (path.name, [w for w in text.split() if "-live-" in w])
    config = yaml.safe_load((result.run_dir / "config.yaml").read_text())
    assert config["llm"]["max_tokens"] == 256  # a count of tokens is not a secret
    assert config["model"]["kwargs"]["default_headers"]["Authorization"] == "***REDACTED***"


def test_a_folder_appears_with_its_config_already_in_it(tmp_path):
    # a kill between claiming a folder and writing its config used to leave a
    # folder no resume could read; now the folder is filled before it is claimed
    seen: list[list[str]] = []

    def fill(folder):
        seen.append(sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")))
        (folder / "config.yaml").write_text("rounds: 1\n")

    made = create_run_dir(tmp_path, "memory-v1", fill)
    assert seen == [[]]  # while it was being filled, no run folder was visible
    assert (made / "config.yaml").read_text() == "rounds: 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["memory-v1"]  # no staging folder left


def test_a_fill_that_fails_leaves_nothing(tmp_path):
    def fill(folder):
        (folder / "config.yaml").write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        create_run_dir(tmp_path, "memory-v1", fill)
    assert list(tmp_path.iterdir()) == []

"""The command line as a user meets it: ``python -m harness.run`` in a
subprocess. Bad values fail in one stderr line, with a non-zero exit, before
any folder is made; Hydra writes nothing of its own; secrets stay out."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from conftest import serving

from harness.cli.errors import one_line


def free_closed_port() -> int:
    """A loopback port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BAD_VALUES = [
    (["llm.temperature=-0.5"], "llm.temperature"),
    (["rounds=0"], "rounds"),
    (["rounds=three"], "rounds"),
    (["model=nope"], "model=nope"),
    (["critic=gentle"], "critic=gentle"),
    (["model.spec=foo:bar"], "foo"),
    (["model.spec=nocolon"], "model.spec"),
    (["model.spec=local:nope"], "nope"),
    (["version=../x"], "version"),
    (["version=a/b"], "version"),
    (["critic.on_loop_lock=retry_forever"], "critic.on_loop_lock"),
    (["model=scripted", "model.malformed_rate=2"], "model.malformed_rate"),
    (["model.spec=openai:gpt-4o"], "OPENAI_API_KEY"),
    (["model=scripted", "roles.critic.spec=openai:gpt-4o"], "OPENAI_API_KEY"),
    # a reply budget a local model's context cannot hold, with a prompt
    (["llm.max_tokens=99999999"], "llm.max_tokens: 99999999 tokens cannot fit local:smollm2's context"),
    (["format=panel", "roles.judge.max_tokens=2000"], "roles.judge.max_tokens"),
    # another format's option: Hydra's refusal and the schema's say the same line, with no '+' advice
    (["format=panel", "format.exchanges=2"], "format.exchanges: not an option of format=panel; its options:"),
    (
        ["format=panel", "+format.exchanges=2"],
        "format.exchanges: not an option of format=panel; its options:",
    ),
]


def test_bad_values_fail_in_one_line_before_any_folder(cli, tmp_path):
    # one subprocess per bad value, a few at a time: each pays ~2 s of imports
    def attempt(case: tuple[int, list[str]]) -> tuple[list[str], str, object]:
        i, args = case
        runs_root = tmp_path / f"runs{i}"
        return args, str(runs_root), cli(*args, f"runs_root={runs_root}", "progress=false")

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(attempt, enumerate(args for args, _ in BAD_VALUES)))
    for (args, runs_root, proc), (_, needle) in zip(results, BAD_VALUES, strict=True):
        assert proc.returncode != 0, args  # type: ignore[attr-defined]
        lines = proc.stderr.strip().splitlines()  # type: ignore[attr-defined]
        assert len(lines) == 1, (args, proc.stderr)  # type: ignore[attr-defined]
        assert lines[0].startswith("error: ") and needle in lines[0], (args, lines[0])
        assert not Path(runs_root).exists(), args
    assert list(cli.cwd.iterdir()) == []  # Hydra left nothing behind either


def test_unknown_key_fails_in_one_line(cli, tmp_path):
    proc = cli("llm.temprature=1", f"runs_root={tmp_path / 'runs'}")
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


HYDRA_REFUSAL = (
    "Could not override '{key}'.\nTo append to your config use +{key}=1\n"
    "Key '{last}' is not in struct\n    full_key: {key}\n    object_type=dict\n"
)


@pytest.mark.parametrize(
    ("argv", "key", "says"),
    [
        (
            ["format=drift"],
            "format.disruptor",
            "format.disruptor: not an option of format=drift; its options:",
        ),
        ([], "format.disruptor", "format.disruptor: not an option of format=drift"),  # the default format
        (
            ["format=judge_refine"],
            "format.prompt_files.jury",
            "format.prompt_files.jury: no such role; roles: pro, con, judge",
        ),
        (["format=panel"], "critic.max_iteration", "critic.max_iteration: no such key; critic holds: name,"),
    ],
)
def test_a_key_with_no_place_is_one_line_naming_what_is_there(argv, key, says):
    line = one_line(HYDRA_REFUSAL.format(key=key, last=key.rpartition(".")[2]), argv)
    assert line.startswith(says) and "+" not in line, line


def test_a_sweep_refused_before_any_cell_ran_leaves_no_folder(cli, tmp_path):
    """A key with no place under -m was one line, and left a sweep folder (its index of
    cells that never ran, driver.lock) that a second command then found there."""
    runs_root = tmp_path / "runs"
    proc = cli("-m", "experiment=debug", "rounds2=1,2", f"runs_root={runs_root}")
    assert (proc.returncode, proc.stderr) == (2, "error: rounds2: no such key in the config\n")
    assert list(runs_root.glob("sweep-*")) == []


def test_missing_api_key_names_the_variable(cli, tmp_path):
    proc = cli("model=openai", f"runs_root={tmp_path / 'runs'}")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: model.spec: 'openai:gpt-4o-mini' needs OPENAI_API_KEY in the environment "
        "(or model.kwargs.api_key)"
    )


def test_cfg_job_prints_the_config_and_runs_nothing(cli, tmp_path):
    runs_root = tmp_path / "runs"
    proc = cli("--cfg", "job", "rounds=7", "critic=strict", f"runs_root={runs_root}")
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["rounds"] == 7 and cfg["critic"]["name"] == "strict"
    assert cfg["model"]["spec"] == "local:smollm2"
    assert not runs_root.exists()


def test_successful_run_prints_summary_then_folder_and_hydra_writes_nothing(cli, tmp_path):
    runs_root = tmp_path / "runs"
    proc = cli("experiment=debug", f"runs_root={runs_root}", "progress=false")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip().splitlines()
    run_dir = runs_root / "memory-v1-temp-0.7-max-tokens-256"
    assert out[-1] == str(run_dir)
    assert out[-2].startswith("completed: rounds 2/2 | approvals 4 | rejections 4 | loop-locks 0")
    assert "wall" in out[-2]
    files = {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")}
    assert not any(".hydra" in f or f.endswith(".log") for f in files), files
    assert [p.name for p in runs_root.iterdir()] == [run_dir.name]
    assert list(cli.cwd.iterdir()) == []  # no outputs/, no multirun/, no .hydra/


@pytest.fixture
def http_401():
    """A loopback HTTP server answering every request 401, counting requests."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.path)
            body = b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", hits


@pytest.mark.network_loopback
def test_fatal_provider_error_fails_fast_in_one_line_with_failed_manifest(cli, tmp_path, http_401):
    base_url, hits = http_401
    runs_root = tmp_path / "runs"
    proc = cli(
        "model=openai",
        "model.spec=openai:gpt-4o",
        f"model.kwargs.base_url={base_url}",
        "model.kwargs.api_key=sk-secret",
        "retry.max_attempts=5",
        "rounds=2",
        f"runs_root={runs_root}",
        "progress=false",
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for part in ("role=persona", "team=pros", "round=1", "model=openai:gpt-4o", "AuthenticationError"):
        assert part in lines[0], lines[0]
    assert len(hits) == 1  # 401 is fatal: no retry, neither ours nor the client's
    (run_dir,) = runs_root.iterdir()
    assert lines[0].endswith(f"; resume it with: python -m harness.resume {run_dir}")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["ended_at"] is not None
    assert manifest["error"]["kind"] == "fatal"
    assert manifest["error"]["type"].endswith("AuthenticationError")
    assert "Incorrect API key" in manifest["error"]["message"]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["role"], e["round"], e["error"]["kind"]) for e in events] == [
        ("error", "persona", 1, "fatal")
    ]
    # the key given on the command line is nowhere in the folder
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert "sk-secret" not in path.read_text(), path
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["model"]["kwargs"]["api_key"] == "***REDACTED***"
    assert config["model"]["kwargs"]["base_url"] == base_url
    assert config["llm"]["max_tokens"] == 256  # "tokens" in a name is not a secret


def resume_cli(run_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.resume", str(run_dir), *overrides],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.network_loopback
def test_resume_names_the_override_a_redacted_key_needs(cli, tmp_path, http_401, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base_url, hits = http_401
    cli(
        "model=openai",
        "model.spec=openai:gpt-4o",
        f"model.kwargs.base_url={base_url}",
        "model.kwargs.api_key=sk-secret",
        "rounds=1",
        f"runs_root={tmp_path / 'runs'}",
        "progress=false",
    )
    (run_dir,) = (tmp_path / "runs").iterdir()
    refused = resume_cli(run_dir)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"python -m harness.resume {run_dir} model.kwargs.api_key=<value>" in refused.stderr
    assert len(hits) == 1  # refused before any call
    # with the key given as named, the resume reaches the server (which refuses it again)
    again = resume_cli(run_dir, "model.kwargs.api_key=sk-secret")
    assert again.returncode == 1 and "AuthenticationError" in again.stderr and len(hits) == 2
    # and from the environment, as at the start: a secret is no fingerprint change
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    from_env = resume_cli(run_dir)
    assert from_env.returncode == 1 and "AuthenticationError" in from_env.stderr and len(hits) == 3


@pytest.mark.network_loopback
def test_a_placeholder_key_for_a_local_server_is_kept_and_resume_needs_nothing(
    cli, tmp_path, http_401, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    base_url, hits = http_401
    cli(
        "model=openai",
        "model.spec=openai:local",
        f"model.kwargs.base_url={base_url}",
        "model.kwargs.api_key=none",
        "rounds=1",
        f"runs_root={tmp_path / 'runs'}",
        "progress=false",
    )
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["model"]["kwargs"]["api_key"] == "none"
    resumed = resume_cli(run_dir)  # exactly the command the harness prints
    assert resumed.returncode == 1 and "AuthenticationError" in resumed.stderr and len(hits) == 2


def test_unreachable_server_is_retried_then_fails_in_one_line(cli, tmp_path):
    # the real LangChain OpenAI client against a closed loopback port: refused
    # at once, classified transient, retried by our policy, then given up
    runs_root = tmp_path / "runs"
    proc = cli(
        "model=openai",
        "model.spec=openai:gpt-4o",
        f"model.kwargs.base_url=http://127.0.0.1:{free_closed_port()}/v1",
        "model.kwargs.api_key=none",
        "+model.kwargs.max_retries=0",
        "retry.max_attempts=2",
        "retry.initial_s=0",
        "retry.jitter_s=0",
        "rounds=1",
        f"runs_root={runs_root}",
        "progress=false",
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "role=persona" in lines[0] and "round=1" in lines[0] and "model=openai:gpt-4o" in lines[0]
    (run_dir,) = runs_root.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"]["kind"] == "transient"
    assert manifest["error"]["type"].endswith("ConnectionError")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["retry", "error"]


def test_per_role_models_are_recorded(cli, tmp_path):
    runs_root = tmp_path / "runs"
    proc = cli(
        "model=scripted",
        "roles.critic.spec=scripted:critic",
        "roles.cons.temperature=1.5",
        "rounds=1",
        f"runs_root={runs_root}",
        "progress=false",
    )
    assert proc.returncode == 0, proc.stderr
    run_dir = runs_root / proc.stdout.strip().splitlines()[-1].rsplit("/", 1)[-1]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model_specs"] == {
        "pros": "scripted:default",
        "cons": "scripted:default",
        "critic": "scripted:critic",
        "topic": "scripted:default",
    }
    for team in ("pros", "cons"):
        critiques = [json.loads(x) for x in (run_dir / team / "critique.jsonl").read_text().splitlines()]
        thinking = [json.loads(x) for x in (run_dir / team / "thinking.jsonl").read_text().splitlines()]
        assert {c["model"] for c in critiques} == {"scripted:critic"}
        assert {t["model"] for t in thinking} == {"scripted:default"}


def test_a_reply_budget_that_fits_a_larger_context_is_accepted(settings):
    cfg = settings("model=smollm2", "llm.max_tokens=2000", "model.n_ctx=4096")
    assert cfg.llm.max_tokens == 2000  # the same budget fails at the default n_ctx=2048 (BAD_VALUES)
    assert settings("model=scripted", "llm.max_tokens=99999").llm.max_tokens == 99999  # no context to fit


def test_verify_of_a_missing_folder_names_it(tmp_path, capsys):
    from harness.verify import main

    with pytest.raises(SystemExit) as done:
        main([str(tmp_path / "nope")])
    assert done.value.code == 2 and capsys.readouterr().err == f"error: {tmp_path / 'nope'}: no such folder\n"

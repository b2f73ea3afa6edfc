"""Real models, kept small (CI has 2 cores): a 2-round debate on the bundled
SmolLM2 in-process, and one round through llama-cpp-python's OpenAI-compatible
server so the real LangChain OpenAI client is exercised over HTTP.

Both assert structure, never content quality. ``model.n_threads=1``: when
another process shares the cores, llama.cpp's spinning worker threads slow a
2-thread run down several-fold, and one thread keeps these tests' time bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

import harness.models.local as local

SMALL = ("llm.max_tokens=128", "model.n_threads=1")
TEAMS = ("pros", "cons")
GEMMA_SEED = 0  # benchmarks/gemma_base_prompt.py: both publish, 0 of 6 calls fail


def assert_complete_debate(result, records, rounds: int, spec: str) -> None:  # type: ignore[no-untyped-def]
    run_dir = result.run_dir
    assert result.manifest.status == "completed"
    assert result.manifest.counts.rounds_completed == rounds
    assert set(result.manifest.model_specs.values()) == {spec}
    for team in TEAMS:
        personas = records(run_dir / team / "persona.jsonl")
        assert {p.round for p in personas} == set(range(1, rounds + 1))
        assert all(p.persona and p.version >= 1 for p in personas)
        prompts = records(run_dir / team / "prompts.jsonl")
        assert prompts and {p.model for p in prompts} == {spec}
        for kind in ("persona", "thinking", "critique"):
            for rec in records(run_dir / team / f"{kind}.jsonl"):
                if rec.usage.calls:  # fallbacks made no call of their own
                    assert rec.model == spec
                    assert rec.usage.input_tokens > 0 and rec.usage.latency_s > 0
    for arg in records(run_dir / "shared_memory.jsonl"):
        assert arg.text.strip() and arg.team in TEAMS


@pytest.mark.slow
def test_two_rounds_on_smollm2(run, records):
    result = run("model=smollm2", "rounds=2", "critic=lenient", *SMALL)
    assert_complete_debate(result, records, 2, "local:smollm2")
    gguf = str(local.locate("smollm2"))
    assert list(result.manifest.model_files) == [gguf]
    assert len(result.manifest.model_files[gguf]) == 64
    # loaded once for these settings (other tests may load it with other settings)
    assert [key for key in local._LOADED if key[0] == gguf and key[2] == 1] == [(gguf, 2048, 1, 0)]
    # grammar-constrained decoding: every call produced a valid object or was repaired
    calls = result.manifest.counts.model_calls
    assert calls >= 12 and result.manifest.counts.output_tokens > 0


@pytest.mark.slow
def test_one_round_of_gemma_publishes_for_both_teams(run, records):
    # Gemma 3 270M is a base model. Asked as a chat it echoed its labels and
    # instructions (issue 30 refuses those) and one round published for Pros only,
    # with 11 schema failures in 38 calls. Prompted as a document with a worked
    # example reply (model.prompt_style=completion, conf/model/gemma3_270m.yaml),
    # and kept from copying that example while it decodes (NoCopy), both teams
    # publish (benchmarks/gemma_base_prompt.py, docs/models.md).
    result = run("model=gemma3_270m", "rounds=1", "model.n_threads=1", f"seed={GEMMA_SEED}")
    assert_complete_debate(result, records, 1, "local:gemma3-270m")
    assert {a.team for a in records(result.run_dir / "shared_memory.jsonl")} == set(TEAMS)
    counts = result.manifest.counts
    failures = [e for e in records(result.run_dir / "events.jsonl") if e.event == "schema_failure"]
    assert len(failures) == counts.schema_failures
    # What still fails is the model's doing: it copies the worked example (or its
    # labels), which the harness refuses on purpose. Nothing else may fail often.
    refused = ("repeats the field's label", "instead of writing")
    echoes = [e for e in failures if any(r in e.error.message for r in refused)]
    assert (len(failures) - len(echoes)) * 5 < counts.model_calls
    assert counts.schema_failures * 5 < counts.model_calls  # under a fifth (issue 39); seed 0: 0 of 6


@pytest.mark.slow
def test_two_round_panel_on_smollm2(run, records):
    from harness.export.styles import export_run
    from harness.formats.checks import verify

    result = run("format=panel", "model=smollm2", "format.analysts=2", "rounds=2", *SMALL)
    run_dir, manifest = result.run_dir, result.manifest
    seats = ["analyst_a", "analyst_b"]
    assert manifest.status == "completed" and manifest.counts.rounds_completed == 2
    assert manifest.stop_reason.startswith("cap")  # round 2 is the cap: synthesis is forced
    cards = records(run_dir / "public" / "roles.jsonl")
    assert [c.team for c in cards] == seats and all(c.name.strip() for c in cards)
    # a seat whose reply never validated publishes nothing (a schema_failure event says why)
    failures = {(e.round, e.team) for e in records(run_dir / "events.jsonl") if e.event == "schema_failure"}
    shared = records(run_dir / "shared_memory.jsonl")
    expected = [(r, s) for r in (1, 2) for s in seats if (r, s) not in failures]
    # a statement that ends no sentence, even repaired, fails the schema (issue 39)
    assert [(p.round, p.team) for p in shared] == expected and len(shared) >= 1
    assert all(p.text.strip() and p.model == "local:smollm2" for p in shared)
    assert {p.phase for p in shared if p.round == 1} <= {"blind"}
    assert [s.round for s in records(run_dir / "public" / "summaries.jsonl")] == [1, 2]
    (synthesis,) = records(run_dir / "public" / "synthesis.jsonl")
    assert synthesis.close_reason == "cap" and synthesis.text.strip()
    assert verify(run_dir) == ([], [])  # blind round, aliases, isolation, hash chains
    report = export_run(run_dir, "md")
    assert "Analyst A" in report and "Analyst B" in report and synthesis.text.strip()[:40] in report


@pytest.mark.slow
@pytest.mark.full  # 97 s in CI: make test-all (in make test, the moderated exchange with grounded checks runs SmolLM2)
def test_moderated_debate_on_smollm2(run, records):
    from harness.export.styles import export_run
    from harness.formats.checks import verify

    result = run(
        "format=moderated", "model=smollm2", "format.exchanges=1", "format.max_speech_retries=1", *SMALL
    )
    run_dir, manifest = result.run_dir, result.manifest
    assert manifest.status == "completed"
    # every speech was checked by the real model, and every check names a verdict
    checks = records(run_dir / "public" / "factchecks.jsonl")
    assert checks and all(c.verdict in ("pass", "fail") and c.model == "local:smollm2" for c in checks)
    speeches = records(run_dir / "shared_memory.jsonl")
    assert all(s.text.strip() and s.phase in ("opening", "rebuttal", "counter", "closing") for s in speeches)
    (verdict,) = records(run_dir / "public" / "verdicts.jsonl")
    if verdict.by == "judge":  # no side was disqualified: the judge scored both
        assert manifest.stop_reason.startswith("verdict")
        assert verdict.fallback or set(verdict.scores) == {"pro", "con"}
    else:
        assert manifest.stop_reason.startswith("disqualified")
    assert verify(run_dir) == ([], [])
    report = export_run(run_dir, "md")
    assert all(f"Fact-check of {c.team}'s {c.stage}, attempt {c.iteration + 1}" in report for c in checks)


@pytest.mark.slow
@pytest.mark.full  # 85 s in CI: make test-all (the grounded format's MCP searches run on the scripted model in make test)
def test_one_grounded_round_of_smollm2_searches_the_kjv(run, records, tmp_path):
    """The real path end to end: SmolLM2 asks for searches, the MCP server
    answers from the KJV, the checker marks whatever it cites, the report shows it."""
    from harness.export.styles import export_run
    from harness.formats.checks import verify

    result = run(
        "format=grounded",
        "model=smollm2",
        'topic.text="Job\'s suffering is deserved"',
        "search.collection=kjv",
        "search.transport=mcp",
        f"search.cache_dir={tmp_path / 'cache'}",
        "rounds=1",
        *SMALL,
    )
    run_dir, manifest = result.run_dir, result.manifest
    assert manifest.status == "completed" and manifest.stop_reason == "synthesis"
    for seat in ("for", "against"):
        searches = records(run_dir / seat / "searches.jsonl")
        assert searches and all(s.collection == "kjv" and s.query.strip() for s in searches)
        assert all(h.source.startswith("KJV, ") for s in searches for h in s.hits)
    turns = records(run_dir / "shared_memory.jsonl")
    assert turns and all(t.text.strip() and t.model == "local:smollm2" for t in turns)
    # whatever a small model cites is marked, never taken on trust
    assert all(c.status in ("supported", "unsupported", "unknown") for t in turns for c in t.citations)
    assert verify(run_dir) == ([], [])
    report = export_run(run_dir, "md")
    assert "Citations of FOR" in report and "## Synthesis" in report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def llama_server(tmp_path):
    """llama-cpp-python's server on a loopback port; always stopped at the end."""
    port = free_port()
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(local.locate("smollm2")),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--n_threads",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"server exited with {proc.returncode}: {(tmp_path / 'server.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer within 120 s")
            time.sleep(0.5)
        yield base_url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        log.close()


@pytest.mark.slow
@pytest.mark.network_loopback
def test_one_round_through_the_openai_client_and_llama_server(run, records, llama_server):
    result = run(
        "model=openai",
        "model.spec=openai:smollm2",
        f"model.kwargs.base_url={llama_server}",
        "model.kwargs.api_key=none",
        "rounds=1",
        "critic=lenient",
        "critic.max_iterations=1",
        "structured.max_repairs=1",
        "llm.max_tokens=128",
    )
    assert_complete_debate(result, records, 1, "openai:smollm2")
    assert result.manifest.model_files == {}  # remote: no local weights
    # the server really answered: tokens came back through LangChain's usage metadata
    assert result.manifest.counts.input_tokens > 0 and result.manifest.counts.output_tokens > 0
    errors = [e for e in records(result.run_dir / "events.jsonl") if e.event in ("error", "retry")]
    assert errors == []  # json_object mode is accepted (json_schema would be a 4xx here)

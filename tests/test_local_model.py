"""The ``local:`` backend. Most tests run without llama.cpp: a stand-in ``llama_cpp``
module counts how often a model file is loaded and answers like the scripted
model, so the load-once rule and the request plumbing are checked in seconds."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

import harness.models.local as local
from harness.config import resolve
from harness.engine import run_debate
from harness.models.base import ModelConfigError, ModelRequest
from harness.models.llama_sampling import COPY_TOKENS
from harness.models.prefix_cache import PrefixCache, header_text
from harness.models.scripted import ScriptedModel
from harness.models.sentences import sentence_grammar_schema
from harness.models.structured import fit_schema
from harness.resume import resume_run
from harness.verify import verify


class FakeLlama:
    loads: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        FakeLlama.loads.append(kwargs)
        self.calls: list[dict[str, Any]] = []
        self.scripted = ScriptedModel("scripted:fake")

    def reset(self) -> None:  # the backend clears the KV cache before each prompt
        pass

    def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
        return list(text)  # a byte a token: enough for the instructions' NoCopy

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        schema = (kwargs.get("response_format") or {}).get("schema")
        last = kwargs["messages"][-1]["content"]
        # the scripted model needs tags; a role hint from the prompt is enough here
        tags = {"team": "pros" if "FOR" in last else "cons", "round": 1, "iteration": 0}
        out = self.scripted.complete(ModelRequest(messages=kwargs["messages"], schema=schema, tags=tags))
        return {
            "choices": [{"message": {"content": out.text}}],
            "usage": {"prompt_tokens": out.input_tokens, "completion_tokens": out.output_tokens},
        }


@pytest.fixture
def fake_llama(monkeypatch):
    module = types.ModuleType("llama_cpp")
    module.Llama = FakeLlama  # type: ignore[attr-defined]
    module.llama_log_callback = lambda f: f  # type: ignore[attr-defined]
    module.llama_log_set = lambda f, _: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    monkeypatch.setattr(local, "_LOADED", {})  # this process's real cache stays untouched
    FakeLlama.loads = []
    return FakeLlama


def test_locate_finds_the_bundled_gguf():
    path = local.locate("smollm2")
    assert path.suffix == ".gguf" and path.is_file()
    assert local.locate(str(path)) == path  # a .gguf path is accepted as is
    with pytest.raises(ModelConfigError, match="unknown local model"):
        local.locate("nope")


# llama-cpp-python's own path, which the stand-in speaks (the defaults are lazy + prefix cache)
FULL_GRAMMAR = ("model.grammar_mode=full", "model.prefix_cache=false")


def test_one_load_per_file_however_many_roles_use_it(run, records, fake_llama):
    gguf = local.locate("smollm2")
    # the critic names the same file by path (a different spec, so a different
    # model object) and the teams differ in sampling: still one load
    result = run(
        "model=smollm2",
        *FULL_GRAMMAR,
        "rounds=2",
        f"roles.critic.spec=local:{gguf}",
        "roles.cons.temperature=1.1",
        "roles.critic.max_tokens=64",
    )
    assert len(fake_llama.loads) == 1
    assert fake_llama.loads[0]["model_path"] == str(gguf)
    assert fake_llama.loads[0]["n_ctx"] == 2048
    manifest = result.manifest
    assert manifest.model_specs["pros"] == "local:smollm2"
    assert manifest.model_specs["critic"] == f"local:{gguf}"
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert manifest.model_files == {str(gguf): digest}
    assert len(records(result.run_dir / "shared_memory.jsonl")) == 4


def test_requests_carry_schema_and_sampling_per_role(run, fake_llama):
    run(
        "model=smollm2",
        *FULL_GRAMMAR,
        "rounds=1",
        "roles.cons.temperature=1.1",
        "roles.critic.max_tokens=64",
        "llm.max_tokens=200",
    )
    (llama,) = local._LOADED.values()
    calls = llama.calls
    assert len(calls) == 6  # persona, thinking, critique for each team
    assert all(c["response_format"]["type"] == "json_object" for c in calls)
    # each schema as fitted to its role's budget (the critic's 64 tokens, the teams' 200),
    # its published fields made to end a sentence
    assert {json.dumps(c["response_format"]["schema"], sort_keys=True) for c in calls} >= {
        json.dumps(sentence_grammar_schema(fit_schema(schema, budget)), sort_keys=True)
        for schema, budget in _schemas()
    }
    critic = [c for c in calls if "hostile critic" in c["messages"][0]["content"]]
    assert [c["max_tokens"] for c in critic] == [64, 64]
    cons = [c for c in calls if "CONS team's debater" in c["messages"][0]["content"]]
    assert cons and all(c["temperature"] == 1.1 and c["max_tokens"] == 200 for c in cons)
    assert len({c["seed"] for c in calls}) == len(calls)  # each call its own derived seed
    # each prompt's instructions, not its quoted material, are kept from being copied
    persona = next(c for c in calls if "identity" in c["messages"][0]["content"])
    [no_copy] = persona["logits_processor"]
    assert tuple(b"saying who your team is"[:COPY_TOKENS]) in no_copy.next
    assert tuple(b"Remote work"[:COPY_TOKENS]) not in no_copy.next  # the motion is quoted
    failed = {"role": "assistant", "content": '{"persona": "We argue for it"}'}
    repair = [*persona["messages"], failed, {"role": "user", "content": "That reply was invalid."}]
    assert failed["content"] in local.kept_off(repair)  # a repair is kept off the failed reply


def _schemas() -> list[tuple[dict[str, Any], int]]:
    from harness.agents import CritiqueOutput, PersonaOutput, ThinkingOutput

    return [
        (m.model_json_schema(), n)
        for m, n in ((PersonaOutput, 200), (ThinkingOutput, 200), (CritiqueOutput, 64))
    ]


class LoggingLlama:
    """Logs as llama.cpp does while a bad file loads: through the callback the
    process set, or, with none set, everything to stderr (llama.cpp's default)."""

    def __init__(self, **kwargs: Any) -> None:
        log = LoggingLlama.callback or (lambda level, text, _: print(text.decode(), end="", file=sys.stderr))
        log(3, b"llama_kv_cache_iswa: using full-size SWA cache (ref: ...)\n", None)  # a warning
        log(4, b"gguf_init_from_reader: failed to read key-value pairs\n", None)  # an error, in two parts
        log(5, b"  at offset 4096\n", None)
        raise ValueError(f"Failed to load model from file: {kwargs['model_path']}")

    callback: Any = None


def test_llama_cpp_warnings_are_quiet_and_a_load_failure_says_why(monkeypatch, capsys):
    # llama-cpp-python 0.3.36 maps llama.cpp's older log levels: under verbose=False
    # Gemma's SWA warning printed mid-run, and the reason a file failed to load was dropped
    module = types.ModuleType("llama_cpp")
    module.Llama = LoggingLlama  # type: ignore[attr-defined]
    module.llama_log_callback = lambda f: f  # type: ignore[attr-defined]
    module.llama_log_set = lambda f, _: setattr(LoggingLlama, "callback", f)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    monkeypatch.setattr(local, "_LOADED", {})
    monkeypatch.setattr(
        local, "_LOG", {"last": 0, "errors": []}, raising=False
    )  # the process may have set one
    monkeypatch.setattr(LoggingLlama, "callback", None)
    with pytest.raises(ValueError) as failed:
        local.load_llama(Path("bad.gguf"), 2048, 1, 0)
    assert str(failed.value) == (
        "Failed to load model from file: bad.gguf (llama.cpp: gguf_init_from_reader: failed to read key-value pairs)"
    )
    assert (
        capsys.readouterr().err == "gguf_init_from_reader: failed to read key-value pairs\n  at offset 4096\n"
    )


def test_workers_split_the_cores(monkeypatch):
    monkeypatch.setenv("DRIFT_WORKERS", "1")
    whole = local.default_threads()
    monkeypatch.setenv("DRIFT_WORKERS", str(whole * 4))
    assert local.default_threads() == 1  # never zero


# --- lazy grammar sampling and prefix reuse (docs/decoding.md) ---


def test_lazy_pick_greedy_equals_masked_argmax():
    """The temperature-0 argument of docs/decoding.md, on random logits and grammars:
    the unconstrained argmax if the grammar allows it, else the masked argmax, is
    always the masked argmax (first index on ties, as llama.cpp's greedy sampler)."""
    import numpy as np

    from harness.models.llama_sampling import lazy_pick

    rng = np.random.default_rng(0)
    rejected = 0
    for _ in range(2000):
        logits = rng.integers(0, 6, size=40).astype(float)  # small ints: many ties
        allowed_set = rng.random(40) < rng.uniform(0.05, 0.9)
        allowed_set[rng.integers(40)] = True
        masked = np.where(allowed_set, logits, -np.inf)
        calls = []

        def sample_masked(masked=masked, calls=calls) -> int:
            calls.append(1)
            return int(np.argmax(masked))

        token, was_rejected = lazy_pick(
            lambda logits=logits: int(np.argmax(logits)),
            lambda t, a=allowed_set: bool(a[t]),
            sample_masked,
        )
        assert token == int(np.argmax(masked))
        assert was_rejected == bool(calls)  # the vocabulary is masked only on rejection
        rejected += was_rejected
    assert 0 < rejected < 2000  # both branches ran


class FakeVocab:
    """A stand-in for llama_cpp's token_to_piece: token i renders to PIECES[i]."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def llama_token_to_piece(self, vocab, token, buf, size, lstrip, special) -> int:  # noqa: ARG002
        piece = self.pieces[token]
        if len(piece) > size:
            return -len(piece)
        buf[: len(piece)] = piece
        return len(piece)


def _render(messages: list[dict[str, str]]) -> list[bytes]:
    """ChatML as SmolLM2 renders it, one 'token' per word or separator."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    text += "<|im_start|>assistant\n"
    import re

    return [p.encode() for p in re.findall(r"<\|[a-z_]+\|>|\n|[^\s<]+|\s", text)]


def test_prefix_is_the_system_message_and_header_line():
    from harness.models.prefix_cache import header_text, prefix_length

    system = "You shape the identity of the PROS debate team. Reply with one JSON object only."
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Motion: Remote work is better.\nRound 2.\nWrite JSON."},
    ]
    pieces = _render(messages)
    lib = FakeVocab(pieces)
    n = prefix_length(lib, None, list(range(len(pieces))), messages)
    rendered = b"".join(pieces[:n]).decode()
    assert rendered.endswith(f"{system}<|im_end|>\n<|im_start|>user\nMotion: Remote work is better.\n")
    assert "Round" not in rendered
    # a later round of the same agent has the same prefix tokens
    later = [messages[0], {"role": "user", "content": "Motion: Remote work is better.\nRound 3.\nOther."}]
    later_pieces = _render(later)
    assert prefix_length(FakeVocab(later_pieces), None, list(range(len(later_pieces))), later) == n
    assert later_pieces[:n] == pieces[:n]
    # a one-line user message is all variable: the prefix stops after the system message
    assert header_text([messages[0], {"role": "user", "content": "just one line"}]) == (system, "")
    # a template that rewrites the system text gives no prefix, not a wrong one
    assert prefix_length(lib, None, list(range(len(pieces))), [{"role": "system", "content": "absent"}]) == 0
    # never the whole prompt: a suffix must remain to decode from
    short = [{"role": "system", "content": system}, {"role": "user", "content": "Head line\nx"}]
    short_pieces = _render(short)[:-1]  # cut so the header would reach the end
    assert prefix_length(FakeVocab(short_pieces), None, list(range(len(short_pieces))), short) < len(
        short_pieces
    )


def test_lazy_mode_hands_its_grammar_to_the_sampler_hook(fake_llama, monkeypatch):
    """Lazy mode asks llama-cpp-python for no grammar of its own and plans one
    (built once per schema) for the sampler hook; full mode is today's request."""
    monkeypatch.setattr(local, "grammar_text", lambda schema: f"GBNF for {sorted(schema)}")
    seen = []
    original = FakeLlama.create_chat_completion

    def record(self, **kwargs):
        seen.append(self.plan)
        return original(self, **kwargs)

    monkeypatch.setattr(FakeLlama, "create_chat_completion", record)
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    request = ModelRequest(messages=[{"role": "user", "content": "FOR"}], schema=schema, tags={})
    lazy = local.LlamaCppModel("local:smollm2", grammar_mode="lazy", prefix_cache=True)
    full = local.LlamaCppModel("local:smollm2")
    lazy.complete(request)
    full.complete(request)
    (llama,) = local._LOADED.values()
    assert llama.calls[0]["response_format"] is None
    assert seen[0].grammar == "GBNF for ['properties', 'type']"
    assert seen[0].marks == header_text(request.messages)  # the chat path's prefix: system + header
    assert llama.calls[1]["response_format"] == {"type": "json_object", "schema": schema}
    assert seen[1].grammar is None and seen[1].marks is None
    assert llama.plan is None  # no plan outlives its call
    with pytest.raises(ModelConfigError, match="grammar_mode"):
        local.LlamaCppModel("local:smollm2", grammar_mode="eager")


def test_repeat_penalty_reaches_llama_cpp_and_is_validated(run, fake_llama, settings):
    from harness.schema import ConfigError

    run("model=smollm2", *FULL_GRAMMAR, "rounds=1", "model.repeat_penalty=1.15")
    (llama,) = local._LOADED.values()
    assert llama.calls and all(c["repeat_penalty"] == 1.15 for c in llama.calls)
    assert local.LlamaCppModel("local:smollm2").repeat_penalty == 1.0  # unset: llama.cpp's none
    with pytest.raises(ConfigError, match=r"^model.repeat_penalty: must be > 0"):
        settings("model=smollm2", "model.repeat_penalty=0")
    with pytest.raises(ConfigError, match=r"^model.repeat_penalty: 1.1 is for local:\* models only"):
        settings("model=smollm2", "model.spec=scripted:default", "model.repeat_penalty=1.1")


def test_grammar_mode_is_validated(settings):
    from harness.schema import ConfigError

    assert settings("model=smollm2", "model.grammar_mode=lazy").model.grammar_mode == "lazy"
    with pytest.raises(ConfigError, match=r"^model.grammar_mode: must be one of"):
        settings("model=smollm2", "model.grammar_mode=eager")


# --- on the real SmolLM2: at temperature 0 lazy decoding writes the very transcript
# full masking writes, and with the prefix cache on a run killed in round 2 and
# resumed (with a cold cache, as a new process has) equals an uninterrupted one.
# One llama.cpp thread, as in test_durable_smollm2, to stay bounded on busy cores.

BASE = ["model=smollm2", "llm.temperature=0", "seed=7", "model.n_threads=1", "progress=false"]
VOLATILE = {"ts", "prev_hash", "latency_s"}


def transcript(run_dir: Path) -> list[str]:
    """Shared memory and every team log (replies and prompts too), without clock times."""
    out = []
    for path in [run_dir / "shared_memory.jsonl", *sorted(run_dir.glob("*/*.jsonl"))]:
        for line in path.read_text().splitlines():
            record = {k: v for k, v in json.loads(line).items() if k not in VOLATILE}
            record["usage"] = {k: v for k, v in record.get("usage", {}).items() if k not in VOLATILE}
            out.append(f"{path.relative_to(run_dir)} {json.dumps(record, sort_keys=True)}")
    return out


@pytest.mark.slow
@pytest.mark.full  # 408 s in CI: make test-all (benchmarks/structured_decoding.py also compares them)
@pytest.mark.timeout(3600)  # two 3-round debates: minutes idle, far more on shared cores
def test_lazy_grammar_writes_the_full_grammar_transcript_at_temperature_0(run) -> None:
    full = run(*BASE, "rounds=3", "model.grammar_mode=full")
    lazy = run(*BASE, "rounds=3", "model.grammar_mode=lazy")
    texts = transcript(full.run_dir)
    # a turn ending no sentence, even repaired, is a schema failure (issue 39): not all 6 publish
    assert len([t for t in texts if t.startswith("shared_memory")]) >= 1
    assert transcript(lazy.run_dir) == texts
    (llama,) = local._LOADED.values()
    assert llama.lazy_stats["tokens"] > 0  # the lazy sampler did decode


@pytest.mark.slow
@pytest.mark.full  # 142 s in CI: make test-all
@pytest.mark.timeout(3600)
def test_prefix_cache_resume_equals_uninterrupted_run(make_cfg, tmp_path: Path) -> None:
    # at 64 tokens no argument ends a sentence, so none would publish (issue 39)
    args = [*BASE, "rounds=2", "llm.max_tokens=128", "model.prefix_cache=true", "model.grammar_mode=lazy"]
    cfg = make_cfg(*args)
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    reference = run_debate(resolve(cfg), raw)  # type: ignore[arg-type]
    assert sum(m.prefix_cache.hits for m in local._LOADED.values()) > 0

    crashed_root = tmp_path / "crashed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.run", *args, f"runs_root={crashed_root}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 1200
    while proc.poll() is None and time.monotonic() < deadline:
        logs = glob.glob(str(crashed_root / "*/pros/persona.jsonl"))
        if logs and os.path.getsize(logs[0]) and '"round":2' in Path(logs[0]).read_text():
            proc.send_signal(signal.SIGKILL)  # round 2 has begun
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    (run_dir,) = crashed_root.iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"

    for llama in local._LOADED.values():  # the resumed part starts cold, as a new process would
        llama.prefix_cache = PrefixCache()
    result = resume_run(run_dir)
    assert result.manifest.status == "completed"
    assert verify(run_dir)[0] == []
    shared = [t for t in transcript(run_dir) if t.startswith("shared_memory")]
    assert shared == [t for t in transcript(reference.run_dir) if t.startswith("shared_memory")]
    assert len(shared) >= 1  # a turn ending no sentence, even repaired, is not published

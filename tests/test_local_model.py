"""The ``local:`` backend without running llama.cpp: a stand-in ``llama_cpp``
module counts how often a model file is loaded and answers like the scripted
model, so the load-once rule and the request plumbing are checked in seconds."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from typing import Any

import pytest

import harness.models.local as local
from harness.models.base import ModelConfigError, ModelRequest
from harness.models.scripted import ScriptedModel
from harness.models.structured import fit_schema


class FakeLlama:
    loads: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        FakeLlama.loads.append(kwargs)
        self.calls: list[dict[str, Any]] = []
        self.scripted = ScriptedModel("scripted:fake")

    def reset(self) -> None:  # the backend clears the KV cache before each prompt
        pass

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


def test_one_load_per_file_however_many_roles_use_it(run, records, fake_llama):
    gguf = local.locate("smollm2")
    # the critic names the same file by path (a different spec, so a different
    # model object) and the teams differ in sampling: still one load
    result = run("model=smollm2", "rounds=2", f"roles.critic.spec=local:{gguf}",
                 "roles.cons.temperature=1.1", "roles.critic.max_tokens=64")  # fmt: skip
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
    run("model=smollm2", "rounds=1", "roles.cons.temperature=1.1", "roles.critic.max_tokens=64",
        "llm.max_tokens=200")  # fmt: skip
    (llama,) = local._LOADED.values()
    calls = llama.calls
    assert len(calls) == 6  # persona, thinking, critique for each team
    assert all(c["response_format"]["type"] == "json_object" for c in calls)
    # each schema as fitted to its role's budget (the critic's 64 tokens, the teams' 200)
    assert {json.dumps(c["response_format"]["schema"], sort_keys=True) for c in calls} >= {
        json.dumps(fit_schema(schema, budget), sort_keys=True) for schema, budget in _schemas()
    }
    critic = [c for c in calls if "hostile critic" in c["messages"][0]["content"]]
    assert [c["max_tokens"] for c in critic] == [64, 64]
    cons = [c for c in calls if "CONS team's debater" in c["messages"][0]["content"]]
    assert cons and all(c["temperature"] == 1.1 and c["max_tokens"] == 200 for c in cons)
    assert len({c["seed"] for c in calls}) == len(calls)  # each call its own derived seed


def _schemas() -> list[tuple[dict[str, Any], int]]:
    from harness.agents import CritiqueOutput, PersonaOutput, ThinkingOutput

    return [
        (m.model_json_schema(), n)
        for m, n in ((PersonaOutput, 200), (ThinkingOutput, 200), (CritiqueOutput, 64))
    ]


def test_workers_split_the_cores(monkeypatch):
    monkeypatch.setenv("DRIFT_WORKERS", "1")
    whole = local.default_threads()
    monkeypatch.setenv("DRIFT_WORKERS", str(whole * 4))
    assert local.default_threads() == 1  # never zero

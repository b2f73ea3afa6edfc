"""A base model's prompt (``model.prompt_style=completion``): the chat messages as a
document with a worked example reply derived from the reply's schema. No real model."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel

import harness.models.local as local
from harness.formats import FORMATS
from harness.models.base import ModelRequest
from harness.models.completion_frame import REPLY, render
from harness.models.llama_sampling import COPY_PENALTY, COPY_TOKENS, NoCopy
from harness.models.structured import fit_schema, json_schema
from harness.runtime.calls import request_sha

CHAT_MARKUP = ("<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>", "[INST]", "<bos>", "<|")
SYSTEM = {"role": "system", "content": "You are the PROS team's debater. Reply with one JSON object only."}
USER = {"role": "user", "content": "Motion: Zoos should close.\nYou argue for. Round 1.\nWrite JSON with:"}


def reply_schemas() -> dict[str, type[BaseModel]]:
    """Every format's reply classes: the ``*Output`` models of its prompt modules."""
    return {
        f"{fmt.name}:{obj.__name__}": obj
        for fmt in FORMATS.values()
        for name in fmt.prompt_modules
        for obj in vars(importlib.import_module(name)).values()
        if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__name__.endswith("Output")
    }


def example_in(prompt: str) -> Any:
    """The worked example's reply: the first Reply section of the document."""
    body = prompt.split(REPLY, 1)[1]
    return json.loads(body.split("\n\n", 1)[0])


def test_every_formats_replies_are_all_found() -> None:
    names = {key.split(":")[1] for key in reply_schemas()}
    assert {"ThinkingOutput", "CritiqueOutput", "PersonaOutput", "SpeechOutput", "RulingOutput"} <= names


@pytest.mark.parametrize("key", sorted(reply_schemas()))
@pytest.mark.parametrize("max_tokens", [None, 128])
def test_each_reply_schema_gets_a_worked_example_that_validates(key: str, max_tokens: int | None) -> None:
    cls = reply_schemas()[key]
    schema = json_schema(cls) if max_tokens is None else fit_schema(json_schema(cls), max_tokens)
    prompt = render([SYSTEM, USER], schema).prompt
    example = example_in(prompt)
    cls.model_validate(example)  # raises if the example is not a valid reply
    assert set(example) == set(schema["properties"])
    for name, prop in schema["properties"].items():  # within the fitted lengths too
        if isinstance(example[name], str) and "maxLength" in prop:
            assert len(example[name]) <= prop["maxLength"], name
        # a reply repeating its field's label is refused: the example must not teach one
        assert str(example[name]).lower() != str(prop.get("description", "")).lower()
    assert not any(mark in prompt for mark in CHAT_MARKUP)
    assert prompt.index(SYSTEM["content"]) < prompt.index("Cities should") < prompt.index("Zoos should")
    assert prompt.endswith(
        "Motion: Zoos should close.\nYou argue for. Round 1.\nWrite JSON with:\n\nReply:\n"
    )


def test_repairs_follow_as_request_reply_pairs_after_the_example() -> None:
    cls = reply_schemas()["drift:ThinkingOutput"]
    bad = {"role": "assistant", "content": '{"scratchpad": "x"}'}
    fix = {"role": "user", "content": "That reply was invalid. Reply again."}
    prompt = render([SYSTEM, USER, bad, fix], json_schema(cls)).prompt
    order = [prompt.index(s) for s in ("Cities should", "Zoos should", bad["content"], fix["content"])]
    assert order == sorted(order)
    assert prompt.count("Request:\n") == 3 and prompt.endswith("Reply again.\n\nReply:\n")


def test_the_stable_part_is_the_frame_task_example_and_header_line() -> None:
    schema = json_schema(reply_schemas()["drift:ThinkingOutput"])
    frame = render([SYSTEM, USER], schema)
    assert frame.prompt.startswith(frame.stable) and frame.stable.endswith("Motion: Zoos should close.\n")
    later = {"role": "user", "content": USER["content"].replace("Round 1", "Round 2")}
    assert render([SYSTEM, later], schema).stable == frame.stable
    other = {"role": "system", "content": "You are the CONS team's debater."}
    assert not render([other, USER], schema).prompt.startswith(frame.stable)


def test_the_request_hash_changes_whenever_the_document_does() -> None:
    schemas = [json_schema(reply_schemas()[k]) for k in ("drift:ThinkingOutput", "drift:CritiqueOutput")]
    users = [USER, {"role": "user", "content": "Motion: Zoos should close.\nRound 2."}]
    requests = [ModelRequest([SYSTEM, user], schema) for user in users for schema in schemas]
    prompts = {render(r.messages, r.schema).prompt for r in requests}
    assert len(prompts) == len({request_sha(r) for r in requests}) == len(requests)


def test_prompt_style_is_validated_before_anything_loads(settings) -> None:  # type: ignore[no-untyped-def]
    from harness.schema import ConfigError

    assert settings("model=gemma3_270m").model.prompt_style == "completion"
    assert settings("model=smollm2").model.prompt_style == "chat"
    with pytest.raises(ConfigError, match=r"^model.prompt_style: must be one of \('chat', 'completion'\)"):
        settings("model=gemma3_270m", "model.prompt_style=document")
    with pytest.raises(ConfigError, match=r"^model.prompt_style: 'completion' is for local:\* models only"):
        settings("model=openai", "+model.prompt_style=completion")


class FakeLlama:
    """What ``LlamaCppModel`` asks of a loaded model, recorded."""

    def __init__(self) -> None:
        import threading

        self.call_lock = threading.Lock()
        self.plan: Any = None
        self.calls: list[dict[str, Any]] = []

    def reset(self) -> None:
        pass

    def tokenize(self, text: bytes, add_bos: bool, special: bool) -> list[int]:
        assert not special  # the document's text is never read as control tokens
        return [0] * add_bos + list(text)

    def create_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append({**kwargs, "plan": self.plan})
        return {"choices": [{"text": '{"a": 1}'}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}


@pytest.mark.parametrize("mode", ["lazy", "full"])
def test_a_completion_model_continues_the_document_under_the_json_grammar(
    monkeypatch, tmp_path: Path, mode: str
) -> None:  # type: ignore[no-untyped-def]
    gguf = tmp_path / "base.gguf"
    gguf.write_bytes(b"")
    fake = FakeLlama()
    monkeypatch.setattr(local, "load_llama", lambda *args: fake)
    grammars = []
    monkeypatch.setattr(local, "grammar_text", lambda schema: grammars.append(schema) or 'root ::= "{}"')
    model = local.LlamaCppModel(
        f"local:{gguf}", grammar_mode=mode, prefix_cache=True, prompt_style="completion"
    )
    schema = json_schema(reply_schemas()["drift:ThinkingOutput"])
    if mode == "full":
        monkeypatch.setattr("llama_cpp.LlamaGrammar.from_string", lambda text, verbose: ("grammar", text))
    completion = model.complete(ModelRequest([SYSTEM, USER], schema, max_tokens=50, seed=3))
    (call,) = fake.calls
    frame = render([SYSTEM, USER], schema)
    assert call["prompt"][0] == 0 and bytes(call["prompt"][1:]).decode() == frame.prompt
    (no_copy,) = call["logits_processor"]  # kept off the worked example's texts, in the reply only
    assert frame.shown and no_copy.start == len(call["prompt"])
    first = list(frame.shown[0].encode())
    assert no_copy.next[tuple(first[:COPY_TOKENS])] == {first[COPY_TOKENS]}
    assert call["plan"].marks == (frame.stable,)  # the prefix cache saves frame, task and example
    assert (call["max_tokens"], call["seed"], call["stop"]) == (50, 3, None)
    assert grammars == [schema]
    if mode == "lazy":
        assert call["plan"].grammar and call["grammar"] is None
    else:
        assert call["plan"].grammar is None and call["grammar"] == ("grammar", 'root ::= "{}"')
    assert (completion.text, completion.input_tokens, completion.output_tokens) == ('{"a": 1}', 7, 3)
    with pytest.raises(local.ModelConfigError, match="prompt_style"):
        local.LlamaCppModel(f"local:{gguf}", prompt_style="document")


def test_a_reply_copying_the_worked_example_is_an_echo() -> None:
    from harness.models.echo import echo_check
    from harness.models.reply_example import example_reply
    from harness.models.structured import echoed_run, schema_text

    cls = reply_schemas()["drift:ThinkingOutput"]
    check = echo_check([SYSTEM, USER], (schema_text(cls),), (), 8)
    copied = cls.model_validate(example_reply(json_schema(cls)))
    assert "copies" in (echoed_run(copied, check) or "") and "the worked example" in (
        echoed_run(copied, check) or ""
    )
    own = cls.model_validate(
        {
            "scratchpad": "Zoos keep animals in small cages far from home.",
            "argument": "Zoos confine wild animals "
            "in spaces a fraction of their range, and most species kept never return to the wild.",
        }
    )
    assert echoed_run(own, check) is None


def test_no_copy_pushes_down_only_the_token_that_would_extend_a_copied_run() -> None:
    shown = [[1, 2, 3, 4, 5, 6], [7, 2, 3, 4, 5, 8]]
    no_copy = NoCopy(shown, start=2)

    def pushed(ids: list[int]) -> set[int]:
        scores = no_copy(np.array(ids), np.zeros(10, dtype=np.float32))
        assert set(scores[scores != 0]) <= {-COPY_PENALTY}
        return set(np.flatnonzero(scores))

    assert pushed([9, 9, 1, 2, 3, 4]) == {5}  # the reply ran along a shown text for COPY_TOKENS
    assert pushed([9, 9, 2, 3, 4, 5]) == {6, 8}  # the run goes on differently in each text
    assert pushed([9, 9, 1, 2, 3]) == set()  # shorter runs are the model's own to write
    assert pushed([1, 2, 3, 4]) == set()  # the prompt may quote the example; only the reply is checked
    chat = NoCopy(shown)  # a chat template's prompt: its length is the first call's tokens
    assert not chat(np.array([1, 2, 3, 4]), np.zeros(10, dtype=np.float32)).any()
    assert chat(np.array([1, 2, 3, 4, 1, 2, 3, 4]), np.zeros(10, dtype=np.float32))[5] == -COPY_PENALTY

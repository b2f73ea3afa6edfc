"""The LangChain backend against a canned OpenAI-compatible server on
loopback: what goes over the wire (mode, max_tokens) and how a reply cut off
by max_tokens comes back (as text to repair, not as a provider failure)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harness.agents import CritiqueOutput
from harness.models.base import ModelRequest
from harness.models.remote import LangChainModel, check_remote, pick_mode
from harness.models.structured import generate_structured


@pytest.fixture
def canned():
    """A server that answers chat completions with the (content, finish_reason)
    pairs in ``state['replies']``, in order, and keeps every request body."""
    state: dict[str, Any] = {"bodies": [], "replies": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["bodies"].append(body)
            content, finish = state["replies"].pop(0)
            reply = json.dumps({
                "id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": finish,
                             "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state["base_url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def request(max_tokens: int = 64) -> ModelRequest:
    return ModelRequest(
        messages=[{"role": "user", "content": "judge"}],
        schema=CritiqueOutput.model_json_schema(),
        schema_name="CritiqueOutput",
        max_tokens=max_tokens,
    )


def model(base_url: str) -> LangChainModel:
    return LangChainModel("openai:local", kwargs={"base_url": base_url, "api_key": "none", "max_retries": 0})


@pytest.mark.network_loopback
def test_compatible_server_gets_json_object_and_max_tokens(canned):
    good = '{"critique_feedback": "the draft is sound", "is_approved": true}'
    canned["replies"] = [(good, "stop")]
    out = model(canned["base_url"]).complete(request(max_tokens=77))
    assert out.text == good
    assert (out.input_tokens, out.output_tokens) == (11, 7)
    (body,) = canned["bodies"]
    # not json_schema; the schema beside json_object constrains llama-cpp-python's server
    assert body["response_format"] == {"type": "json_object", "schema": CritiqueOutput.model_json_schema()}
    # llama-cpp-python's server reads max_tokens and ignores max_completion_tokens
    assert body["max_tokens"] == 77


@pytest.mark.network_loopback
def test_reply_cut_by_max_tokens_is_returned_for_repair(canned):
    cut = '{"critique_feedback": "the argument lacks evid'
    canned["replies"] = [(cut, "length")]
    m = model(canned["base_url"])
    out = m.complete(request())
    assert out.text == cut and out.output_tokens == 7
    # through the structured layer: the cut-off object is closed, found to lack
    # is_approved, and the re-ask (naming the missing field) succeeds
    canned["replies"] = [
        (cut, "length"),
        ('{"critique_feedback": "the draft is sound", "is_approved": false}', "stop"),
    ]
    result = generate_structured(m.complete, [{"role": "user", "content": "judge"}], CritiqueOutput,
                                 temperature=0.1, max_tokens=32, seed=1, max_repairs=1, tags={})  # fmt: skip
    assert result.ok and result.attempts == 2
    assert result.value == CritiqueOutput(critique_feedback="the draft is sound", is_approved=False)
    assert "is_approved" in canned["bodies"][-1]["messages"][-1]["content"]


def test_mode_per_provider():
    assert pick_mode("openai", {}, "auto") == "json_schema"
    assert pick_mode("openai", {"base_url": "http://x/v1"}, "auto") == "json_object"
    assert pick_mode("ollama", {}, "auto") == "json_schema"
    assert pick_mode("anthropic", {}, "auto") == "prompt"
    assert pick_mode("openai", {}, "prompt") == "prompt"


def test_check_remote_accepts_a_key_from_config(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    check_remote("openai:gpt-4o", {"api_key": "sk-x"}, "model.spec")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-y")
    check_remote("openai:gpt-4o", {"api_key": None}, "model.spec")

"""The LangChain backend against a canned OpenAI-compatible server on
loopback: what goes over the wire (mode, max_tokens) and how a reply cut off
by max_tokens comes back (as text to repair, not as a provider failure)."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conftest import serving

from harness.agents import CritiqueOutput
from harness.models.base import ModelRequest
from harness.models.remote import LangChainModel, check_remote, pick_mode
from harness.models.retry import call_with_retry, classify
from harness.models.structured import generate_structured
from harness.schema import RetryConfig


@pytest.fixture
def canned():
    """A server that answers chat completions with the (content, finish_reason)
    pairs in ``state['replies']``, in order, and keeps every request body. A
    reply given as a dict is a fault: its status, headers, raw body and delay."""
    state: dict[str, Any] = {"bodies": [], "replies": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["bodies"].append(body)
            entry = state["replies"].pop(0)
            if isinstance(entry, dict):
                return self.fault(entry)
            content, finish = entry
            reply = json.dumps(
                {
                    "id": "c1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": finish,
                            "message": {"role": "assistant", "content": content},
                        }
                    ],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def fault(self, entry: dict[str, Any]) -> None:
            time.sleep(entry.get("delay", 0))
            raw = entry.get("raw", b'{"error": {"message": "injected"}}')
            self.send_response(entry.get("status", 200))
            for name, value in {"Content-Type": "application/json", **entry.get("headers", {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        state["base_url"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
        yield state


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
    result = generate_structured(
        m.complete,
        [{"role": "user", "content": "judge"}],
        CritiqueOutput,
        temperature=0.1,
        max_tokens=32,
        seed=1,
        max_repairs=1,
        tags={},
    )
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


GOOD = ('{"critique_feedback": "the draft is sound", "is_approved": true}', "stop")


def bare(base_url: str, timeout_s: float | None = None) -> LangChainModel:
    """The model as the registry builds it: no max_retries of our own."""
    return LangChainModel(
        "openai:local", kwargs={"base_url": base_url, "api_key": "none"}, timeout_s=timeout_s
    )


@pytest.mark.network_loopback
def test_the_client_leaves_retrying_to_the_harness(canned):
    # the openai client retries a 500 twice by itself unless told not to;
    # those retries would never become events
    canned["replies"] = [{"status": 500}, GOOD, GOOD]
    with pytest.raises(Exception) as caught:
        bare(canned["base_url"]).complete(request())
    assert classify(caught.value) == "transient"
    assert len(canned["bodies"]) == 1


@pytest.mark.network_loopback
def test_a_truncated_body_is_transient_and_retried(canned):
    whole = json.dumps({"id": "c1", "object": "chat.completion", "choices": []}).encode()
    canned["replies"] = [{"status": 200, "raw": whole[: len(whole) // 2]}, GOOD]
    events: list[str] = []
    policy = RetryConfig(initial_s=0, jitter_s=0)
    m = bare(canned["base_url"])
    out = call_with_retry(
        lambda: m.complete(request()), policy, lambda n, exc, wait: events.append(classify(exc))
    )
    assert out.text == GOOD[0]
    assert events == ["transient"]


@pytest.mark.network_loopback
def test_retry_after_is_a_floor_on_the_wait(canned):
    canned["replies"] = [{"status": 429, "headers": {"Retry-After": "1"}}, GOOD]
    waits: list[float] = []
    policy = RetryConfig(initial_s=0, jitter_s=0, max_s=0)
    m = bare(canned["base_url"])
    started = time.perf_counter()
    call_with_retry(lambda: m.complete(request()), policy, lambda n, exc, wait: waits.append(wait))
    assert waits == [1.0]
    assert time.perf_counter() - started >= 1.0


@pytest.mark.network_loopback
def test_a_call_past_retry_timeout_is_transient(canned):
    canned["replies"] = [{"status": 200, "raw": json.dumps({}).encode(), "delay": 2}]
    started = time.perf_counter()
    with pytest.raises(Exception) as caught:
        bare(canned["base_url"], timeout_s=0.3).complete(request())
    assert classify(caught.value) == "transient"
    assert time.perf_counter() - started < 1.5


@pytest.mark.network_loopback
def test_the_per_call_seed_goes_to_the_server(canned):
    canned["replies"] = [GOOD]
    seeded = ModelRequest(messages=[{"role": "user", "content": "judge"}], seed=1234)
    bare(canned["base_url"]).complete(seeded)
    assert canned["bodies"][0]["seed"] == 1234


def test_models_of_the_same_settings_share_one_chat_model(monkeypatch):
    """The cells of an in-process sweep share a chat model (and its HTTP client)
    per distinct settings; another key, temperature or environment gets its own."""
    one = LangChainModel("openai:shared", kwargs={"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-a"})
    two = LangChainModel("openai:shared", kwargs={"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-a"})
    other = LangChainModel("openai:shared", kwargs={"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-b"})
    assert one._chat(0.7, 64) is two._chat(0.7, 64)
    assert one._chat(0.7, 64) is not other._chat(0.7, 64)
    assert one._chat(0.7, 64) is not one._chat(0.2, 64)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-other")  # what the SDK reads when it is built
    three = LangChainModel("openai:shared", kwargs={"base_url": "http://127.0.0.1:9/v1", "api_key": "sk-a"})
    assert three._chat(0.7, 64) is not one._chat(0.7, 64)

"""The provider simulator (tests/provider_sim.py): its limits, headers,
faults and formats over raw HTTP; the real langchain-openai client against
it; and whole drift debates through it, whose token ledger must equal what
the simulator billed, with and without its RPM limit binding."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pytest
from provider_sim import MESSAGES_PATH, Billing, ProviderSim
from pydantic import BaseModel, Field, SecretStr

from harness.formats.checks import verify
from harness.store.records import EventRecord, ReplyRecord
from harness.store.rundir import read_manifest

pytestmark = pytest.mark.network_loopback

CHAT = "/v1/chat/completions"
WAIT = re.compile(r"retrying in ([0-9.]+)s")
# a short retry policy: the simulator's Retry-After is the floor of every wait
FAST_RETRY = ("retry.max_attempts=6", "retry.initial_s=0.05", "retry.max_s=0.2", "retry.jitter_s=0")


def post(
    sim: ProviderSim, body: dict[str, Any], key: str = "sk-a", path: str = CHAT
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One request on a fresh connection: (status, lower-cased headers, parsed body)."""
    parts = urlsplit(sim.base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    auth = {"x-api-key": key} if path == MESSAGES_PATH else {"Authorization": f"Bearer {key}"}
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **auth})
        reply = conn.getresponse()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, json.loads(reply.read())
    finally:
        conn.close()


def chat(words: str = "one two three", max_tokens: int = 40, seed: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "model": "sim-model",
        "messages": [{"role": "user", "content": words}],
        "max_tokens": max_tokens,
        "seed": seed,
        **extra,
    }


# -- the simulator on its own ------------------------------------------------


def test_rpm_limit_answers_429_with_retry_after_once_the_window_is_full():
    with ProviderSim(rpm=3, window_s=1.5) as sim:
        replies = [post(sim, chat()) for _ in range(4)]
        other = post(sim, chat(), key="sk-b")  # limits are per key
        status, headers, body = replies[-1]
        assert [r[0] for r in replies] == [200, 200, 200, 429]
        assert [int(r[1]["x-ratelimit-remaining-requests"]) for r in replies] == [2, 1, 0, 0]
        assert int(headers["retry-after"]) == 2 and 0 < int(headers["retry-after-ms"]) <= 1500
        assert body["error"]["type"] == "rate_limit_error" and body["error"]["code"] == "rate_limit_exceeded"
        assert other[0] == 200
        time.sleep(int(headers["retry-after-ms"]) / 1000 + 0.02)  # the oldest request leaves the window
        assert post(sim, chat())[0] == 200
        bill = sim.billing("sk-a")
    assert (bill.requests, bill.billed_requests, bill.rate_limited) == (5, 4, 1)
    for _, headers, _ in replies:
        for name in ("requests", "tokens"):
            for part in ("limit", "remaining", "reset"):
                assert f"x-ratelimit-{part}-{name}" in headers


def test_tpm_limit_charges_prompt_plus_max_tokens_at_admission():
    # each request: 3 prompt words + max_tokens 40 = 43 tokens against the limit
    with ProviderSim(tpm=100, window_s=5.0) as sim:
        replies = [post(sim, chat()) for _ in range(3)]
        too_big = post(sim, chat(max_tokens=200), key="sk-big")  # can never fit
    assert [r[0] for r in replies] == [200, 200, 429]
    assert [int(r[1]["x-ratelimit-remaining-tokens"]) for r in replies] == [57, 14, 14]
    assert "tokens" in replies[2][2]["error"]["message"]
    assert too_big[0] == 429 and int(too_big[1]["retry-after"]) == 5
    assert [c.outcome for c in sim.calls] == ["ok", "ok", "tpm", "tpm"]
    # billed is what the replies said they used, not the admission estimate
    used = [r[2]["usage"] for r in replies[:2]]
    bill = sim.billing("sk-a")
    assert bill.prompt_tokens == sum(u["prompt_tokens"] for u in used) == 6
    assert bill.completion_tokens == sum(u["completion_tokens"] for u in used)


def test_injected_faults_and_slow_replies_follow_their_seeded_rates():
    with ProviderSim(error_rate=1.0) as sim:
        status, headers, body = post(sim, chat())
        assert status in (500, 503) and body["error"]["type"] == "server_error"
        assert "x-ratelimit-remaining-requests" in headers
        assert (sim.billing("sk-a").faults, sim.billing("sk-a").total_tokens) == (1, 0)
    with ProviderSim(slow_rate=1.0, slow_s=0.3) as sim:
        started = time.monotonic()
        assert post(sim, chat())[0] == 200
        assert time.monotonic() - started >= 0.3 and sim.billing("sk-a").slow == 1
    patterns = []
    for _ in range(2):
        with ProviderSim(error_rate=0.3, slow_rate=0.2, slow_s=0.0, seed=7) as sim:
            patterns.append([post(sim, chat())[0] for _ in range(20)] + [c.outcome for c in sim.calls])
    assert patterns[0] == patterns[1] and {"ok", "fault", "slow"} <= set(patterns[0])


class Verdict(BaseModel):
    winner: Literal["pro", "con"]
    score: int = Field(ge=1, le=10)
    reason: str


def test_response_formats_and_replies_are_deterministic():
    schema = Verdict.model_json_schema()
    formats = {
        "json_schema": {"type": "json_schema", "json_schema": {"name": "Verdict", "schema": schema}},
        "json_object+schema": {"type": "json_object", "schema": schema},
        "json_object": {"type": "json_object"},
    }
    with ProviderSim() as sim:
        texts = {
            name: post(sim, chat(max_tokens=200, response_format=fmt))[2]["choices"][0]["message"]["content"]
            for name, fmt in formats.items()
        }
        first, again = (post(sim, chat(seed=5)) for _ in range(2))
        cut = post(sim, chat(max_tokens=4))[2]
    assert Verdict.model_validate_json(texts["json_schema"]) == Verdict.model_validate_json(
        texts["json_object+schema"]
    )
    assert set(json.loads(texts["json_object"])) == {"reply"}
    assert first[2]["choices"] == again[2]["choices"]  # same body, same words
    text = first[2]["choices"][0]["message"]["content"]
    n = len(text.split())
    assert first[2]["usage"] == {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
    assert cut["choices"][0]["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 4
    assert [c.response_format for c in sim.calls[:3]] == ["json_schema", "json_object", "json_object"]


def test_anthropic_messages_format():
    body = {
        "model": "sim-claude",
        "max_tokens": 200,
        "system": "You judge debates.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "who won"}]}],
        "output_format": {"type": "json_schema", "schema": Verdict.model_json_schema()},
    }
    with ProviderSim(rpm=1, window_s=5.0) as sim:
        status, headers, reply = post(sim, body, key="sk-ant", path=MESSAGES_PATH)
        limited = post(sim, body, key="sk-ant", path=MESSAGES_PATH)
    assert status == 200 and reply["type"] == "message" and reply["stop_reason"] == "end_turn"
    Verdict.model_validate_json(reply["content"][0]["text"])
    assert reply["usage"]["input_tokens"] == 5  # the system prompt counts
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert limited[0] == 429 and limited[2]["error"]["type"] == "rate_limit_error"
    assert "retry-after" in limited[1]


def test_64_concurrent_clients_overlap_their_latency():
    """64 clients at 0.5 s latency each: served side by side, not one after another."""
    clients, per_client = 64, 2
    statuses: list[int] = []
    lock = threading.Lock()

    def client(sim: ProviderSim) -> None:
        for _ in range(per_client):
            status = post(sim, chat())[0]
            with lock:
                statuses.append(status)

    with ProviderSim(latency_s=0.5) as sim:
        threads = [threading.Thread(target=client, args=(sim,)) for _ in range(clients)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        took = time.monotonic() - started
    assert statuses == [200] * clients * per_client
    # serial would take 64 s; two rounds of overlapped 0.5 s calls take ~1 s plus overhead
    assert took < 10, f"{clients * per_client} calls took {took:.1f} s"


# -- the real OpenAI client ---------------------------------------------------


def test_langchain_openai_client_talks_to_the_simulator():
    from langchain_openai import ChatOpenAI

    with ProviderSim() as sim:
        llm = ChatOpenAI(
            model="sim-model",
            base_url=sim.base_url,
            api_key=SecretStr("sk-lc"),
            max_retries=0,
            timeout=10,
            seed=3,
        )
        reply = llm.invoke("Is remote work better?")
        verdict = llm.with_structured_output(Verdict).invoke("Who won the debate?")
        calls, bill = sim.calls, sim.billing("sk-lc")
    assert isinstance(reply.content, str) and reply.content
    assert reply.usage_metadata is not None and reply.usage_metadata["input_tokens"] == 4
    assert isinstance(verdict, Verdict)
    assert [c.response_format for c in calls] == [None, "json_schema"]
    assert bill.billed_requests == 2
    assert bill.prompt_tokens == 4 + 4 and bill.completion_tokens == sum(c.completion_tokens for c in calls)
    assert reply.usage_metadata["output_tokens"] == calls[0].completion_tokens


# -- whole debates through the simulator --------------------------------------


def sim_args(sim: ProviderSim, *extra: str) -> tuple[str, ...]:
    return (
        "model=openai",
        "model.spec=openai:sim-model",
        f"model.kwargs.base_url={sim.base_url}",
        "rounds=1",
        "retry.timeout_s=10",
        *extra,
    )


def ledger(run_dir: Path, records: Callable[[Path], list]) -> tuple[int, int, int]:
    """(calls, input, output tokens) summed over every kept reply of the run."""
    replies = [r for path in run_dir.rglob("replies.jsonl") for r in records(path)]
    assert all(isinstance(r, ReplyRecord) for r in replies)
    return (
        len(replies),
        sum(r.usage.input_tokens for r in replies),
        sum(r.usage.output_tokens for r in replies),
    )


def billed(bill: Billing) -> tuple[int, int, int]:
    """(calls, input, output tokens) the simulator billed, in the ledger's order."""
    return bill.billed_requests, bill.prompt_tokens, bill.completion_tokens


@pytest.mark.parametrize("mode", ["auto", "json_schema"])  # auto: json_object with the schema beside it
def test_debate_through_the_simulator_bills_what_the_ledger_says(run, records, monkeypatch, mode):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ledger")
    with ProviderSim() as sim:
        result = run(*sim_args(sim, f"model.structured_mode={mode}"))
        bill, calls = sim.billing("sk-ledger"), sim.calls
    manifest = read_manifest(result.run_dir)
    assert manifest.status == "completed"
    assert verify(result.run_dir) == ([], [])
    assert sim.keys == ["sk-ledger"] and bill.rate_limited == bill.faults == bill.unseen == 0
    assert {c.response_format for c in calls} == {"json_object" if mode == "auto" else "json_schema"}
    counts = manifest.counts
    assert (counts.model_calls, counts.input_tokens, counts.output_tokens) == billed(bill)
    assert ledger(result.run_dir, records) == billed(bill)


def test_debate_completes_when_the_rpm_limit_binds(run, records, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-limited")
    with ProviderSim(rpm=2, window_s=1.0) as sim:  # a round's 6 calls fill the window 3 times
        result = run(*sim_args(sim, *FAST_RETRY))
        bill = sim.billing("sk-limited")
    manifest = read_manifest(result.run_dir)
    assert manifest.status == "completed" and verify(result.run_dir) == ([], [])
    events = [e for e in records(result.run_dir / "events.jsonl") if isinstance(e, EventRecord)]
    retries = [e for e in events if e.event == "retry"]
    assert bill.rate_limited > 0
    assert len(retries) == bill.rate_limited == manifest.counts.retries
    assert all(e.error is not None and e.error.kind == "rate_limit" for e in retries)
    assert not [e for e in events if e.event == "error"]
    # each wait honours the simulator's retry-after-ms over retry.max_s (0.2 s)
    waits = [float(m.group(1)) for e in retries if (m := WAIT.search(e.detail or ""))]
    assert len(waits) == len(retries) and max(waits) > 0.2
    # 429s bill nothing: the ledger still equals what was billed
    counts = manifest.counts
    assert ledger(result.run_dir, records) == billed(bill)
    assert (counts.model_calls, counts.input_tokens, counts.output_tokens) == billed(bill)


def test_debate_through_5xx_and_timeouts_pays_for_replies_it_never_saw(run, records, monkeypatch):
    """Injected 5xx bill nothing; a slow reply past the client's timeout is billed
    (a provider bills the generation) but never reaches the ledger."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-faults")
    with ProviderSim(error_rate=0.25, slow_rate=0.2, slow_s=1.0, seed=1) as sim:
        result = run(*sim_args(sim, *FAST_RETRY, "retry.timeout_s=0.4"))
        assert sim.settle()  # a reply held past its client's timeout is billed when it ends
        bill, calls = sim.billing("sk-faults"), sim.calls
    manifest = read_manifest(result.run_dir)
    assert manifest.status == "completed" and verify(result.run_dir) == ([], [])
    retries = [e for e in records(result.run_dir / "events.jsonl") if e.event == "retry"]
    assert bill.faults > 0 and bill.unseen > 0, calls
    assert len(retries) == bill.faults + bill.unseen
    assert all(e.error is not None and e.error.kind == "transient" for e in retries)
    unseen = [c for c in calls if c.unseen]
    assert len(unseen) == bill.unseen
    assert all(c.unseen for c in calls if c.outcome == "slow")  # 1 s held, the client waits 0.4 s
    kept = ledger(result.run_dir, records)
    assert kept == (
        bill.billed_requests - bill.unseen,
        bill.prompt_tokens - sum(c.prompt_tokens for c in unseen),
        bill.completion_tokens - sum(c.completion_tokens for c in unseen),
    )

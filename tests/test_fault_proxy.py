"""Issue 14: provider faults become retry events, not lost calls or broken runs.

A fault-injecting proxy (``tests/fault_proxy.py``) sits between the harness's
OpenAI client and llama-cpp-python's server and injects 429s, 500s, 503s,
replies slower than the per-call timeout, truncated 200 bodies and dropped
connections. Every injected fault must show up as exactly one ``retry`` (or,
once retries run out, ``error``) event, the run must complete, and
``verify`` must be clean. The proxy itself is tested first, without a model.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fault_proxy import FAULT_KINDS, Fault, FaultProxy
from test_real_models import llama_server  # noqa: F401 - a fixture, used by name

from harness.formats.checks import verify
from harness.store.records import EventRecord
from harness.store.rundir import read_manifest

# -- the proxy on its own, against a tiny stdlib upstream --------------------

REPLY = json.dumps({"id": "c1", "object": "chat.completion", "choices": [], "pad": "x" * 200}).encode()
CUT = REPLY[: len(REPLY) // 2]


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[str]]]:
    """A canned upstream: (its base URL, the requests it got). It answers
    ``REPLY`` after sleeping the request's ``X-Sleep`` seconds."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._reply()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self._reply()

        def _reply(self) -> None:
            seen.append(f"{self.command} {self.path}")
            time.sleep(float(self.headers.get("X-Sleep", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(REPLY)))
            self.end_headers()
            self.wfile.write(REPLY)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def send(
    base_url: str,
    method: str = "POST",
    path: str = "/v1/chat/completions",
    *,
    timeout: float = 5.0,
    sleep: float = 0,
) -> tuple[int, dict[str, str], bytes]:
    """One request through the proxy: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(base_url).port, timeout=timeout)
    body = b'{"model": "m"}' if method == "POST" else None
    try:
        conn.request(
            method, path, body=body, headers={"Content-Type": "application/json", "X-Sleep": str(sleep)}
        )
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()  # so the proxy sees a timed-out client leave


@pytest.mark.network_loopback
def test_proxy_injects_each_fault_as_scheduled(upstream):
    url, seen = upstream
    schedule = ["ok", "429", "500", "503", "truncate", "drop", "delay", "delay"]
    with FaultProxy(url, schedule, delay_s=0.6, retry_after_s=3) as proxy:
        assert proxy.base_url.endswith("/v1")
        assert send(proxy.base_url)[::2] == (200, REPLY)  # ok: forwarded untouched
        status, headers, body = send(proxy.base_url)
        assert status == 429 and headers["Retry-After"] == "3"
        assert json.loads(body)["error"]["type"] == "rate_limit_error"
        assert send(proxy.base_url)[0] == 500
        assert send(proxy.base_url)[0] == 503
        # truncate: valid HTTP, broken JSON (the last reply, replayed and cut)
        status, headers, body = send(proxy.base_url)
        assert (status, body, int(headers["Content-Length"])) == (200, CUT, len(CUT))
        with pytest.raises(json.JSONDecodeError):
            json.loads(body)
        with pytest.raises(http.client.RemoteDisconnected):  # drop: no status line at all
            send(proxy.base_url)
        with pytest.raises(TimeoutError):  # delay: past the client's timeout...
            send(proxy.base_url, timeout=0.2)
        started = time.monotonic()
        assert send(proxy.base_url)[::2] == (200, REPLY)  # ...or, for a patient client, late but whole
        assert time.monotonic() - started >= 0.6
        assert send(proxy.base_url)[::2] == (200, REPLY)  # past the schedule: passes through
        assert proxy.requests == 9
        time.sleep(0.8)  # the abandoned delayed request finishes being held
    assert proxy.faults == [
        Fault(1, "429"),
        Fault(2, "500"),
        Fault(3, "503"),
        Fault(4, "truncate"),
        Fault(5, "drop"),
        Fault(6, "delay"),
        Fault(7, "delay"),
    ]
    # forwarded: the first ok, the patient delay and the one past the schedule; not
    # the abandoned delay (its client had gone), the truncation (a replay), the errors
    assert seen == ["POST /v1/chat/completions"] * 3
    assert proxy.incidents == []


@pytest.mark.network_loopback
def test_proxy_truncates_the_request_s_own_reply_when_none_came_before(upstream):
    url, seen = upstream
    with FaultProxy(url, ["truncate"]) as proxy:
        assert send(proxy.base_url)[::2] == (200, CUT)
    assert seen == ["POST /v1/chat/completions"]


@pytest.mark.network_loopback
def test_proxy_passes_other_requests_through_uncounted(upstream):
    url, seen = upstream
    with FaultProxy(url, ["500"]) as proxy:
        assert send(proxy.base_url, "GET", "/v1/models")[::2] == (200, REPLY)
        assert proxy.requests == 0 and proxy.faults == []
        assert send(proxy.base_url)[0] == 500  # the first chat request is still request 0
    assert seen == ["GET /v1/models"]


@pytest.mark.network_loopback
def test_proxy_reports_what_it_did_not_inject(upstream):
    url, _ = upstream
    with FaultProxy(url) as proxy:
        with pytest.raises(TimeoutError):  # an upstream slower than the client's timeout
            send(proxy.base_url, timeout=0.2, sleep=0.5)
        time.sleep(0.6)
        assert proxy.faults == []
        (incident,) = proxy.incidents
        assert incident.startswith("client left before its reply; the upstream took 0.")
    with FaultProxy("http://127.0.0.1:1/v1") as proxy:  # nothing listens on port 1
        assert send(proxy.base_url)[0] == 502
        (incident,) = proxy.incidents
        assert incident.startswith("upstream failed on POST /v1/chat/completions: ConnectionRefusedError")


def test_proxy_rejects_unknown_fault_kinds():
    with pytest.raises(ValueError, match="unknown fault kinds"):
        FaultProxy("http://127.0.0.1:1/v1", ["ok", "418"])


def test_proxy_stops_promptly_while_holding_a_request(upstream):
    url, _ = upstream
    proxy = FaultProxy(url, ["delay"], delay_s=60).start()
    outcome: list[BaseException] = []

    def patient_client() -> None:
        try:
            send(proxy.base_url, timeout=30)
        except OSError as exc:
            outcome.append(exc)

    client = threading.Thread(target=patient_client)
    client.start()
    while proxy.requests == 0:
        time.sleep(0.01)
    started = time.monotonic()
    proxy.stop()  # the held request is woken and dropped, not waited out
    client.join(timeout=10)
    assert time.monotonic() - started < 5 and not client.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], http.client.RemoteDisconnected)


# -- the harness through the proxy, on SmolLM2 -------------------------------

# Faults front-loaded (a 1-round debate makes 6 calls), never more than two in
# a row, so 4 attempts always suffice and no call fails.
SCHEDULE = ["429", "ok", "500", "drop", "ok", "truncate", "503", "ok", "delay", "ok"]
# The timeout bounds every call, so it must clear the slowest real one: SmolLM2
# on one thread under json_object + schema decoding took up to 28 s a call on
# 2 shared cores. A shorter one times real calls out (the proxy's incidents).
TIMEOUT_S, DELAY_S, RETRY_AFTER_S = 40, 45, 1
EXPECTED_KIND = {"429": "rate_limit"}  # every other fault is transient
WAIT = re.compile(r"retrying in ([0-9.]+)s")


def events_of(records: Callable[[Path], list], run_dir: Path | None) -> list[EventRecord]:
    """The run's retry and error events (none if the run folder is missing)."""
    if run_dir is None or not (run_dir / "events.jsonl").exists():
        return []
    return [e for e in records(run_dir / "events.jsonl") if e.event in ("retry", "error")]


def describe(events: list[EventRecord]) -> list[tuple[str, str | None, str | None]]:
    return [(e.event, e.error.kind if e.error else None, e.error.type if e.error else None) for e in events]


@pytest.mark.slow
@pytest.mark.network_loopback
def test_every_injected_fault_becomes_one_retry_event(run, records, runs_root, llama_server):  # noqa: F811
    assert set(SCHEDULE) == set(FAULT_KINDS)  # each kind at least once
    failure: Exception | None = None
    with FaultProxy(llama_server, SCHEDULE, delay_s=DELAY_S, retry_after_s=RETRY_AFTER_S) as proxy:
        try:
            run(
                "model=openai",
                "model.spec=openai:smollm2",
                f"model.kwargs.base_url={proxy.base_url}",
                "model.kwargs.api_key=none",
                "rounds=1",
                "critic=lenient",
                "critic.max_iterations=1",
                "structured.max_repairs=1",
                "llm.max_tokens=128",
                f"retry.timeout_s={TIMEOUT_S}",
                "retry.max_attempts=4",
                "retry.initial_s=0.05",
                "retry.max_s=0.2",
                "retry.jitter_s=0",
            )
        except Exception as exc:  # kept, so the events still explain what happened
            failure = exc
        faults, incidents = proxy.faults, proxy.incidents
    run_dir = next((m.parent for m in runs_root.rglob("manifest.json")), None)
    events = events_of(records, run_dir)
    diagnosis = f"faults {faults}; events {describe(events)}; incidents {incidents}; run raised {failure!r}"
    assert run_dir is not None, diagnosis
    assert incidents == [], f"not injected, so no event is expected for them: {diagnosis}"
    assert [f.kind for f in faults] == [k for k in SCHEDULE if k != "ok"], (
        f"schedule not used up: {diagnosis}"
    )
    expected = [("retry", EXPECTED_KIND.get(f.kind, "transient")) for f in faults]
    # calls are sequential, so the n-th fault is the n-th retry event
    assert [(e.event, e.error.kind if e.error else None) for e in events] == expected, diagnosis
    manifest = read_manifest(run_dir)
    assert failure is None and manifest.status == "completed", diagnosis
    assert manifest.counts.retries == len(faults)
    # Retry-After (1 s) is honoured even though retry.max_s is 0.2 s
    (rate_limited,) = [e for e in events if e.error and e.error.kind == "rate_limit"]
    wait = WAIT.search(rate_limited.detail)
    assert wait and float(wait.group(1)) >= RETRY_AFTER_S, rate_limited.detail
    assert verify(run_dir) == ([], [])

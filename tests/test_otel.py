"""OpenTelemetry GenAI traces (``tracing.otel=true``, harness.runtime.otel):
the span tree and its attributes through the SDK's in-memory exporter, and
the real OTLP/HTTP path against a collector this test runs on 127.0.0.1 —
no secret and no prompt in what is sent, and a collector that refuses the
spans costs the run nothing but one warning line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import serving

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from harness.engine import RunResult  # noqa: E402
from harness.engine.resuming import resume_run  # noqa: E402
from harness.runtime import otel_provider  # noqa: E402

SECRET = "sk-otel-secret-that-must-never-travel-4242"
TRACED = ("tracing.otel=true", f"+model.kwargs.api_key={SECRET}")


@pytest.fixture
def memory() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    otel_provider.configure(exporter)
    try:
        yield exporter
    finally:
        otel_provider.shutdown()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def first_prompt(run_dir: Path) -> str:
    """The text of a user message the run really sent."""
    messages = lines(run_dir / "pros" / "prompts.jsonl")[0]["messages"]
    return next(m["content"] for m in messages if m["role"] == "user")


def test_a_traced_run_nests_run_node_agent_and_chat_spans_in_the_genai_conventions(
    run: Callable[..., RunResult], memory: InMemorySpanExporter
) -> None:
    run("rounds=1", "run_name=untraced")
    assert memory.get_finished_spans() == ()  # off by default

    result = run("rounds=1", "run_name=traced", *TRACED)
    spans = memory.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    parent = {s.context.span_id: by_id.get(s.parent.span_id) if s.parent else None for s in spans}
    (root,) = [s for s in spans if s.parent is None]
    assert (
        root.name == "invoke_workflow drift" and root.attributes["gen_ai.operation.name"] == "invoke_workflow"
    )
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert all(s.attributes["gen_ai.conversation.id"] == "traced" for s in spans)
    assert root.resource.attributes["gen_ai.semconv.version"] == otel_provider.SEMCONV_VERSION
    assert root.resource.schema_url.endswith(otel_provider.SEMCONV_VERSION)

    nodes = [s for s in spans if parent[s.context.span_id] is root]
    # once per seat in the one round, and no other node: each is a graph step a turn pays for
    # (an approval moves on to the next turn in the critique node)
    turns = 2 * ["persona", "thinking", "critique"]
    assert sorted(s.name for s in nodes) == sorted(["__start__", *turns])
    agents = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert sorted(s.name for s in agents) == sorted(
        f"invoke_agent {seat}.{agent}"
        for seat in ("pros", "cons")
        for agent in ("persona", "thinking", "critique")
    )
    for agent in agents:  # inside the node of the same name
        assert parent[agent.context.span_id].name == agent.attributes["drift_harness.agent"]
        assert agent.attributes["gen_ai.provider.name"] == "scripted"

    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == result.manifest.counts.model_calls
    for chat in chats:
        a = chat.attributes
        assert parent[chat.context.span_id].name.startswith("invoke_agent ") and chat.name == "chat default"
        assert (a["gen_ai.provider.name"], a["gen_ai.request.model"]) == ("scripted", "default")
        assert (a["gen_ai.request.temperature"], a["gen_ai.request.max_tokens"]) == (0.7, 256)
        assert (
            a["gen_ai.response.finish_reasons"] in (("stop",), ("length",))
            and a["gen_ai.output.type"] == "json"
        )
        assert chat.events == ()  # no content unless asked for
    usage = [sum(c.attributes[f"gen_ai.usage.{k}_tokens"] for c in chats) for k in ("input", "output")]
    assert usage == [result.manifest.counts.input_tokens, result.manifest.counts.output_tokens]

    values = json.dumps([dict(s.attributes) for s in spans])
    assert SECRET not in values and first_prompt(result.run_dir) not in values


def test_content_capture_adds_each_prompt_and_reply_as_a_span_event(
    run: Callable[..., RunResult], memory: InMemorySpanExporter
) -> None:
    result = run("rounds=1", *TRACED, "tracing.otel_content=true")
    chats = [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]
    sent = [json.loads(c.events[0].attributes["gen_ai.input.messages"]) for c in chats]
    got = [json.loads(c.events[0].attributes["gen_ai.output.messages"]) for c in chats]
    assert all(c.events[0].name == "gen_ai.client.inference.operation.details" for c in chats)
    prompts = lines(result.run_dir / "pros" / "prompts.jsonl")
    expected = [
        [{"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]} for m in p["messages"]]
        for p in prompts
    ]
    assert all(e in sent for e in expected)
    replies = [r["text"] for r in lines(result.run_dir / "pros" / "replies.jsonl")]
    assert all(any(o[0]["parts"][0]["content"] == text for o in got) for text in replies)
    assert SECRET not in json.dumps([dict(e.attributes) for c in chats for e in c.events])


def test_a_resumed_run_continues_the_same_trace(
    run: Callable[..., RunResult], memory: InMemorySpanExporter
) -> None:
    first = run("rounds=1", *TRACED)
    resume_run(first.run_dir, overrides=["rounds=2"])
    roots = [s for s in memory.get_finished_spans() if s.parent is None]
    assert [r.attributes["drift_harness.resumed"] for r in roots] == [False, True]
    assert roots[0].context.trace_id == roots[1].context.trace_id
    other = run("rounds=1", "run_name=other", *TRACED)
    assert [s for s in memory.get_finished_spans() if s.parent is None][-1].context.trace_id != roots[
        0
    ].context.trace_id
    assert other.manifest.status == "completed"


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP endpoint: keeps every body, answers ``status``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.bodies: list[bytes] = []
        self.status = 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def spans(self) -> list[Any]:
        out = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            out += [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        return out


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        assert self.path == "/v1/traces"
        if self.server.status == 200:
            self.server.bodies.append(body)
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.network_loopback
def test_spans_reach_an_otlp_collector_without_secrets_and_a_refusing_one_costs_one_line(
    run: Callable[..., RunResult], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with serving(Collector()) as server:
        collector: Collector = server  # type: ignore[assignment]
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        otel_provider.shutdown()
        try:
            result = run("rounds=1", "run_name=sent", *TRACED)
            otel_provider.shutdown()  # whatever the run's end did not wait for
            spans = collector.spans()
            names = [s.name for s in spans]
            assert names.count("invoke_workflow drift") == 1 and names.count("chat default") == 6
            conversation = {
                a.value.string_value for s in spans for a in s.attributes if a.key == "gen_ai.conversation.id"
            }
            assert conversation == {"sent"}
            sent = b"".join(collector.bodies)
            assert SECRET.encode() not in sent and first_prompt(result.run_dir).encode() not in sent
            assert "warning" not in capsys.readouterr().err

            collector.status = 400  # refuses every batch, at once
            refused = run("rounds=1", "run_name=refused", *TRACED)
            otel_provider.shutdown()
        finally:
            otel_provider.shutdown()
    assert refused.manifest.status == "completed"
    (warning,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("warning: tracing.otel")]
    assert f"{len(spans)} spans dropped" in warning and "400" in warning, warning


def test_a_failed_call_is_an_error_span_named_by_its_type_alone(
    run: Callable[..., RunResult], memory: InMemorySpanExporter
) -> None:
    from opentelemetry.trace import StatusCode

    run("rounds=1", *TRACED, "model.error_rate=0.3", "retry.initial_s=0", "retry.jitter_s=0")
    chats = [s for s in memory.get_finished_spans() if s.name.startswith("chat ")]
    failed = [c for c in chats if c.status.status_code is StatusCode.ERROR]
    assert failed and len(failed) < len(chats)  # the scripted faults are seeded: some calls fail, then retry
    for span in failed:  # an exception's message may quote what must not leave: only its type is kept
        assert span.status.description == span.attributes["error.type"] and span.events == ()


def test_the_exporter_gives_up_within_the_runs_wait_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A collector refusing connections was retried for ~7 s of the exporter's default 10 s,
    and the SDK's flush waits out an export in flight: each run's end waited that long."""
    for name in otel_provider.TIMEOUT_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    try:
        otel_provider.configure()
        assert otel_provider._provider["delivery"].inner._client._timeout == otel_provider.FLUSH_S
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")  # the user's own timeout stands
        otel_provider.shutdown()
        otel_provider.configure()
        assert otel_provider._provider["delivery"].inner._client._timeout == 7
    finally:
        otel_provider.shutdown()

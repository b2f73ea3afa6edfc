"""OpenTelemetry traces of a run in the GenAI semantic conventions (opt-in).

With ``tracing.otel=true`` a run sends its trace through the OpenTelemetry
SDK's OTLP/HTTP exporter to ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the standard
``OTEL_EXPORTER_OTLP_*`` variables apply: headers, timeout, compression):

- ``invoke_workflow <format>``: the run (one per start or resume), with
  ``gen_ai.conversation.id`` = the run folder's name;
- one span per graph node (``persona``, ``thinking``, ``publish``...), from a
  LangChain callback the graph's own config picks up (``register_configure_hook``);
- ``invoke_agent <seat>.<agent>``: one structured call of an agent
  (``AgentContext.ask``: its repairs included), with the usage it cost;
- ``chat <model>``: one model call (each retry is its own), with the
  request's model, temperature, max tokens and seed, the reply's usage and
  finish reason.

Prompts and replies are left out unless ``tracing.otel_content=true`` adds
them as a ``gen_ai.client.inference.operation.details`` event on each chat
span. No API key or model kwarg other than the server's host and port is
ever read here. The trace id is derived from the run (its folder name and
first start), so a resumed run continues the same trace: each segment is a
root span of it. Spans leave on the SDK's batch thread, off the model-call
path (``harness.runtime.otel_provider``); the run waits at most ``FLUSH_S``
for them at its end, and spans the collector did not take are counted and
reported in one warning line.

The SDK is imported only when a run asks for tracing (``pip install
'drift-harness[otel]'``); without it, the run goes on untraced after one warning.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

from harness.models.base import ChatModel, Completion, ModelRequest
from harness.runtime.otel_provider import FLUSH_S, SCHEMA_URL, configure, report, trace_id_var
from harness.schema import Config
from harness.store.records import RunManifest

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

# LangChain provider names -> gen_ai.provider.name (the others pass as they are)
PROVIDERS = {
    "azure_openai": "azure.ai.openai",
    "google_vertexai": "gcp.vertex_ai",
    "google_genai": "gcp.gen_ai",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "mistralai": "mistral_ai",
    "xai": "x_ai",
    "ibm": "ibm.watsonx.ai",
    "local": "llama_cpp",
}
IN_PROCESS = ("local", "scripted", "human")  # chat spans of these are INTERNAL, not CLIENT


@dataclass
class RunTrace:
    """What the spans of one run share."""

    tracer: Tracer
    conversation_id: str
    content: bool  # tracing.otel_content: prompts and replies ride along as events


_run: ContextVar[RunTrace | None] = ContextVar("drift_harness_otel_run", default=None)


def provider_name(spec: str) -> str:
    provider = spec.split(":", 1)[0]
    return PROVIDERS.get(provider, provider)


def trace_id_of(manifest: RunManifest) -> int:
    """The run's trace id: the same for every segment of it (start and resumes)."""
    seed = f"{manifest.run_id}|{manifest.started_at.isoformat()}".encode()
    return int.from_bytes(hashlib.blake2b(seed, digest_size=16).digest(), "big") or 1


# --- the run, its nodes, its agents, its calls ----------------------------------------------


@contextmanager
def traced_run(cfg: Config, manifest: RunManifest, resumed: str | None) -> Iterator[None]:
    """Trace the run inside the block if ``tracing.otel`` is on (see the module doc)."""
    tracing = cfg.tracing
    if not tracing.otel:
        yield
        return
    try:
        provider = configure()
    except ImportError as exc:
        print(
            f"warning: tracing.otel: {exc.name} is not installed (pip install 'drift-harness[otel]'); "
            "the run is not traced",
            file=sys.stderr,
        )
        yield
        return
    tracer = provider.get_tracer("harness.runtime.otel", schema_url=SCHEMA_URL)
    run = RunTrace(tracer, manifest.run_id, tracing.otel_content)
    attributes = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": cfg.format.name,
        "gen_ai.conversation.id": manifest.run_id,
        "drift_harness.format": cfg.format.name,
        "drift_harness.experiment": cfg.experiment_name,
        "drift_harness.seed": cfg.seed,
        "drift_harness.segment": len(manifest.history),
        "drift_harness.resumed": resumed is not None,
    }
    tokens = (_run.set(run), trace_id_var.set(trace_id_of(manifest)), _nodes.set(NodeSpans(run)))
    try:
        with opened(tracer, f"invoke_workflow {cfg.format.name}", attributes):
            trace_id_var.reset(tokens[1])  # only the root takes the run's id: children inherit it
            yield
    finally:
        _nodes.reset(tokens[2])
        _run.reset(tokens[0])
        provider.force_flush(int(FLUSH_S * 1000))
        report()


@contextmanager
def opened(tracer: Tracer, name: str, attributes: dict[str, Any], client: bool = False) -> Iterator[Span]:
    """A span made current for the block. An error is recorded by its type
    alone: an exception's message may quote what must not leave (a URL with a key)."""
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    with tracer.start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except BaseException as exc:
            failed(span, exc)
            raise


class NodeSpans(BaseCallbackHandler):
    """A span per graph node: the graph's direct children in LangChain's callbacks."""

    run_inline = True  # in the node's own thread, so its span is current where the node runs

    def __init__(self, run: RunTrace) -> None:
        self.run = run
        self.graphs: set[UUID] = set()
        self.open: dict[UUID, tuple[Span, object]] = {}

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        if parent_run_id is None:
            self.graphs.add(run_id)
            return
        if parent_run_id not in self.graphs:
            return
        from opentelemetry import context, trace

        meta = kw.get("metadata") or {}
        node = str(meta.get("langgraph_node") or kw.get("name") or "node")
        span = self.run.tracer.start_span(
            node,
            attributes={
                "gen_ai.conversation.id": self.run.conversation_id,
                "langgraph.node": node,
                "langgraph.step": int(meta.get("langgraph_step") or 0),
            },
        )
        self.open[run_id] = (span, context.attach(trace.set_span_in_context(span)))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        self.close(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        self.close(run_id, error)

    def close(self, run_id: UUID, error: BaseException | None) -> None:
        self.graphs.discard(run_id)
        if (opened := self.open.pop(run_id, None)) is None:
            return
        from opentelemetry import context

        span, token = opened
        if error is not None:
            failed(span, error)
        span.end()
        context.detach(token)  # type: ignore[arg-type]


_nodes: ContextVar[NodeSpans | None] = ContextVar("drift_harness_otel_nodes", default=None)
register_configure_hook(_nodes, inheritable=True)  # every graph streamed while a run is traced gets it


def failed(span: Span, error: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", type(error).__name__)
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))


R = TypeVar("R")


def traced_agent(ask: Callable[..., R]) -> Callable[..., R]:
    """``AgentContext.ask`` in an ``invoke_agent`` span when the run is traced."""

    @functools.wraps(ask)
    def wrapper(self: Any, role: str, agent: str, *args: Any, **kw: Any) -> R:
        run = _run.get()
        if run is None:
            return ask(self, role, agent, *args, **kw)
        bound, team = self.roles[role], kw.get("team")
        name = f"{team}.{agent}" if team else agent
        with opened(
            run.tracer,
            f"invoke_agent {name}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": name,
                "gen_ai.provider.name": provider_name(bound.spec),
                "gen_ai.request.model": bound.spec.split(":", 1)[-1],
                "gen_ai.conversation.id": run.conversation_id,
                "gen_ai.output.type": "json",
                "gen_ai.request.temperature": bound.temperature,
                "gen_ai.request.max_tokens": bound.max_tokens,
                **where(
                    role=role, agent=agent, seat=team, round=kw.get("round_"), iteration=kw.get("iteration")
                ),
            },
        ) as span:
            result = ask(self, role, agent, *args, **kw)
            usage = getattr(result, "usage", None)
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            span.set_attribute("drift_harness.valid", bool(getattr(result, "ok", True)))
            return result

    return wrapper


def traced_call(model: ChatModel, request: ModelRequest) -> Completion:
    """``model.complete(request)``, in a ``chat`` span when the run is traced."""
    run = _run.get()
    if run is None:
        return model.complete(request)
    provider, _, name = model.spec.partition(":")
    remote = provider not in IN_PROCESS
    with opened(run.tracer, f"chat {name}", chat_request(model, request, run), client=remote) as span:
        completion = model.complete(request)
        reason = getattr(completion, "finish_reason", None) or (
            "length" if completion.output_tokens >= request.max_tokens else "stop"
        )
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": completion.input_tokens,
                "gen_ai.usage.output_tokens": completion.output_tokens,
                "gen_ai.response.finish_reasons": [reason],
            }
        )
        for key, value in (
            ("gen_ai.usage.reasoning.output_tokens", completion.reasoning_tokens),
            ("gen_ai.usage.cache_read.input_tokens", completion.cache_read_tokens),
            ("gen_ai.usage.cache_creation.input_tokens", completion.cache_write_tokens),
        ):
            if value:
                span.set_attribute(key, value)
        if run.content:
            span.add_event(
                "gen_ai.client.inference.operation.details",
                {
                    "gen_ai.input.messages": json.dumps(
                        [
                            {"role": m["role"], "parts": [{"type": "text", "content": m["content"]}]}
                            for m in request.messages
                        ]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [
                            {
                                "role": "assistant",
                                "parts": [{"type": "text", "content": completion.text}],
                                "finish_reason": reason,
                            }
                        ]
                    ),
                },
            )
        return completion


def chat_request(model: ChatModel, request: ModelRequest, run: RunTrace) -> dict[str, Any]:
    """A chat span's attributes known before the call."""
    tags = request.tags
    out: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider_name(model.spec),
        "gen_ai.request.model": model.spec.split(":", 1)[-1],
        "gen_ai.conversation.id": run.conversation_id,
        "gen_ai.output.type": "json" if request.schema is not None else "text",
        "gen_ai.request.temperature": request.temperature,
        "gen_ai.request.max_tokens": request.max_tokens,
        "gen_ai.request.seed": request.seed,
        **where(
            agent=tags.get("role"),
            seat=tags.get("team"),
            round=tags.get("round"),
            iteration=tags.get("iteration"),
            attempt=tags.get("attempt"),
        ),
    }
    base_url = (getattr(model, "kwargs", None) or {}).get("base_url")
    if (
        isinstance(base_url, str) and (url := urlsplit(base_url)).hostname
    ):  # the host alone: no path, no query
        out["server.address"] = url.hostname
        out["server.port"] = url.port or (443 if url.scheme == "https" else 80)
    return out


def where(**parts: Any) -> dict[str, Any]:
    """The harness's own attributes (``drift_harness.*``), the unset ones left out."""
    return {f"drift_harness.{k}": v for k, v in parts.items() if v is not None}

"""The process's OpenTelemetry tracer provider, for ``harness.runtime.otel``.

One provider per process, made when a run first asks for tracing: the SDK's
OTLP/HTTP exporter behind a batch processor (spans leave on its thread, off
the model-call path), wrapped in ``Delivery``, which counts the spans the
collector did not take and names them in one warning line. Kept apart from
OpenTelemetry's global provider, so nothing else in the process is traced
through it. Tests pass the SDK's in-memory exporter to ``configure``.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

# The GenAI conventions followed: semantic-conventions v1.41.0, the last
# release that carried them (they moved to semantic-conventions-genai after).
SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
# The most a run's end waits for its spans to leave. The exporter's own timeout is
# set to it too: the SDK's flush waits out an export in flight, and the exporter
# retried a collector that refused connections for ~7 s of its default 10 s.
FLUSH_S = 2.0
TIMEOUT_ENV = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")  # the user's, if set
# Set while a run's root span starts: the run's own trace id (see RunIds).
trace_id_var: ContextVar[int | None] = ContextVar("drift_harness_otel_trace_id", default=None)


class Delivery:
    """The exporter, counting what it delivered and what it dropped (and why)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.sent, self.dropped, self.why = inner, 0, 0, ""
        self.reported = 0  # drops already named in a warning line
        self.lock = threading.Lock()

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter that raises drops the batch; the run goes on
            result, self.why = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        with self.lock:
            if result is SpanExportResult.SUCCESS:
                self.sent += len(spans)
            else:
                self.dropped += len(spans)
                self.why = self.why or "the collector refused them or could not be reached"
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))

    def report(self) -> None:
        """One warning line for the drops not named yet."""
        with self.lock:
            new, self.reported = self.dropped - self.reported, self.dropped
        if new:
            where = getattr(self.inner, "_endpoint", "the collector")
            print(
                f"warning: tracing.otel: {new} span{'s' if new > 1 else ''} dropped, not delivered to "
                f"{where} ({self.why}); the run itself is unaffected",
                file=sys.stderr,
            )


_provider: dict[str, Any] = {}  # "provider", "delivery": one per process, made on first use


def configure(exporter: Any = None) -> TracerProvider:
    """The process's tracer provider, made on first use: OTLP/HTTP through a
    batch processor, or ``exporter`` exported synchronously (tests: the SDK's
    in-memory exporter). Kept apart from OpenTelemetry's global provider."""
    if "provider" in _provider and exporter is None:
        return cast("TracerProvider", _provider["provider"])
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import RandomIdGenerator, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    class RunIds(RandomIdGenerator):
        def generate_trace_id(self) -> int:  # a root span takes its run's trace id
            return trace_id_var.get() or super().generate_trace_id()

    shutdown()
    resource = Resource.create(
        {"service.name": "drift-harness", "gen_ai.semconv.version": SEMCONV_VERSION}, schema_url=SCHEMA_URL
    )
    provider = TracerProvider(resource=resource, id_generator=RunIds(), shutdown_on_exit=False)
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        quiet_exporter_logs()
        timeout = None if any(os.environ.get(k) for k in TIMEOUT_ENV) else FLUSH_S
        delivery = Delivery(OTLPSpanExporter(timeout=timeout))
        provider.add_span_processor(BatchSpanProcessor(delivery))  # type: ignore[arg-type]
    else:
        delivery = Delivery(exporter)
        provider.add_span_processor(SimpleSpanProcessor(delivery))  # type: ignore[arg-type]
    _provider.update(provider=provider, delivery=delivery)
    return provider


class LastReason(logging.Handler):
    """Keeps the exporter's last error as the reason ``Delivery.report`` gives."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR and (delivery := _provider.get("delivery")) is not None:
            delivery.why = record.getMessage()


def quiet_exporter_logs() -> None:
    """The exporter logs every failed batch and retry; ``Delivery.report`` says
    it in one line instead."""
    for name in ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk._shared_internal"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, LastReason) for h in logger.handlers):
            logger.addHandler(LastReason())
        logger.propagate = False


@atexit.register
def shutdown() -> None:
    """Send what is left, stop the provider and name any drops (at exit, or before a new provider)."""
    provider, delivery = _provider.pop("provider", None), _provider.pop("delivery", None)
    if provider is not None:
        provider.shutdown()
        delivery.report()


def report() -> None:
    """Name the drops not named yet, in one warning line (nothing if none)."""
    if (delivery := _provider.get("delivery")) is not None:
        delivery.report()

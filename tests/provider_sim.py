"""A simulated hosted model provider on loopback, for tests and benchmarks.

``ProviderSim(rpm=..., tpm=..., window_s=...)`` listens on a free
127.0.0.1 port and answers, over real HTTP, the way a hosted API does:

- ``POST /v1/chat/completions`` in OpenAI's wire format, with
  ``response_format`` ``json_schema``, ``json_object`` (a ``schema`` beside
  it is used, as llama-cpp-python's server does; without one the reply is
  ``{"reply": "..."}``) or none, ``usage`` in every reply and the six
  ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` headers on every
  reply, errors included;
- ``POST /v1/messages`` in Anthropic's Messages format (``system``,
  ``output_format`` of type ``json_schema``), with ``usage`` and the
  ``anthropic-ratelimit-*`` headers.

The words come from the project's ``ScriptedModel``: the body is rebuilt
into a ``ModelRequest`` (messages, schema, temperature, max_tokens, seed; no
tags, the wire carries none), so a transcript depends only on what was sent.
A reply longer than ``max_tokens`` is cut there (``finish_reason``
``length``), as a provider cuts it. Tokens are the scripted model's: prompt
tokens are the words of the messages' contents, completion tokens the words
of the reply.

Limits are per API key (``Authorization: Bearer`` or ``x-api-key``), over a
sliding window of ``window_s`` (60 s at a provider; a test uses ~1 s). A
request costs 1 against the RPM limit and, against the TPM limit, its
prompt tokens plus its ``max_tokens`` (or ``default_max_tokens``), charged
when it is admitted and never refunded: OpenAI's estimate, not what is
billed afterwards. A request over a limit gets ``429`` with ``Retry-After``
(whole seconds, rounded up) and ``retry-after-ms`` (exact), is not charged
and costs nothing. A request whose own cost exceeds the TPM limit can never
pass; it gets 429 with the whole window as its wait.

Admitted requests then draw, from ``random.Random(seed)`` in arrival order
(so sequential clients see the same faults every run), an injected 5xx
(``error_rate``, statuses from ``error_statuses``, answered after the base
latency, not billed) or a slow reply (``slow_rate``: ``slow_s`` on top of
``latency_s``, billed). Every 200 is billed even if the client has hung up
by then (a timeout), as a provider bills it; such replies are counted in
``Billing.unseen`` so a test can tell.

``billing(key)`` and ``totals()`` say what was billed and refused;
``calls`` lists each request's outcome; ``settle()`` waits for requests
still being served. Stdlib only.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from fault_proxy import _client_gone  # the fault proxy's EOF check, shared

from harness.models.base import ModelRequest
from harness.models.scripted import ScriptedModel

CHAT_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
# json_object without a schema: still one JSON object, as the mode promises
_ANY_OBJECT = {"type": "object", "properties": {"reply": {"type": "string"}}}
_KEPT_CALLS = 100_000  # a long benchmark keeps the newest calls only


@dataclass
class Billing:
    """What one API key sent, was billed and was refused."""

    requests: int = 0  # every POST that reached a model path
    billed_requests: int = 0  # answered 200
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rate_limited: int = 0  # answered 429
    faults: int = 0  # injected 5xx
    slow: int = 0  # replies held ``slow_s`` longer
    unseen: int = 0  # billed replies whose client had hung up

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Billing) -> Billing:
        return Billing(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass(frozen=True)
class Call:
    """One request's outcome: ``ok``, ``slow``, ``rpm``/``tpm`` (a 429), ``fault`` (a 5xx)."""

    n: int
    key: str
    path: str
    status: int
    outcome: str
    response_format: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unseen: bool = False  # billed, but the client had hung up (timed out) before the reply


@dataclass(frozen=True)
class Parsed:
    """A request body read into the scripted model's terms."""

    request: ModelRequest
    model: str
    response_format: str | None


@dataclass(frozen=True)
class Limit:
    """One limit's state after a decision, for the headers."""

    limit: int
    remaining: int
    reset_s: float


@dataclass(frozen=True)
class Decision:
    status: int
    outcome: str
    requests: Limit
    tokens: Limit
    wait_s: float = 0.0  # a 429's Retry-After
    status_detail: str = ""


class Window:
    """A sliding-window log of (admitted at, cost) for one limit of one key."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit, self.window_s = limit, window_s
        self.entries: deque[tuple[float, int]] = deque()
        self.used = 0

    def _expire(self, now: float) -> None:
        while self.entries and self.entries[0][0] <= now - self.window_s:
            self.used -= self.entries.popleft()[1]

    def wait_for(self, cost: int, now: float) -> float:
        """Seconds until ``cost`` fits (0: it fits now)."""
        self._expire(now)
        if self.used + cost <= self.limit:
            return 0.0
        if cost > self.limit:
            return self.window_s  # never fits; say so with the longest honest wait
        excess = self.used + cost - self.limit
        for admitted, spent in self.entries:
            excess -= spent
            if excess <= 0:
                return max(admitted + self.window_s - now, 0.001)
        return self.window_s  # unreachable: the entries sum to ``used``

    def take(self, cost: int, now: float) -> None:
        self.entries.append((now, cost))
        self.used += cost

    def state(self, now: float) -> Limit:
        """Remaining now, and when the window is whole again (the newest entry expires)."""
        self._expire(now)
        reset = self.entries[-1][0] + self.window_s - now if self.entries else 0.0
        return Limit(self.limit, max(self.limit - self.used, 0), max(reset, 0.0))


def words(messages: Sequence[dict[str, str]]) -> int:
    """Prompt tokens as the scripted model counts them."""
    return sum(len(m["content"].split()) for m in messages)


def _text(content: Any) -> str:
    """A message's content as plain text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def parse_chat(body: dict[str, Any], default_max_tokens: int) -> Parsed:
    """An OpenAI chat-completions body."""
    messages = [{"role": str(m["role"]), "content": _text(m.get("content"))} for m in body["messages"]]
    fmt = body.get("response_format") or {}
    kind, schema, name = fmt.get("type"), None, "output"
    if kind == "json_schema":
        spec = fmt.get("json_schema") or {}
        schema, name = spec.get("schema") or _ANY_OBJECT, spec.get("name", "output")
    elif kind == "json_object":
        schema = fmt.get("schema") or _ANY_OBJECT
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens") or default_max_tokens
    request = ModelRequest(
        messages=messages,
        schema=schema,
        schema_name=name,
        temperature=float(body.get("temperature", 1.0)),
        max_tokens=int(max_tokens),
        seed=int(body.get("seed") or 0),
    )
    return Parsed(
        request, str(body.get("model", "")), kind if kind in ("json_schema", "json_object") else None
    )


def parse_messages(body: dict[str, Any], default_max_tokens: int) -> Parsed:
    """An Anthropic Messages body: ``system`` becomes the first message."""
    system = _text(body.get("system"))
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": str(m["role"]), "content": _text(m.get("content"))} for m in body["messages"]]
    fmt = body.get("output_format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    request = ModelRequest(
        messages=messages,
        schema=schema,
        temperature=float(body.get("temperature", 1.0)),
        max_tokens=int(body.get("max_tokens") or default_max_tokens),
        seed=int((body.get("metadata") or {}).get("seed") or 0),
    )
    return Parsed(request, str(body.get("model", "")), "json_schema" if schema else None)


def _duration(seconds: float) -> str:
    """OpenAI's reset format: ``1m2s``, ``12.5s``, ``850ms``."""
    if seconds < 1:
        return f"{max(round(seconds * 1000), 0)}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.3g}s"


def openai_headers(d: Decision) -> dict[str, str]:
    out = {}
    for name, lim in (("requests", d.requests), ("tokens", d.tokens)):
        out[f"x-ratelimit-limit-{name}"] = str(lim.limit)
        out[f"x-ratelimit-remaining-{name}"] = str(lim.remaining)
        out[f"x-ratelimit-reset-{name}"] = _duration(lim.reset_s)
    return out


def anthropic_headers(d: Decision) -> dict[str, str]:
    now = datetime.now(UTC)
    out = {}
    for name, lim in (("requests", d.requests), ("tokens", d.tokens)):
        out[f"anthropic-ratelimit-{name}-limit"] = str(lim.limit)
        out[f"anthropic-ratelimit-{name}-remaining"] = str(lim.remaining)
        out[f"anthropic-ratelimit-{name}-reset"] = (now + timedelta(seconds=lim.reset_s)).isoformat()
    return out


def openai_reply(n: int, parsed: Parsed, text: str, usage: tuple[int, int], cut: bool) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-sim-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": parsed.model,
        "system_fingerprint": "provider-sim",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "length" if cut else "stop",
            }
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def anthropic_reply(n: int, parsed: Parsed, text: str, usage: tuple[int, int], cut: bool) -> dict[str, Any]:
    return {
        "id": f"msg_sim_{n}",
        "type": "message",
        "role": "assistant",
        "model": parsed.model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "max_tokens" if cut else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def openai_error(status: int, message: str, code: str | None) -> dict[str, Any]:
    kind = {429: "rate_limit_error", 400: "invalid_request_error", 404: "invalid_request_error"}
    return {
        "error": {"message": message, "type": kind.get(status, "server_error"), "param": None, "code": code}
    }


def anthropic_error(status: int, message: str, code: str | None) -> dict[str, Any]:
    kind = {
        429: "rate_limit_error",
        400: "invalid_request_error",
        404: "not_found_error",
        529: "overloaded_error",
    }
    return {"type": "error", "error": {"type": kind.get(status, "api_error"), "message": message}}


@dataclass(frozen=True)
class Dialect:
    parse: Callable[[dict[str, Any], int], Parsed]
    reply: Callable[[int, Parsed, str, tuple[int, int], bool], dict[str, Any]]
    error: Callable[[int, str, str | None], dict[str, Any]]
    headers: Callable[[Decision], dict[str, str]]


DIALECTS = {
    CHAT_PATH: Dialect(parse_chat, openai_reply, openai_error, openai_headers),
    MESSAGES_PATH: Dialect(parse_messages, anthropic_reply, anthropic_error, anthropic_headers),
}


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # 64+ clients connecting at once must not hit a full backlog
    daemon_threads = True


class ProviderSim:
    """The simulator; a context manager that serves on a thread and stops cleanly."""

    def __init__(
        self,
        *,
        rpm: int = 10_000,
        tpm: int = 2_000_000,
        window_s: float = 60.0,
        latency_s: float = 0.0,
        error_rate: float = 0.0,
        error_statuses: Sequence[int] = (500, 503),
        slow_rate: float = 0.0,
        slow_s: float = 2.0,
        seed: int = 0,
        default_max_tokens: int = 256,
        model: ScriptedModel | None = None,
        port: int = 0,  # 0: a free one; a given one lets a test bring a dead provider back
    ) -> None:
        self.port = port
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self.latency_s, self.slow_s = latency_s, slow_s
        self.error_rate, self.slow_rate = error_rate, slow_rate
        self.error_statuses = tuple(error_statuses)
        self.default_max_tokens = default_max_tokens
        self.model = model or ScriptedModel("scripted:provider-sim")
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._in_flight = 0
        self._model_lock = threading.Lock()  # ScriptedModel keeps a retry counter: not thread-safe
        self._windows: dict[str, tuple[Window, Window]] = {}
        self._billing: dict[str, Billing] = {}
        self._calls: deque[Call] = deque(maxlen=_KEPT_CALLS)
        self._n = 0
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- what the test reads ------------------------------------------------

    def billing(self, key: str) -> Billing:
        """What ``key`` was billed and refused (a copy; zeros for a key never seen)."""
        with self._lock:
            return Billing() + self._billing.get(key, Billing())

    def totals(self) -> Billing:
        with self._lock:
            return sum(self._billing.values(), Billing())

    @property
    def keys(self) -> list[str]:
        with self._lock:
            return sorted(self._billing)

    @property
    def calls(self) -> list[Call]:
        """Each request's outcome in arrival order (the newest 100,000)."""
        with self._lock:
            return list(self._calls)

    def settle(self, timeout_s: float = 10.0) -> bool:
        """Wait until no request is being served (a held reply whose client timed
        out is still billed after the client moved on); False on timeout."""
        with self._settled:
            return self._settled.wait_for(lambda: self._in_flight == 0, timeout_s)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, what an OpenAI client takes as ``base_url``."""
        if self._server is None:
            raise RuntimeError("the simulator is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> ProviderSim:
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self.port), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="provider-sim", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # cuts latency sleeps short
        if self._server is not None:
            self._server.shutdown()
            with self._lock:  # idle keep-alive connections would hold their threads
                conns = list(self._conns)
            for conn in conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> ProviderSim:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- used by the handler ------------------------------------------------

    def track(self, conn: socket.socket, open_: bool) -> None:
        with self._lock:
            (self._conns.add if open_ else self._conns.discard)(conn)

    def admit(self, key: str, cost: int) -> Decision:
        """Count the request; refuse it over a limit, else charge it and draw its fault."""
        now = time.monotonic()
        with self._lock:
            bill = self._billing.setdefault(key, Billing())
            bill.requests += 1
            if key not in self._windows:
                self._windows[key] = (Window(self.rpm, self.window_s), Window(self.tpm, self.window_s))
            reqs, toks = self._windows[key]
            wait_r, wait_t = reqs.wait_for(1, now), toks.wait_for(cost, now)
            if wait_r or wait_t:
                bill.rate_limited += 1
                outcome = "rpm" if wait_r >= wait_t else "tpm"
                detail = f"Rate limit reached for {'requests' if outcome == 'rpm' else 'tokens'} "
                detail += f"(limit {self.rpm} RPM, {self.tpm} TPM; this request: {cost} tokens)"
                return Decision(429, outcome, reqs.state(now), toks.state(now), max(wait_r, wait_t), detail)
            reqs.take(1, now)
            toks.take(cost, now)
            # one draw of each per admitted request, so the fault pattern is the same
            # whatever the rates: a higher rate faults a superset of the requests
            u_error, u_slow, pick = self._rng.random(), self._rng.random(), self._rng.random()
            status, outcome = 200, "ok"
            if u_error < self.error_rate:
                status, outcome = self.error_statuses[int(pick * len(self.error_statuses))], "fault"
                bill.faults += 1
            elif u_slow < self.slow_rate:
                outcome = "slow"
                bill.slow += 1
            return Decision(status, outcome, reqs.state(now), toks.state(now))

    def serving(self, delta: int) -> None:
        with self._settled:
            self._in_flight += delta
            self._settled.notify_all()

    def hold(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def answer(self, request: ModelRequest) -> tuple[str, int, int, bool]:
        """The scripted reply, cut at ``max_tokens``: (text, prompt, completion, cut)."""
        with self._model_lock:
            completion = self.model.complete(request)
        text, out = completion.text, completion.output_tokens
        cut = out > request.max_tokens
        if cut:
            text, out = " ".join(text.split()[: request.max_tokens]), request.max_tokens
        return text, completion.input_tokens, out, cut

    def record(self, call: Call, *, billed: bool = False, unseen: bool = False) -> int:
        """Log one outcome (billing a 200); returns its number."""
        with self._lock:
            n = self._n
            self._n += 1
            self._calls.append(replace(call, n=n, unseen=unseen))
            if billed:
                bill = self._billing[call.key]
                bill.billed_requests += 1
                bill.prompt_tokens += call.prompt_tokens
                bill.completion_tokens += call.completion_tokens
                bill.unseen += unseen
            return n


def _handler_for(sim: ProviderSim) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # keep-alive, as the SDKs' pooled clients expect; every reply has a Content-Length
        protocol_version = "HTTP/1.1"
        timeout = 60  # an idle keep-alive connection's thread ends after this
        # headers and body go out in two writes: with Nagle on, the body waits for
        # the client's delayed ACK of the headers, ~40 ms a call no provider adds
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            sim.track(self.connection, True)

        def finish(self) -> None:
            sim.track(self.connection, False)
            with contextlib.suppress(OSError):
                super().finish()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0].rstrip("/")
            dialect = DIALECTS.get(path)
            if dialect is None:
                return self._json(404, openai_error(404, f"no route {path}", "unknown_url"))
            try:
                parsed = dialect.parse(json.loads(raw), sim.default_max_tokens)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                return self._json(400, dialect.error(400, f"bad request body: {exc}", None))
            sim.serving(1)
            try:
                self._serve(path, dialect, parsed)
            finally:
                sim.serving(-1)

        def _key(self) -> str:
            auth = self.headers.get("Authorization") or ""
            if auth.lower().startswith("bearer "):
                return auth[7:].strip()
            return self.headers.get("x-api-key") or ""

        def _serve(self, path: str, dialect: Dialect, parsed: Parsed) -> None:
            key, request = self._key(), parsed.request
            prompt = words(request.messages)
            decision = sim.admit(key, prompt + request.max_tokens)
            headers = dialect.headers(decision)
            call = Call(0, key, path, decision.status, decision.outcome, parsed.response_format)
            if decision.status == 429:
                sim.record(call)
                headers["retry-after"] = str(math.ceil(decision.wait_s))
                headers["retry-after-ms"] = str(math.ceil(decision.wait_s * 1000))
                return self._json(
                    429, dialect.error(429, decision.status_detail, "rate_limit_exceeded"), headers
                )
            sim.hold(sim.latency_s + (sim.slow_s if decision.outcome == "slow" else 0.0))
            if decision.status != 200:
                sim.record(call)
                return self._json(
                    decision.status, dialect.error(decision.status, "injected fault", None), headers
                )
            text, prompt_tokens, completion_tokens, cut = sim.answer(request)
            call = replace(call, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
            n = sim.record(call, billed=True, unseen=_client_gone(self.connection))
            body = dialect.reply(n, parsed, text, (prompt_tokens, completion_tokens), cut)
            self._json(200, body, headers)

        def _json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            with contextlib.suppress(OSError):  # the client may have left (a timeout)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: pytest's output is for failures

    return Handler


__all__ = ["Billing", "Call", "ProviderSim", "Window"]

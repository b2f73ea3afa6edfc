"""A fault-injecting reverse proxy for an OpenAI-compatible server (issue 14).

``FaultProxy(upstream, schedule)`` listens on a free loopback port and
forwards every request to ``upstream`` (a base URL such as
``http://127.0.0.1:8000/v1``). The chat completion POSTs are numbered from 0
in arrival order; request ``n`` gets ``schedule[n]`` (past the end: ``ok``):

- ``ok``: forwarded untouched;
- ``429``: a rate-limit error with a ``Retry-After`` header, not forwarded;
- ``500`` / ``503``: a server error, not forwarded;
- ``delay``: held for ``delay_s`` (longer than the client's timeout), then
  forwarded, unless the client has hung up by then;
- ``truncate``: a real 200 reply cut mid-body, with a ``Content-Length``
  that matches the cut body (valid HTTP, broken JSON): the last chat reply
  forwarded, replayed (a slow model is spared a generation), or if there is
  none yet this request's own;
- ``drop``: the connection is closed without a reply.

Every injected fault (anything but ``ok``) is recorded in ``faults``; what
went wrong without being injected (the upstream failing, a client leaving
before its forwarded reply, e.g. on a timeout shorter than the model's
latency) is recorded in ``incidents``, so a test can tell the two apart.
Stdlib only, so the test exercises the real client stack and nothing else.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Literal, get_args
from urllib.parse import urlsplit

FaultKind = Literal["ok", "429", "500", "503", "delay", "truncate", "drop"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
CHAT_PATH = "/chat/completions"
# hop-by-hop headers and the ones the proxy sets itself
_SKIP_REQUEST = {"host", "connection", "keep-alive", "content-length", "accept-encoding", "transfer-encoding"}
_SKIP_REPLY = {"connection", "keep-alive", "content-length", "transfer-encoding", "server", "date"}


@dataclass(frozen=True)
class Fault:
    """One injected fault: the chat request's number (its schedule index) and what it got."""

    request: int
    kind: str


@dataclass(frozen=True)
class Reply:
    """An upstream reply, read whole."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class FaultProxy:
    """The proxy; a context manager that serves on a thread and stops cleanly."""

    def __init__(
        self,
        upstream: str,
        schedule: Sequence[str] = (),
        *,
        delay_s: float = 8.0,
        retry_after_s: int = 1,
        upstream_timeout_s: float = 300.0,
    ) -> None:
        unknown = sorted(set(schedule) - set(FAULT_KINDS))
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; known: {FAULT_KINDS}")
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"expected an http:// upstream, got {upstream!r}")
        self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.schedule = list(schedule)
        self.delay_s, self.retry_after_s, self.upstream_timeout_s = delay_s, retry_after_s, upstream_timeout_s
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._incidents: list[str] = []
        self._requests = 0
        self._last_reply: Reply | None = None
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what the test reads ------------------------------------------------

    @property
    def faults(self) -> list[Fault]:
        """The faults injected so far, in request order (a copy)."""
        with self._lock:
            return list(self._faults)

    @property
    def requests(self) -> int:
        """How many chat completion requests have arrived."""
        with self._lock:
            return self._requests

    @property
    def incidents(self) -> list[str]:
        """What went wrong that was not injected (a copy)."""
        with self._lock:
            return list(self._incidents)

    @property
    def base_url(self) -> str:
        """The proxy's URL with the upstream's path, a drop-in for the upstream base URL."""
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> FaultProxy:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fault-proxy", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes held (delayed) requests so closing does not wait them out
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()  # joins the handler threads
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- used by the handler ------------------------------------------------

    def next_kind(self) -> tuple[int, str]:
        """Number this chat request, look up its fault and record it if it is one."""
        with self._lock:
            n = self._requests
            self._requests += 1
            kind = self.schedule[n] if n < len(self.schedule) else "ok"
            if kind != "ok":
                self._faults.append(Fault(n, kind))
            return n, kind

    def note_incident(self, message: str) -> None:
        with self._lock:
            self._incidents.append(message)

    def keep_reply(self, reply: Reply) -> None:
        with self._lock:
            self._last_reply = reply

    def last_reply(self) -> Reply | None:
        with self._lock:
            return self._last_reply

    def hold(self) -> None:
        """Sleep ``delay_s``, cut short when the proxy stops."""
        self._stopping.wait(self.delay_s)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()


def _error_body(status: int) -> bytes:
    # shaped like OpenAI's errors, so the SDK raises its typed exception
    kind = "rate_limit_error" if status == 429 else "server_error"
    return json.dumps({"error": {"message": f"injected {status}", "type": kind, "code": None}}).encode()


def _client_gone(sock: socket.socket) -> bool:
    """True if the client closed its side: readable with nothing to read (EOF)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so a drop never hits a pooled,
        # reused connection and every fault is seen by exactly one request
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            self._pass_through(b"")

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.rstrip("/").endswith(CHAT_PATH):
                return self._pass_through(body)
            _, kind = proxy.next_kind()
            if kind in ("429", "500", "503"):
                return self._error(int(kind))
            if kind == "drop":
                return self._drop()
            if kind == "delay":
                proxy.hold()
                # the client timed out and left: forwarding now would only make
                # the upstream busy when the client's retry arrives
                if proxy.stopping or _client_gone(self.connection):
                    return self._drop()
            if kind == "truncate":
                whole = proxy.last_reply() or self._forward(body)
                return self._send(
                    whole and Reply(whole.status, whole.headers, whole.body[: len(whole.body) // 2])
                )
            started = time.monotonic()
            reply = self._forward(body)
            if reply is not None and reply.status == 200:
                proxy.keep_reply(reply)
            self._send(reply, started)

        def _pass_through(self, body: bytes) -> None:
            self._send(self._forward(body))

        def _forward(self, body: bytes) -> Reply | None:
            conn = http.client.HTTPConnection(
                proxy.upstream_host, proxy.upstream_port, timeout=proxy.upstream_timeout_s
            )
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _SKIP_REQUEST}
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _SKIP_REPLY]
                return Reply(answer.status, kept, data)
            except (OSError, http.client.HTTPException) as exc:
                proxy.note_incident(
                    f"upstream failed on {self.command} {self.path}: {type(exc).__name__}: {exc}"
                )
                return None
            finally:
                conn.close()

        def _send(self, reply: Reply | None, started: float | None = None) -> None:
            if reply is None:
                return self._error(502)
            if started is not None and _client_gone(self.connection):
                took = time.monotonic() - started
                proxy.note_incident(f"client left before its reply; the upstream took {took:.1f} s")
                return self._drop()
            self.send_response(reply.status)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)

        def _error(self, status: int) -> None:
            body = _error_body(status)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if status == 429:
                self.send_header("Retry-After", str(proxy.retry_after_s))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _drop(self) -> None:
            # no status line, no headers: the client sees the connection close
            self.close_connection = True
            with contextlib.suppress(OSError):  # the client may be gone already
                self.connection.shutdown(socket.SHUT_RDWR)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: pytest's output is for failures

    return Handler


__all__ = ["FAULT_KINDS", "Fault", "FaultKind", "FaultProxy"]

"""Search clients with one interface: ``search(query, k)``, ``summarize(topic)``, ``close()``.

``SearchSession`` talks to the MCP server (``harness.search.server``) through
langchain-mcp-adapters and keeps ONE server process and ONE MCP session open
for the whole run: spawning a server per call (``MultiServerMCPClient.get_tools``)
costs a Python start and an index load each time. The session is async and
the harness is not, so it lives in a private asyncio loop on a daemon thread
(``harness.search.process``, which also finds, watches and kills the server);
one long-lived task holds ``client.session(...)`` open until ``close()``, and
each call is submitted with ``run_coroutine_threadsafe`` and waited on for at
most ``timeout_s``.

Faults: a server that crashed, hangs past ``timeout_s``, or answers with a
reply that does not parse raises ``SearchFault`` (a 503 ``ProviderError``, so
``harness.models.retry.classify`` calls it transient). The session is then
torn down (the server is SIGKILLed first, so no wait beyond a few seconds)
and the next call starts a new server; ``restarts`` counts those. A server
found dead before a call is sent (killed between calls) is the same: that call
raises ``SearchFault`` at once, without waiting, and the next call restarts.
There is no retry loop here: callers wrap calls in ``call_with_retry``.
A bad collection is not a fault: it raises ``CollectionError`` (fatal), and
the session stays open.

``LocalSearch`` is the same interface in-process (``search.transport=local``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import sys
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from harness.models.base import ProviderError
from harness.search.collections import CollectionError, load_collection
from harness.search.process import GRACE_S, LoopThread, alive, find_child, server_env, server_spec, sigkill
from harness.slots import waiting
from harness.store.records import Hit

T = TypeVar("T")

SERVER_NAME = "drift-search"
_ERROR_MARK = "search.collection:"


class SearchFault(ProviderError):
    """The search server crashed, hung, or sent a reply that does not parse.
    Transient (status 503): the next call runs on a restarted server."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status_code=503)


class Searcher(Protocol):
    """What the engine needs from a search backend."""

    restarts: int

    def search(self, query: str, k: int = 5) -> list[Hit]: ...

    def summarize(self, topic: str = "") -> str: ...

    def close(self) -> None: ...


@dataclass
class _Server:
    """One server process and the task that holds its MCP session open."""

    tag: str  # passed on its command line, to find its pid
    task: asyncio.Task[None] | None = None
    stop: asyncio.Event | None = None
    tools: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None


# -- the session ---------------------------------------------------------------------------------


class SearchSession:
    """One MCP server subprocess and session per run, restarted after a fault.

    ``timeout_s`` bounds each call; ``start_timeout_s`` bounds a server's
    start (Python start-up, imports, the MCP handshake), which a short call
    timeout should not have to cover. Thread-safe: calls are serialised.
    """

    def __init__(
        self,
        collection: str,
        *,
        timeout_s: float = 30.0,
        cache_dir: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout_s: float = 60.0,
    ) -> None:
        self.collection = server_spec(collection)
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self.env = dict(env or {})
        self.restarts = 0
        self._loop: LoopThread | None = None
        self._server: _Server | None = None
        self._faulted = False  # the next start is a restart
        self._closed = False
        self._lock = threading.RLock()

    def __enter__(self) -> SearchSession:
        return self.open()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def server_pid(self) -> int | None:
        """The running server's pid (None before the first call, after a fault, off Linux)."""
        server = self._server
        return server.pid if server is not None else None

    def open(self) -> SearchSession:
        """Start the server and the session now, rather than on the first call."""
        with self._lock:
            self._closed = False
            _OPEN.add(self)
            self._start()
        return self

    def search(self, query: str, k: int = 5) -> list[Hit]:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        return self._call("search", {"query": query, "k": k}, _parse_hits)

    def summarize(self, topic: str = "") -> str:
        return self._call("summarize", {"topic": topic}, _parse_summary)

    def close(self) -> None:
        """Stop the server and the loop thread; safe to call twice."""
        with self._lock:
            self._closed = True
            _OPEN.discard(self)
            server, self._server = self._server, None
            if server is not None:
                self._teardown(server, kill=False)
            if self._loop is not None:
                self._loop.stop()
                self._loop = None

    # -- starting and stopping servers --

    def _start(self) -> None:
        if self._server is not None:
            return
        if self._loop is None:
            self._loop = LoopThread()
        server = _Server(tag=uuid.uuid4().hex)
        started = self._loop.submit(self._hold_start(server))
        try:
            started.result(timeout=self.start_timeout_s)
        except BaseException as exc:
            started.cancel()
            self._faulted = True
            self._teardown(server, kill=True)
            if not isinstance(exc, Exception):
                raise
            raise SearchFault(
                f"search server for {self.collection!r} did not start: {_describe(exc)}"
            ) from exc
        server.pid = find_child(server.tag)
        self._server = server
        if self._faulted:
            self.restarts += 1
            self._faulted = False

    async def _hold_start(self, server: _Server) -> None:
        """Start the task that holds the session; return once its tools are loaded."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        server.stop = asyncio.Event()
        server.task = asyncio.create_task(self._hold(server, ready))
        await ready

    async def _hold(self, server: _Server, ready: asyncio.Future[None]) -> None:
        """Hold ``client.session(...)`` open until ``server.stop`` is set. The
        session's task group must be entered and left by this one task."""
        from langchain_mcp_adapters.client import MultiServerMCPClient
        from langchain_mcp_adapters.tools import load_mcp_tools

        client = MultiServerMCPClient({SERVER_NAME: self._connection(server.tag)})  # type: ignore[dict-item]
        try:
            async with client.session(SERVER_NAME) as session:
                tools = await load_mcp_tools(session, handle_tool_errors=False)
                server.tools = {tool.name: tool for tool in tools}
                if not ready.done():
                    ready.set_result(None)
                assert server.stop is not None
                await server.stop.wait()
        except Exception as exc:  # the session is gone; calls see it through task.done()
            if not ready.done():
                ready.set_exception(exc)
        finally:
            if not ready.done():
                ready.set_exception(ConnectionError("search server session ended during start"))

    def _connection(self, tag: str) -> dict[str, Any]:
        args = ["-m", "harness.search", "serve", "--collection", self.collection, "--tag", tag]
        if self.cache_dir is not None:
            args += ["--cache-dir", str(self.cache_dir)]
        return {"command": sys.executable, "args": args, "transport": "stdio", "env": server_env(self.env)}

    def _teardown(self, server: _Server, *, kill: bool) -> None:
        """End one server: SIGKILL first when it may hang, then leave the session;
        never waits much more than GRACE_S."""
        pid = server.pid or find_child(server.tag)
        if kill and pid is not None:
            sigkill(pid)
        task, stop, loop = server.task, server.stop, self._loop
        if task is not None and stop is not None and loop is not None:

            async def leave() -> None:
                stop.set()
                try:
                    await asyncio.wait_for(asyncio.shield(task), GRACE_S)
                except TimeoutError:
                    task.cancel()
                    await asyncio.wait({task}, timeout=1.0)

            with contextlib.suppress(Exception):  # best effort; the kill below still happens
                loop.submit(leave()).result(GRACE_S + 2)
        if pid is not None and alive(pid):
            sigkill(pid)

    def _fault(self, server: _Server, message: str, *, kill: bool = True) -> SearchFault:
        self._server = None
        self._faulted = True
        self._teardown(server, kill=kill)
        return SearchFault(message)

    # -- calls --

    def _call(self, tool: str, args: dict[str, Any], parse: Callable[[str], T]) -> T:
        from langchain_core.tools import ToolException

        with self._lock:
            if self._closed:
                raise RuntimeError("the search session is closed")
            _OPEN.add(self)
            self._start()
            server, loop = self._server, self._loop
            assert server is not None and loop is not None
            if server.pid is not None and not alive(server.pid):
                raise self._fault(server, f"search server (pid {server.pid}) has exited", kill=False)
            pending = loop.submit(_invoke(server, tool, args))
            try:
                content = pending.result(timeout=self.timeout_s)
            except TimeoutError:
                pending.cancel()
                raise self._fault(
                    server, f"search server gave no {tool} reply within {self.timeout_s:g} s"
                ) from None
            except ToolException as exc:
                message = " ".join(str(exc).split())
                if _ERROR_MARK in message:
                    raise CollectionError(message[message.index(_ERROR_MARK) + len(_ERROR_MARK) :]) from None
                raise self._fault(server, f"search server failed the {tool} call: {message}") from exc
            except Exception as exc:
                raise self._fault(server, f"search server connection failed: {_describe(exc)}") from exc
            try:
                return parse(_text_of(content))
            except ValueError as exc:  # JSONDecodeError and pydantic's ValidationError are ValueErrors
                raise self._fault(
                    server, f"search server sent a malformed {tool} reply: {_describe(exc)}"
                ) from exc


async def _invoke(server: _Server, tool: str, args: dict[str, Any]) -> Any:
    """Call one tool; fail at once if the session's task ends (the server died)."""
    assert server.task is not None
    call = asyncio.ensure_future(server.tools[tool].ainvoke(args))
    try:
        done, _ = await asyncio.wait({call, server.task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not call.done():
            call.cancel()
    if call not in done:
        raise ConnectionError("the search server's session ended")
    return call.result()


def _text_of(content: Any) -> str:
    """The one text block of a tool reply (the adapters give a string or content blocks)."""
    if isinstance(content, str):
        return content
    texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    if len(texts) != 1 or not isinstance(texts[0], str):
        raise ValueError(f"expected one text block, got {len(texts)}")
    return texts[0]


def _parse_hits(text: str) -> list[Hit]:
    rows = json.loads(text)
    if not isinstance(rows, list):
        raise ValueError(f"expected a JSON array, got {type(rows).__name__}")
    return [Hit.model_validate(row) for row in rows]


def _parse_summary(text: str) -> str:
    if not text.strip():
        raise ValueError("empty summary")
    return text


def _describe(exc: BaseException) -> str:
    """One line for an exception, looking inside exception groups (anyio raises them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_OPEN: weakref.WeakSet[SearchSession] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """No server outlives the interpreter, even if a caller forgot ``close()``."""
    for session in list(_OPEN):
        session.close()


# -- in-process ----------------------------------------------------------------------------------


class LocalSearch:
    """The same interface without a server: for ``search.transport=local``,
    fast tests, and sweeps too big for a process per run."""

    def __init__(self, collection: str, *, cache_dir: Path | str | None = None) -> None:
        self.collection = load_collection(collection, cache_dir)
        self.restarts = 0

    def __enter__(self) -> LocalSearch:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return self.collection.search(query, k)

    def summarize(self, topic: str = "") -> str:
        return self.collection.summarize(topic or None)

    def close(self) -> None:
        pass


def open_search(
    collection: str,
    *,
    transport: str = "mcp",
    timeout_s: float = 30.0,
    cache_dir: Path | str | None = None,
) -> SearchSession | LocalSearch:
    """The backend ``search.transport`` names (``"mcp"`` or ``"local"``), opened:
    the MCP server is started here, so a broken install shows before the first turn."""
    if transport == "local":
        return LocalSearch(collection, cache_dir=cache_dir)
    if transport == "mcp":
        with waiting():  # seconds of a server's start: the cell's run slot is lent out
            return SearchSession(collection, timeout_s=timeout_s, cache_dir=cache_dir).open()
    raise ValueError(f"search.transport: must be one of mcp, local, got {transport!r}")

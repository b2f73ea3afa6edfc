"""The search MCP server: two tools, ``search`` and ``summarize``, over stdio.

Run it with ``python -m harness.search serve --collection kjv``; any MCP
client can use it. ``search`` returns one text block holding a JSON array of
``{id, text, source, score}`` (best first; ``[]`` when nothing matches), so the
reply parses the same whether it holds zero hits or fifty. ``summarize``
returns plain text. A bad collection is a tool error whose text contains
``search.collection: ...``.

Fault injection, for tests only. Counting is per server process: its n-th
tool call (search and summarize together, from 1) is the one that fails.

* ``DRIFT_SEARCH_FAULT=kind@n[,kind@n...]``: fires in every server process
  started with it, at call n exactly.
* ``DRIFT_SEARCH_FAULT_FILE=<path>``: the file is read at each call; a
  ``kind@n`` in it fires once, at the first call numbered n or more, and the
  server empties the file before acting. A test can therefore switch a fault
  on between calls and know that the restarted server is healthy.

Kinds: ``crash`` (the process exits at once, status 70, no reply),
``hang`` (the call sleeps forever, blocking the server), ``malformed`` (the
reply is not what the tool promises: text that is not JSON for ``search``, an
empty text for ``summarize``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.search.collections import load_collection

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

FAULT_ENV = "DRIFT_SEARCH_FAULT"
FAULT_FILE_ENV = "DRIFT_SEARCH_FAULT_FILE"
FAULT_KINDS = ("crash", "hang", "malformed")
CRASH_STATUS = 70
_SPEC = re.compile(r"^(crash|hang|malformed)(?:@(\d+))?$")


def parse_faults(text: str) -> list[tuple[str, int]]:
    """``"crash@3, malformed"`` -> ``[("crash", 3), ("malformed", 1)]``."""
    faults = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = _SPEC.match(part)
        if match is None:
            raise ValueError(f"{FAULT_ENV}: bad fault {part!r} (expected kind@n, kind one of {FAULT_KINDS})")
        faults.append((match.group(1), int(match.group(2) or 1)))
    return faults


@dataclass
class FaultPlan:
    """Which tool call of this process fails, and how."""

    fixed: list[tuple[str, int]] = field(default_factory=list)
    file: Path | None = None
    calls: int = 0

    @classmethod
    def from_env(cls) -> FaultPlan:
        file = os.environ.get(FAULT_FILE_ENV)
        return cls(fixed=parse_faults(os.environ.get(FAULT_ENV, "")), file=Path(file) if file else None)

    def next_call(self) -> str | None:
        """Count a call; crash or hang here, or return "malformed" or None."""
        self.calls += 1
        kind = next((k for k, n in self.fixed if n == self.calls), None) or self._from_file()
        if kind == "crash":
            sys.stderr.flush()
            os._exit(CRASH_STATUS)
        if kind == "hang":
            while True:
                time.sleep(3600)
        return kind

    def _from_file(self) -> str | None:
        if self.file is None:
            return None
        try:
            faults = parse_faults(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        kind = next((k for k, n in faults if self.calls >= n), None)
        if kind is not None:
            self.file.write_text("", encoding="utf-8")  # one shot: the restarted server is healthy
        return kind


def build_server(default_collection: str, cache_dir: Path | str | None = None) -> FastMCP:
    """A FastMCP server whose tools search ``default_collection`` unless told another."""
    from mcp.server.fastmcp import FastMCP

    faults = FaultPlan.from_env()
    server = FastMCP(
        "drift-search",
        instructions=f"BM25 search over offline passage collections (default: {default_collection}).",
        log_level="WARNING",
    )

    @server.tool(structured_output=False)
    def search(query: str, collection: str = default_collection, k: int = 5) -> str:
        """Search a passage collection (BM25). Returns a JSON array of
        {"id", "text", "source", "score"} objects, best first."""
        if faults.next_call() == "malformed":
            return "this reply is not JSON (injected fault)"
        hits = load_collection(collection, cache_dir).search(query, k)
        return json.dumps([hit.model_dump() for hit in hits], ensure_ascii=False)

    @server.tool(structured_output=False)
    def summarize(topic: str = "", collection: str = default_collection) -> str:
        """An overview of a passage collection: its size and sources, and with a
        topic, the passages that best match it."""
        if faults.next_call() == "malformed":
            return ""
        return load_collection(collection, cache_dir).summarize(topic or None)

    return server


def warm_up(collection: str, cache_dir: Path | str | None) -> threading.Thread:
    """Load the default collection and its index in the background, so the MCP
    handshake is not held up and the first call finds them ready (a tool call
    meanwhile waits on the collection cache's lock). Errors are left for that
    call to raise: a server with a bad collection still starts and says why."""

    def load() -> None:
        with contextlib.suppress(Exception):  # reported by the first tool call that needs it
            _ = load_collection(collection, cache_dir).index

    thread = threading.Thread(target=load, name="drift-search-warm-up", daemon=True)
    thread.start()
    return thread


def serve(collection: str, cache_dir: Path | str | None = None) -> None:
    """Serve over stdio until the client closes stdin."""
    server = build_server(collection, cache_dir)
    warm_up(collection, cache_dir)
    server.run("stdio")

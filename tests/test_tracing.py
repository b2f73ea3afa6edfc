"""LangSmith tracing, checked against a collector: a 1-round scripted debate
run with ``LANGSMITH_TRACING=true`` and ``LANGSMITH_ENDPOINT`` pointed at an
HTTP server this test starts on 127.0.0.1 sends a run for the graph (named
``<format>:<run folder>`` as the README says) and one for each node; the
LangSmith key travels only in its header, and neither it nor a model key is
ever in what is sent or in the run folder."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REPO, serving

LANGSMITH_KEY = "lsv2_pt_dummy_collector_key_4242"
MODEL_KEY = "sk-model-key-that-must-never-travel-777"


class Collector(ThreadingHTTPServer):
    """What LangSmith's client sent: (method, path, headers, body) per request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def _reply(self, body: bytes = b"{}") -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _record(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = self.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            data = gzip.decompress(data)
        elif encoding == "zstd":
            import zstandard

            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 26)
        self.server.requests.append((self.command, self.path, dict(self.headers), data))

    def do_GET(self) -> None:  # /info: an instance with no special ingest settings
        self.server.requests.append(("GET", self.path, dict(self.headers), b""))
        self._reply(json.dumps({"version": "0.0.0", "batch_ingest_config": {}}).encode())

    def do_POST(self) -> None:
        self._record()
        self._reply()

    do_PATCH = do_POST

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    with serving(Collector()) as server:
        yield server  # type: ignore[misc]


def runs_sent(collector: Collector) -> list[dict]:
    """Every run created, from the multipart (or batch JSON) bodies the client posted."""
    runs = []
    for method, path, headers, body in collector.requests:
        if method != "POST" or not path.startswith("/runs"):
            continue
        kind = headers.get("Content-Type", "")
        if kind.startswith("multipart/"):
            message = BytesParser().parsebytes(f"Content-Type: {kind}\r\n\r\n".encode() + body)
            for part in message.get_payload():  # type: ignore[union-attr]
                name = part.get_param("name", header="content-disposition") or ""
                if name.startswith("post.") and name.count(".") == 1:
                    runs.append(json.loads(part.get_payload(decode=True)))
        else:
            runs += json.loads(body).get("post", [])
    return runs


@pytest.mark.network_loopback
def test_a_traced_debate_reaches_the_collector_without_any_key_in_it(collector, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env |= {
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": collector.url,
        "LANGSMITH_API_KEY": LANGSMITH_KEY,
        "LANGSMITH_PROJECT": "drift-harness-test",
        "OPENAI_API_KEY": MODEL_KEY,
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.run",
            "model=scripted",
            "rounds=1",
            f"runs_root={tmp_path}",
            "progress=false",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    run_dir = Path(done.stdout.strip().splitlines()[-1])

    runs = runs_sent(collector)
    (graph,) = [r for r in runs if r["name"] == f"drift:{run_dir.name}"]
    assert graph["run_type"] == "chain" and {"drift-harness", "drift"} <= set(graph.get("tags") or [])
    nodes = [r for r in runs if r.get("parent_run_id") == graph["id"]]
    named = [r["name"] for r in nodes]
    for node in ("persona", "thinking", "critique"):
        assert named.count(node) == 2, (node, named)  # once per team in the one round
    assert all(r["trace_id"] == graph["trace_id"] for r in nodes)

    sent = b"".join(body for *_, body in collector.requests)
    assert LANGSMITH_KEY.encode() not in sent and MODEL_KEY.encode() not in sent
    headers = [h for _, _, h, _ in collector.requests if h.get("x-api-key") or h.get("X-Api-Key")]
    assert headers and all(LANGSMITH_KEY in (h.get("x-api-key") or h.get("X-Api-Key") or "") for h in headers)
    on_disk = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    assert LANGSMITH_KEY.encode() not in on_disk and MODEL_KEY.encode() not in on_disk

"""The live viewer: the standard library's HTTP server on 127.0.0.1, GET
only, read-only. Every route goes through the catalog (a URL names a run
key, never a path), and every failure, a torn file, a folder half written,
a bug, becomes a page that says so: never a server error."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from harness.view.catalog import Catalog
from harness.view.live import Sweeps, live_page, sweeps_page
from harness.view.pages import Links, compare_page, error_page, run_page, runs_page, verify_page
from harness.view.search import search_page
from harness.view.watch import STALL_S


def route(catalog: Catalog, target: str, sweeps: Sweeps | None = None) -> tuple[int, str]:
    """(status, html) for one GET of ``target`` (a path and query); a page
    that cannot be built says why, on a page of its own. ``sweeps``: the
    live pages' state, kept between requests (a fresh one if not given)."""
    try:
        return _route(catalog, target, sweeps or Sweeps(catalog.root))
    except Exception as exc:  # a folder half written, a bug: shown, and the viewer stays up
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0]
        return 200, error_page(f"This page could not be built: {detail[:300]}", Links())


def _route(catalog: Catalog, target: str, sweeps: Sweeps) -> tuple[int, str]:
    links, url = Links(), urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    page = int(query["page"]) if query.get("page", "").isdigit() else 1
    path = unquote(url.path)
    html: str | None
    if path in ("/", "/index.html"):
        return 200, runs_page(catalog, links)
    if path.startswith("/run/"):
        html = run_page(catalog, path.removeprefix("/run/"), page, links)
    elif path.startswith("/verify/"):
        html = verify_page(catalog, path.removeprefix("/verify/"), links)
    elif path == "/search":
        html = search_page(catalog, query.get("q", ""), query.get("kind", ""), links)
    elif path == "/live":
        html = sweeps_page(sweeps, links)
    elif path.startswith("/live/"):
        html = live_page(sweeps, path.removeprefix("/live/"), links)
    elif path == "/compare":
        html = compare_page(catalog, query.get("a", ""), query.get("b", ""), page, links)
    else:
        html = None
    if html is None:
        return 404, error_page(f"No run or page {path!r} under {catalog.root}.", links)
    return 200, html


def handler(catalog: Catalog, stall_s: float = STALL_S) -> type[BaseHTTPRequestHandler]:
    sweeps = Sweeps(catalog.root, stall_s)  # each live page follows its sweep's logs from where it left off

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            status, html = route(catalog, self.path, sweeps)
            body = html.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def serve(
    root: Path, port: int = 0, announce: Callable[[str], None] = print, stall_s: float = STALL_S
) -> None:
    """Serve ``root`` until interrupted; ``announce`` gets the address line; a running
    sweep cell with nothing written for ``stall_s`` seconds is marked stalled."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(Catalog(root), stall_s))
    announce(f"serving {root} at http://127.0.0.1:{server.server_port}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

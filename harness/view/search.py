"""The viewer's search box (``/search?q=...&kind=...``): the SQL store's
full-text search (``harness.store.fts``) over every run under the root, each
hit linking to its round on its run's page.

The store is ``<root>/_store.sqlite``, brought up to date (incrementally)
before each search, as ``python -m harness.store search`` does; it is the
one file the viewer writes, at the root, never inside a run folder.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from markupsafe import Markup, escape

from harness.store.fts import KINDS, Hit, SearchError, search
from harness.store.sql import StoreError, build_store
from harness.view.catalog import Catalog
from harness.view.pages import _ENV as ENV
from harness.view.pages import PAGE_ROUNDS, Links

LIMIT = 50
MARKS = ("\x02", "\x03")  # control characters no transcript holds: escaped text, then <mark>


def marked(snippet: str) -> Markup:
    """The snippet as HTML: its text escaped, its matches in ``<mark>``."""
    html = str(escape(snippet))
    return Markup(html.replace(MARKS[0], "<mark>").replace(MARKS[1], "</mark>"))


def round_pages(db: Any, hits: list[Hit]) -> dict[tuple[str, int], int]:
    """The run page (``PAGE_ROUNDS`` rounds each) that shows each hit's round."""
    out: dict[tuple[str, int], int] = {}
    con = sqlite3.connect(db)
    try:
        for run_id in {h.run_id for h in hits}:
            rows = con.execute(
                "SELECT DISTINCT round FROM records WHERE run_id = ? ORDER BY round", (run_id,)
            )
            for n, (r,) in enumerate(rows.fetchall()):
                out[(run_id, r)] = n // PAGE_ROUNDS + 1
    finally:
        con.close()
    return out


def search_page(catalog: Catalog, query: str, kind: str, links: Links) -> str:
    """The search box, and the hits of ``query`` (FTS5 syntax) if one was given."""
    hits: list[dict[str, Any]] = []
    total, problem = 0, None
    if query.strip():
        try:
            db = build_store(catalog.root).db
            found = search(db, query, kind=kind or None, limit=LIMIT, marks=MARKS, tokens=24)
            pages = round_pages(db, found.hits)
            total = found.total
            keys = catalog.runs()
            hits = [
                {"hit": h, "snippet": marked(h.snippet), "url": run_link(links, h, pages, keys)}
                for h in found.hits
            ]
        except SearchError as exc:
            problem = str(exc)
        except (StoreError, sqlite3.DatabaseError, OSError) as exc:
            problem = f"the store at {catalog.root} could not be updated: {exc}"
    return ENV.get_template("search.html").render(
        query=query, kind=kind, kinds=KINDS, hits=hits, total=total, problem=problem, links=links, limit=LIMIT
    )


def run_link(links: Links, hit: Hit, pages: dict[tuple[str, int], int], keys: dict[str, Any]) -> str:
    """The hit's round on its run's page. The store's run id is the catalog's
    key, but for a root that is itself a run (the store names it, the catalog says ".")."""
    key = hit.run_id if hit.run_id in keys else "."
    return f"{links.run(key, pages.get((hit.run_id, hit.round), 1))}#round-{hit.round}"

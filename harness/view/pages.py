"""The viewer's pages, rendered from Jinja2 templates (``templates/``): the
runs list, a run (a page of rounds at a time), its verify verdict, and two
runs side by side. The same functions serve the live viewer and the static
export; only the links differ (``Links``)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import yaml
from jinja2 import Environment, PackageLoader, select_autoescape

from harness.models.prices import format_usd
from harness.view.catalog import Catalog, RunRow
from harness.view.figures import trajectory_svg
from harness.view.history import build_rounds, persona_timeline, round_numbers, unpublished

PAGE_ROUNDS = 20  # rounds per page: a 1,000-round run renders 20 at a time

_ENV = Environment(loader=PackageLoader("harness.view"), autoescape=select_autoescape(["html"]))
_ENV.filters["usd"] = format_usd  # dollars as people read them; unknown stays "unknown"


def slug(key: str) -> str:
    """A run key as one file name of the static export."""
    return "_root" if key == "." else key.replace("/", "__")


@dataclass
class Links:
    """Where a page's links point: the live viewer's URLs, or the static export's files."""

    static: bool = False
    depth: int = 0  # static: folders between this page and the export's root

    def _up(self) -> str:
        return "../" * self.depth

    def home(self) -> str:
        return f"{self._up()}index.html" if self.static else "/"

    def run(self, key: str, page: int = 1) -> str:
        if self.static:
            return f"{self._up()}runs/{slug(key)}/page-{page}.html"
        return f"/run/{quote(key, safe='/')}" + (f"?page={page}" if page > 1 else "")

    def verify(self, key: str) -> str:
        return (
            f"{self._up()}runs/{slug(key)}/verify.html" if self.static else f"/verify/{quote(key, safe='/')}"
        )

    def compare(self, a: str, b: str, page: int = 1) -> str | None:
        if self.static:
            return None  # every pair would be quadratic; the live viewer compares
        return "/compare?" + urlencode({"a": a, "b": b, **({"page": page} if page > 1 else {})})


def runs_page(catalog: Catalog, links: Links) -> str:
    rows = catalog.rows()
    table = [row_cells(r) for r in rows]
    return _ENV.get_template("runs.html").render(
        root=str(catalog.root),
        rows=rows,
        table=table,
        links=links,
        configs=[json.dumps(r.config_flat) for r in rows],
    )


def row_cells(row: RunRow) -> dict[str, Any]:
    m = row.manifest
    if m is None:
        return {"status": "unreadable", "problem": row.problem}
    llm, critic = row.config.get("llm") or {}, row.config.get("critic") or {}
    return {
        "format": m.format,
        "models": ", ".join(f"{r}: {s}" for r, s in row.seats()),
        "temperature": llm.get("temperature"),
        "critic": critic.get("name"),
        "status": m.status,
        "rounds": m.counts.rounds_completed,
        "planned": row.config.get("rounds"),
        "approvals": m.counts.approvals,
        "loop_locks": m.counts.loop_locks,
        "schema_failures": m.counts.schema_failures,
        "tokens": m.counts.input_tokens + m.counts.output_tokens,
        "wall_s": m.wall_s,
        "cost": m.counts.cost_usd,
    }


def banner(run: Any) -> str | None:
    """What a reader must know before trusting the page: not finished, or not whole."""
    status = run.manifest.status
    lines = []
    if status == "running":
        lines.append(
            "This run is still running, or was killed without a word: it shows what its logs hold now."
        )
    elif status in ("failed", "interrupted"):
        why = f" ({run.manifest.error.type}: {run.manifest.error.message})" if run.manifest.error else ""
        lines.append(f"This run is {status}{why}; python -m harness.resume {run.path} continues it.")
    lines += run.notes[:5]
    return " ".join(lines) or None


def run_page(catalog: Catalog, key: str, page: int, links: Links) -> str | None:
    """One page of a run's rounds; None when ``key`` names no run under the root."""
    run = catalog.read(key)
    if run is None:
        return None
    numbers = round_numbers(run)
    pages = max(1, math.ceil(len(numbers) / PAGE_ROUNDS))
    page = min(max(page, 1), pages)
    wanted = set(numbers[(page - 1) * PAGE_ROUNDS : page * PAGE_ROUNDS])
    return _ENV.get_template("run.html").render(
        key=key,
        run=run,
        m=run.manifest,
        links=links,
        page=page,
        pages=pages,
        banner=banner(run),
        rounds=build_rounds(run, wanted),
        silent=unpublished(run, wanted),
        personas=persona_timeline(run) if page == 1 else {},
        figure=trajectory_svg(catalog.root, key, run.path) if page == 1 else None,
        manifest=run.manifest.model_dump_json(indent=1),
        config=yaml.safe_dump(run.config, sort_keys=False),
        others=[k for k in catalog.runs() if k != key][:50],
        family=catalog.family(key, run.manifest),
    )


def verify_page(catalog: Catalog, key: str, links: Links) -> str | None:
    from harness.formats.checks import verify

    run_dir = catalog.path(key)
    if run_dir is None:
        return None
    problems, notes = verify(run_dir)
    return _ENV.get_template("verify.html").render(key=key, links=links, problems=problems, notes=notes)


def compare_page(catalog: Catalog, a: str, b: str, page: int, links: Links) -> str | None:
    """Two runs side by side, aligned by round."""
    left, right = catalog.read(a), catalog.read(b)
    if left is None or right is None:
        return None
    numbers = sorted(set(round_numbers(left)) | set(round_numbers(right)))
    pages = max(1, math.ceil(len(numbers) / PAGE_ROUNDS))
    page = min(max(page, 1), pages)
    wanted = set(numbers[(page - 1) * PAGE_ROUNDS : page * PAGE_ROUNDS])
    pairs = list(zip(build_rounds(left, wanted), build_rounds(right, wanted), strict=True))
    return _ENV.get_template("compare.html").render(
        a=a, b=b, left=left, right=right, pairs=pairs, page=page, pages=pages, links=links
    )


def error_page(message: str, links: Links) -> str:
    return _ENV.get_template("error.html").render(message=message, links=links)

"""``--static out/``: the viewer's pages as self-contained HTML files (inline
CSS, inline SVG, no script or font from anywhere), to attach to a paper.
Every run gets all its pages and its verify verdict, every sweep its page
with its figures (``python -m harness.view <sweep> --static out/``: a sweep
shared as a folder of pages); side-by-side pages are the live viewer's
only. Nothing is written into a run folder."""

from __future__ import annotations

import math
from pathlib import Path

from harness.view.catalog import Catalog
from harness.view.history import round_numbers
from harness.view.live import Sweeps, live_page
from harness.view.pages import PAGE_ROUNDS, Links, run_page, runs_page, slug, verify_page


def export_static(root: Path, out: Path) -> list[Path]:
    """Write the pages for every run under ``root`` into ``out``; the files written."""
    catalog = Catalog(root)
    if out.resolve().is_relative_to(catalog.root) and any(
        out.resolve().is_relative_to(p.resolve()) for p in catalog.runs().values()
    ):
        raise ValueError(f"{out}: inside a run folder; the viewer never writes into one")
    out.mkdir(parents=True, exist_ok=True)
    written = [write(out / "index.html", runs_page(catalog, Links(static=True)))]
    for key in catalog.runs():
        run = catalog.read(key)
        pages = max(1, math.ceil(len(round_numbers(run)) / PAGE_ROUNDS)) if run is not None else 1
        folder = out / "runs" / slug(key)
        links = Links(static=True, depth=2)
        for page in range(1, pages + 1):
            written.append(write(folder / f"page-{page}.html", run_page(catalog, key, page, links) or ""))
        written.append(write(folder / "verify.html", verify_page(catalog, key, links) or ""))
    return written + export_sweeps(catalog.root, out)


def export_sweeps(root: Path, out: Path) -> list[Path]:
    """Each sweep under ``root`` as its live page, figures included, at
    ``sweeps/<sweep>.html`` (``sweep.html`` when ``root`` is the sweep itself)."""
    sweeps = Sweeps(root)
    written = []
    for key in sweeps.found():
        path = out / "sweep.html" if key == "." else out / "sweeps" / f"{slug(key)}.html"
        links = Links(static=True, depth=len(path.relative_to(out).parts) - 1)
        written.append(write(path, live_page(sweeps, key, links) or ""))
    return written


def write(path: Path, html: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path

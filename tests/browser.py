"""A tiny headless-Chromium driver for tests: no Playwright, no Selenium, no network.

Debian's ``chromium`` (``apt-get install -y chromium``) is run once per page,
headless, with a throwaway profile and everything that phones home turned off
(without those flags Chromium keeps retrying Google's services on a closed
network). ``--virtual-time-budget`` lets the page's scripts and timers run
before the DOM is dumped or the screenshot taken, so what a test sees is the
page *after* its JavaScript ran.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium: apt-get install -y chromium"
)

# Headless, sandbox-free (tests may run as root), and quiet: no background
# networking, component updates, sync, QUIC or first-run chatter.
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=5000",  # ms of page time for scripts and timers to settle
)


def _chromium(args: list[str], tmp: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
    tmp.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp)  # a fresh profile every call
    try:
        proc = subprocess.run(
            [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc


def dump_dom(url: str, tmp: Path, timeout: float = 60) -> str:
    """The page's DOM, serialized after its scripts ran (``--dump-dom``)."""
    return _chromium(["--dump-dom", url], tmp, timeout).stdout


def screenshot(
    url: str, out: Path, tmp: Path, size: tuple[int, int] = (1280, 900), timeout: float = 60
) -> Path:
    """A PNG of the page's first ``size`` pixels, written to ``out``; returns ``out``."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    width, height = size
    _chromium(
        ["--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={out}", url], tmp, timeout
    )
    assert out.is_file() and out.stat().st_size > 0, f"chromium wrote no screenshot to {out}"
    return out


class _Text(HTMLParser):
    _HIDDEN = frozenset({"script", "style", "noscript", "template", "head"})
    # elements that break a line: a space at each edge keeps their words apart
    # (kept as rows: the formatter would put one name a line, 38 lines for one set)
    # fmt: off
    _BLOCK = frozenset({
        "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "fieldset",
        "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
        "main", "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th", "tr", "ul",
    })
    # fmt: on

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1
        elif tag in self._BLOCK:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in self._BLOCK:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def text_of(dom: str) -> str:
    """The visible text of an HTML document (no scripts, styles or head), whitespace folded."""
    parser = _Text()
    parser.feed(dom)
    parser.close()
    return re.sub(r"\s+", " ", "".join(parser.parts)).strip()

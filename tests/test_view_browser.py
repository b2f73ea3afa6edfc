"""The run viewer (``python -m harness.view``) in a real headless browser.

``tests/browser.py`` drives Debian's ``chromium`` headless: the DOM a test
reads is the one after the page's scripts ran, and screenshots are real
renders. The driver is checked first on a page served here with
``http.server``; then the viewer is started as a subprocess over a tree of
scripted runs and its pages are loaded as a user would load them.

Without chromium these tests skip (``apt-get install -y chromium``); the
viewer's tests also skip while ``harness.view`` does not import.

``python tests/test_view_browser.py`` regenerates ``docs/images/viewer.png``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from browser import dump_dom, needs_chromium, screenshot, text_of
from conftest import serving

REPO = Path(__file__).resolve().parents[1]
LOOP_LOCK = re.compile(r"loop-lock(?!s)")  # the turn marker, not the "N loop-locks" count
SERVING = re.compile(r"^serving (?P<root>.+) at (?P<url>http://127\.0\.0\.1:\d+/)\s*$")


# -- the driver on its own ----------------------------------------------------


def test_text_of_keeps_only_visible_text() -> None:
    dom = (
        "<html><head><title>t</title><style>p {color: red}</style></head><body>"
        "<h1>Runs</h1><p>one&nbsp;&amp; <b>two</b></p><script>var hidden = 1;</script>"
        "<ul><li>a</li><li>b</li></ul></body></html>"
    )
    assert text_of(dom) == "Runs one & two a b"  # &nbsp; folds like any space


@pytest.fixture
def static_site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A folder served on 127.0.0.1 by ``http.server``: (its base URL, the folder)."""
    site = tmp_path / "site"
    site.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(site))
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/", site


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


SCRIPTED_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>driver self-test</title></head>
<body style="font: 32px sans-serif">
<p id="static">written by the server</p>
<p id="out">not yet</p>
<script>
  document.getElementById("out").textContent = "written by " + ["Java", "Script"].join("");
  setTimeout(() => document.body.insertAdjacentHTML("beforeend", "<p>after a timer</p>"), 1000);
</script>
</body></html>
"""


@pytest.mark.browser
@pytest.mark.network_loopback
@needs_chromium
def test_driver_reads_the_dom_after_scripts_ran(static_site: tuple[str, Path], tmp_path: Path) -> None:
    base, site = static_site
    (site / "index.html").write_text(SCRIPTED_PAGE)

    text = text_of(dump_dom(base, tmp_path / "chromium"))

    assert "written by the server" in text
    assert "written by JavaScript" in text and "not yet" not in text
    assert "after a timer" in text  # virtual time ran the page's timers too
    assert "var" not in text and "driver self-test" not in text  # no script source, no <head>

    png = screenshot(base, tmp_path / "page.png", tmp_path / "chromium", size=(400, 300))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _png_size(png) == (400, 300)


def _png_size(png: Path) -> tuple[int, int]:
    head = png.read_bytes()[16:24]  # IHDR's width and height, big-endian
    return int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")


# -- the viewer ---------------------------------------------------------------


def _viewer_importable() -> None:
    """Skip (with the reason) while ``harness.view`` is not there or does not import."""
    try:
        import harness.view  # noqa: F401
    except Exception as exc:  # a half-written module may fail in any way
        pytest.skip(f"harness.view does not import yet: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def serve_viewer(root: Path, log: Path, timeout: float = 60) -> Iterator[str]:
    """``python -m harness.view ROOT --port 0`` as a subprocess; yields its base URL
    (read from the first stdout line) and always kills it afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONUNBUFFERED"] = "1"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.view", str(root), "--port", "0"],
            cwd=log.parent,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        try:
            yield _first_line_url(proc, log, timeout)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            assert proc.stdout is not None
            proc.stdout.close()


def _first_line_url(proc: subprocess.Popen[str], log: Path, timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            pytest.fail(f"the viewer printed nothing in {timeout}s; stderr:\n{log.read_text()[-3000:]}")
    line = proc.stdout.readline()
    match = SERVING.match(line)
    if match is None:
        proc.poll()
        pytest.fail(
            f"the viewer's first line is {line!r}, not 'serving <root> at http://127.0.0.1:<port>/' "
            f"(exit {proc.returncode}); stderr:\n{log.read_text()[-3000:]}"
        )
    return match["url"]


def run_url(base: str, key: str) -> str:
    return f"{base}run/{quote(key)}"


def first_argument(run_dir: Path) -> str:
    """The first ~40 characters of the run's first published argument, whitespace folded."""
    first = json.loads((run_dir / "shared_memory.jsonl").read_text().splitlines()[0])
    return re.sub(r"\s+", " ", first["text"]).strip()[:40].strip()


@pytest.fixture
def runs_tree(run: Callable, runs_root: Path) -> dict[str, Path]:
    """Three scripted runs under one root: plain, loop-locked every turn, and a panel."""
    _viewer_importable()
    plain = run("rounds=2", "run_name=alpha-plain")
    locked = run("rounds=2", "model.reject_first=9", "critic.max_iterations=1", "run_name=beta-locked")
    panel = run("format=panel", "rounds=2", "run_name=gamma-panel")
    assert locked.manifest.counts.loop_locks > 0  # the scripted critic never approves
    return {r.run_dir.relative_to(runs_root).as_posix(): r.run_dir for r in (plain, locked, panel)}


@pytest.mark.browser
@pytest.mark.network_loopback
@needs_chromium
def test_viewer_pages_in_a_real_browser(runs_tree: dict[str, Path], runs_root: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "chromium"
    plain, locked, _panel = runs_tree
    with serve_viewer(runs_root, tmp_path / "viewer.stderr") as base:
        index_dom = dump_dom(base, scratch)
        index = text_of(index_dom)
        assert "3 runs" in index, index[:2000]
        for key in runs_tree:
            assert key in index, f"run {key!r} missing from the list: {index[:2000]}"
            assert re.search(rf'href="[^"]*run/{re.escape(quote(key))}"', index_dom), (
                f"no link to run {key!r}"
            )

        page = text_of(dump_dom(run_url(base, plain), scratch))
        expected = first_argument(runs_tree[plain])
        assert expected and expected in page, f"{expected!r} not on the run page: {page[:2000]}"

        # every loop-locked turn is marked "loop-lock"; a clean run has no such mark
        # (only its "0 loop-locks" count, hence the lookahead)
        locked_page = text_of(dump_dom(run_url(base, locked), scratch))
        locks = json.loads((runs_tree[locked] / "manifest.json").read_text())["counts"]["loop_locks"]
        assert len(LOOP_LOCK.findall(locked_page)) >= locks == 4, locked_page[:2000]
        assert not LOOP_LOCK.findall(page), page[:2000]

        compare = text_of(dump_dom(f"{base}compare?{urlencode({'a': plain, 'b': locked})}", scratch))
        assert plain in compare and locked in compare, compare[:2000]

        for name, key in (("run", plain), ("loop-locked", locked)):
            png = screenshot(run_url(base, key), tmp_path / f"{name}.png", scratch)
            assert png.stat().st_size > 1000, f"{png} is suspiciously small"


# -- docs/images/viewer.png ---------------------------------------------------


def write_docs_image(out: Path = REPO / "docs" / "images" / "viewer.png") -> Path:
    """Screenshot a scripted 2-round debate's run page at 1280x900 into ``out``."""
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import compose_cfg
    from omegaconf import OmegaConf

    from harness.config import resolve
    from harness.engine import run_debate

    with tempfile.TemporaryDirectory(prefix="viewer-shot-") as tmp_name:
        tmp = Path(tmp_name)
        root = tmp / "runs"
        cfg = compose_cfg(["model=scripted", f"runs_root={root}", "progress=false", "rounds=2"])
        raw = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(raw, dict)
        result = run_debate(resolve(cfg), raw)
        with serve_viewer(root, tmp / "viewer.stderr") as base:
            started = time.monotonic()
            screenshot(run_url(base, result.run_dir.relative_to(root).as_posix()), out, tmp / "chromium")
            print(f"wrote {out} ({out.stat().st_size} bytes) in {time.monotonic() - started:.1f}s")
    return out


if __name__ == "__main__":
    write_docs_image()

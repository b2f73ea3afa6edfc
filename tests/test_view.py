"""The run viewer without a browser: the runs list, a run's pages (turns,
private histories, loop-lock markers, paging, banners), verify, side by
side, the trajectory figure, the static export, the CLI server, path safety
(``..``, absolute paths, symlinks), and that no run folder is written to."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from html import unescape
from pathlib import Path

import pytest

from harness.view import Catalog, export_static, route
from harness.view.pages import PAGE_ROUNDS


def text(html: str) -> str:
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


def first_text(run_dir: Path) -> str:
    return json.loads((run_dir / "shared_memory.jsonl").read_text().splitlines()[0])["text"]


def tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.fixture
def tree(run, runs_root) -> Path:  # type: ignore[no-untyped-def]
    """Three runs: a clean drift debate, one that loop-locks every turn, a panel."""
    run("rounds=2", "run_name=clean")
    run("rounds=2", "model.reject_first=9", "critic.max_iterations=1", "run_name=locked")
    run("format=panel", "rounds=2", "run_name=panel")
    return runs_root


def test_the_runs_list_shows_every_run_sortable_and_filterable(tree):
    status, html = route(Catalog(tree), "/")
    assert status == 200
    shown = text(html)
    assert "3 runs" in shown and all(k in shown for k in ("clean", "locked", "panel"))
    assert html.count('href="/run/') == 3
    configs = [json.loads(unescape(c)) for c in re.findall(r'data-config="([^"]*)"', html)]
    assert {c["format.name"] for c in configs} == {"drift", "panel"} and all(
        "llm.temperature" in c for c in configs
    )
    assert "tHead.onclick" in html and "filter.oninput" in html  # sorting and filtering, no CDN


def test_a_run_page_shows_the_transcript_and_each_turns_private_history(tree, records):
    status, html = route(Catalog(tree), "/run/locked")
    assert status == 200
    shown = text(html)
    assert first_text(tree / "locked")[:60] in shown
    assert html.count('class="badge">loop-lock<') >= 4  # every turn of both rounds was loop-locked
    critique = records(tree / "locked" / "pros" / "critique.jsonl")[0]
    assert critique.feedback[:40] in shown and "is_approved False" in shown  # the rejection and why
    assert "Persona versions" in shown and "verify" in shown
    assert 'class="badge">loop-lock<' not in route(Catalog(tree), "/run/clean")[1]


def test_a_long_run_is_paged(run, runs_root):
    run("rounds=45", "run_name=long", "memory.log_prompts=false")
    catalog = Catalog(runs_root)
    first, third = route(catalog, "/run/long")[1], route(catalog, "/run/long?page=3")[1]
    assert "page 1 of 3" in text(first) and "page 3 of 3" in text(third)
    assert "Round 1 " in text(first) and f"Round {PAGE_ROUNDS + 1} " not in text(first)
    assert f"Round {2 * PAGE_ROUNDS + 1} " in text(third) and "Round 1 " not in text(third)


def test_verify_and_side_by_side(tree):
    catalog = Catalog(tree)
    assert "OK: 0 violations" in text(route(catalog, "/verify/clean")[1])
    shown = text(route(catalog, "/compare?a=clean&b=locked")[1])
    assert first_text(tree / "clean")[:50] in shown and first_text(tree / "locked")[:50] in shown


def test_a_crashed_torn_run_shows_what_it_holds_with_a_banner(tree):
    manifest = tree / "clean" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "status": "running"}))
    with open(tree / "clean" / "shared_memory.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"r0003.pros.torn')
    status, html = route(Catalog(tree), "/run/clean")
    assert status == 200
    shown = text(html)
    assert "still running" in shown and "torn last line" in shown and first_text(tree / "clean")[:50] in shown


def test_an_unreadable_folder_is_listed_and_explained_never_an_error(tree):
    (tree / "clean" / "manifest.json").write_text("{not json")
    catalog = Catalog(tree)
    listing = text(route(catalog, "/")[1])
    assert "unreadable" in listing and "3 runs" in listing
    status, html = route(catalog, "/run/clean")
    assert status == 200 and "could not be built" in text(html)


@pytest.mark.parametrize(
    "target",
    [
        "/run/../clean",
        "/run/..%2f..%2fetc%2fpasswd",
        "/run//etc/passwd",
        "/run/%2Fetc%2Fpasswd",
        "/verify/../../x",
        "/compare?a=/etc&b=..",
        "/static/../../etc/passwd",
    ],
)
def test_urls_cannot_reach_outside_the_root(tree, target):
    status, html = route(Catalog(tree), target)
    assert status == 404 and "root:" not in html


def test_a_symlink_out_of_the_root_reaches_nothing(run, tmp_path):
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\n")
    run("rounds=1", f"runs_root={outside}", "run_name=theirs")
    run("rounds=1", f"runs_root={inside}", "run_name=ours")
    (inside / "linked").symlink_to(outside / "theirs", target_is_directory=True)  # a whole run elsewhere
    (inside / "ours" / "public" / "leak.jsonl").symlink_to(secret)  # a file elsewhere, inside a run
    catalog = Catalog(inside)
    assert "linked" not in catalog.runs()
    assert route(catalog, "/run/linked")[0] == 404
    status, html = route(catalog, "/run/ours")
    assert status == 404 and "TOP-SECRET" not in html


def test_the_trajectory_figure_appears_once_the_run_is_analysed(tree):
    from analysis import analyze

    assert "<svg" not in route(Catalog(tree), "/run/clean")[1]
    analyze(tree, embedder="hash", figures=False, progress=False)
    html = route(Catalog(tree), "/run/clean")[1]
    assert "Drift trajectory" in html and "<svg" in html


def test_the_static_export_is_self_contained_and_writes_no_run_folder(tree, tmp_path):
    before = tree_digest(tree)
    out = tmp_path / "site"
    files = export_static(tree, out)
    assert tree_digest(tree) == before  # nothing written into (or beside) the runs
    index = (out / "index.html").read_text()
    assert "3 runs" in text(index)
    for page in files:
        html = page.read_text()
        assert "http://" not in html and "https://" not in html  # no CDN, no server
        for href in re.findall(r'href="([^"#?]+)"', html):
            assert (page.parent / href).resolve().is_file(), (page, href)
    locked = (out / "runs" / "locked" / "page-1.html").read_text()
    assert 'class="badge">loop-lock<' in locked and "OK: 0 violations" in text(
        (out / "runs" / "locked" / "verify.html").read_text()
    )
    with pytest.raises(ValueError, match="inside a run folder"):
        export_static(tree, tree / "clean" / "site")


@pytest.mark.network_loopback
def test_the_cli_serves_on_loopback_and_prints_its_address(tree):
    before = tree_digest(tree)
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.view", str(tree), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        address = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert address, line
        with urllib.request.urlopen(address.group(0), timeout=10) as reply:
            assert reply.status == 200 and "3 runs" in text(reply.read().decode())
        with urllib.request.urlopen(address.group(0) + "run/locked", timeout=10) as reply:
            assert 'class="badge">loop-lock<' in reply.read().decode()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(address.group(0) + "run/%2e%2e/%2e%2e/etc/passwd", timeout=10)
        assert err.value.code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert tree_digest(tree) == before


def test_a_missing_root_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "harness.view", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.strip() == f"error: {tmp_path / 'nope'}: no such folder"

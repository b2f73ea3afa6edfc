"""The live sweep page (``/live/<sweep>``) in headless Chromium, against a
sweep this test starts: while a cell runs the page shows it running and the
cells after it pending, links the running cell to its run page (which
reloads itself too), and reloads itself; once the sweep ends the same page,
served by the same viewer (its logs followed from where it left off), shows
every cell completed and stops reloading.

The sweep is frozen (SIGSTOP) while the first page loads, so what the page
must show does not depend on how fast the machine is."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from browser import dump_dom, needs_chromium, text_of
from conftest import REPO, serving

from harness.engine.execute import RunResult
from harness.view.catalog import Catalog
from harness.view.drift import PENDING, LiveDrift, drift_figure
from harness.view.live import Follower, pictures
from harness.view.server import handler, route

CELLS = re.compile(r'data-cell="(?P<cell>[^"]+)" data-status="(?P<status>[^"]+)"')
REFRESH = 'id="live-refresh"'
STALL_S = 1.0  # the viewer's stall mark, short: the frozen sweep writes nothing


def cells_of(dom: str) -> dict[str, str]:
    return {m["cell"]: m["status"] for m in CELLS.finditer(dom)}


def running_cell(sweep: Path) -> str | None:
    """The cell the cell log last says is running, once its first round landed."""
    try:
        last = json.loads((sweep / "cells.jsonl").read_text().splitlines()[-1])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    cell = last["cell"]
    landed = (sweep / cell / "snapshots" / "round-0001.json").is_file()
    return cell if last["status"] == "running" and landed else None


@pytest.fixture
def live_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The live drift scorer "installed" as pyproject.toml declares it (``make setup``'s
    ``pip install -e``): a dist-info folder on the path; its declared target."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project["entry-points"]["drift_harness.live_signals"]
    info = tmp_path / "site" / "drift_live-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: drift-live\nVersion: 0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in declared.items())
    (info / "entry_points.txt").write_text(f"[drift_harness.live_signals]\n{lines}")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return str(declared["drift"])


def settled(scorer: LiveDrift, folder: Path, cells: list[str]) -> object:
    """The scorer's answer once its thread has scored (the first ask starts it)."""
    deadline = time.monotonic() + 120
    while (found := scorer.latest(folder, cells)) == PENDING and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


@pytest.fixture
def sweep_process(runs_root: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Three scripted cells of two rounds, each call 0.2 s: one after the other, seconds each."""
    runs_root.mkdir(parents=True)
    with (tmp_path / "sweep.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.run",
                "-m",
                "model=scripted",
                "rounds=2",
                "model.latency_s=0.2",
                "llm.temperature=0.2,0.5,1.0",
                f"runs_root={runs_root}",
                "progress=false",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield proc
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait(timeout=60)


def frozen_mid_cell(proc: subprocess.Popen[bytes], runs_root: Path) -> tuple[Path, str]:
    """Stop the sweep while a cell runs and has kept a reply; (the sweep folder, that cell)."""
    deadline = time.monotonic() + 120  # far above the seconds it takes
    while time.monotonic() < deadline and proc.poll() is None:
        for sweep in runs_root.glob("sweep-*"):
            if running_cell(sweep):
                os.killpg(proc.pid, signal.SIGSTOP)
                if (cell := running_cell(sweep)) is not None:  # still true once frozen
                    return sweep, cell
                os.killpg(proc.pid, signal.SIGCONT)
        time.sleep(0.05)
    pytest.fail(f"no cell was seen running (sweep exit {proc.poll()})")


def drawn_on(catalog: Catalog, page: str, caption: str) -> None:
    """Wait until ``page`` draws the figure captioned ``caption`` (scored off the request path)."""
    deadline = time.monotonic() + 120
    while not re.search(re.escape(caption) + r"[^<]*</(figcaption|h2)>\s*<svg", route(catalog, page)[1]):
        assert time.monotonic() < deadline, route(catalog, page)[1][-3000:]
        time.sleep(0.2)


@pytest.mark.browser
@pytest.mark.network_loopback
@needs_chromium
def test_the_live_page_shows_cells_moving_from_pending_to_completed(
    sweep_process: subprocess.Popen[bytes], runs_root: Path, tmp_path: Path, live_scorer: str
) -> None:
    scratch = tmp_path / "chromium"
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler(Catalog(runs_root), STALL_S))) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        sweep, cell = frozen_mid_cell(sweep_process, runs_root)
        live = f"{base}/live/{sweep.name}"
        drift = "Drift index by round, live (signals drawn: affect, LIWC"
        for page in (f"/live/{sweep.name}", f"/run/{sweep.name}/{cell}"):
            drawn_on(Catalog(runs_root), page, drift)  # frozen: scored once, whatever the pace
        assert sweep.name in text_of(dump_dom(f"{base}/live", scratch))
        time.sleep(STALL_S)  # frozen: nothing is written, so the running cell stalls

        dom = dump_dom(live, scratch)
        seen = cells_of(dom)
        assert len(seen) == 3 and seen[cell] == "running", seen
        assert "pending" in seen.values() and REFRESH in dom
        (elapsed,) = re.findall(r'class="elapsed">([\d.]+) \(running\)', dom)
        assert float(elapsed) >= STALL_S  # seconds since the cell started, not "0.0"
        assert 'class="stalled' in dom and "<svg" in dom  # the stall mark and a drawn figure
        assert "Model calls by round, running cells" in text_of(dom)
        assert drift in text_of(dom) and dom.count("<svg") >= 2  # the running cell's drift index, drawn
        assert f'href="/run/{sweep.name}/{cell}"' in dom  # the running cell links to its run page
        run_dom = dump_dom(f"{base}/run/{sweep.name}/{cell}", scratch)
        assert REFRESH in run_dom and "still running" in text_of(run_dom)
        assert re.search(r"running for [\d.]+ s · [1-9]\d* model calls", text_of(run_dom))  # its own timing
        assert "Model calls by round" in text_of(run_dom) and "<svg" in run_dom
        assert drift in text_of(run_dom) and run_dom.count("<svg") >= 2  # its signals per round

        os.killpg(sweep_process.pid, signal.SIGCONT)
        assert sweep_process.wait(timeout=300) == 0
        dom = dump_dom(live, scratch)
        assert set(cells_of(dom).values()) == {"completed"} and len(cells_of(dom)) == 3, cells_of(dom)
        assert REFRESH not in dom and "finished" in text_of(dom)


def test_a_follower_reads_only_what_the_logs_gained(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    cells = [{"num": n, "name": f"c{n}", "status": "pending"} for n in range(2)]
    (sweep / "sweep.json").write_text(
        json.dumps({"name": "s", "updated_at": "2026-01-01T00:00:00Z", "cells": cells})
    )
    follower = Follower(sweep)
    follower.refresh()
    assert [r["status"] for r in follower.cells()] == ["pending", "pending"]

    line = {
        "cell": "c0",
        "status": "completed",
        "started_at": "2026-01-02T00:00:00Z",
        "ended_at": "2026-01-02T00:01:00Z",
        "rounds_done": 2,
        "input_tokens": 5,
        "output_tokens": 7,
        "cost_usd": None,
    }
    limit = {"time": "2026-01-02T00:00:30Z", "key": "openai", "old": 8, "new": 4, "reason": "429"}
    with (sweep / "cells.jsonl").open("w") as fh:
        fh.write(json.dumps(line) + "\n" + '{"cell": "c1", "sta')  # the second line still being written
    (sweep / "limits.jsonl").write_text(json.dumps(limit) + "\n")
    follower.refresh()
    rows = follower.cells()
    assert [r["status"] for r in rows] == ["completed", "pending"]
    assert rows[0]["tokens"] == 12 and rows[0]["cost"] is None  # unknown dollars stay unknown
    (limiter,) = follower.limiters.values()
    assert (limiter.limit, limiter.cuts, list(limiter.recent)) == (4, 1, [limit["time"]])

    read = follower.offsets["cells.jsonl"]
    with (sweep / "cells.jsonl").open("a") as fh:
        fh.write('tus": "running", "started_at": "2026-01-02T00:02:00Z"}\n')
    follower.refresh()
    assert follower.offsets["cells.jsonl"] > read and [r["status"] for r in follower.cells()] == [
        "completed",
        "running",
    ]
    assert follower.limiters["openai"].changes == 1  # the limiter log was not read again


def test_a_running_cell_shows_its_calls_retries_last_error_and_stall(tmp_path: Path) -> None:
    """From the run folder's replies and events: calls by round, a retry in flight
    (until a reply lands), the last error, and the stall mark once nothing is
    written for ``stall_s``; a pause in ``control.jsonl`` counts only while a
    driver holds ``driver.lock``."""
    sweep = tmp_path / "sweep"
    (sweep / "c0" / "pros").mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({"name": "s", "cells": [{"num": 0, "name": "c0"}]}))
    started = {"cell": "c0", "status": "running", "started_at": "2026-01-02T00:00:00Z", "rounds": 4}
    (sweep / "cells.jsonl").write_text(json.dumps(started) + "\n")
    replies = sweep / "c0" / "pros" / "replies.jsonl"
    replies.write_text("".join(json.dumps({"round": r}) + "\n" for r in (1, 1, 2)))
    retry = {"event": "retry", "n": 2, "error": {"type": "RateLimitError", "message": "429 slow down"}}
    (sweep / "c0" / "events.jsonl").write_text(json.dumps(retry) + "\n")
    effect = {"kind": "effect", "id": "x", "words": ["pause"], "paused": ["*"]}
    (sweep / "control.jsonl").write_text(json.dumps(effect) + "\n")
    old = time.time() - 60
    for path in (replies, sweep / "c0" / "events.jsonl"):
        os.utime(path, (old, old))

    follower = Follower(sweep, stall_s=30)
    follower.refresh()
    (row,) = follower.cells()
    assert (row["calls"], row["by_round"], row["retrying"]) == (3, {1: 2, 2: 1}, 2)
    assert row["last_error"] == "RateLimitError: 429 slow down"
    assert row["stalled"] and row["still_s"] >= 59 and row["elapsed_s"] > 60
    assert follower.paused == []  # no driver holds the lock: a killed driver's pause is gone

    with replies.open("a") as fh:
        fh.write(json.dumps({"round": 2}) + "\n")
    (row,) = follower.cells()
    assert (row["calls"], row["retrying"], row["stalled"]) == (4, 0, False)  # the retried call landed

    changes = [(8, "increase"), (6.4, "429"), (5.12, "429")]
    with (sweep / "limits.jsonl").open("w") as fh:
        for n, (limit, why) in enumerate(changes):
            change = {"time": f"2026-01-02T00:00:0{n}Z", "key": "openai:m", "new": limit, "reason": why}
            fh.write(json.dumps(change) + "\n")
    follower.refresh()
    drawn = pictures(follower.cells(), follower)
    assert list(drawn) == [
        "Rate limiters: the limit over time, 429 cuts marked",
        "Model calls by round, running cells",
    ]
    assert all(svg.startswith("<svg") for svg in drawn.values())


def test_an_analysed_sweep_page_draws_each_cells_drift_index_by_round(tmp_path: Path) -> None:
    import pandas as pd

    from harness.view.figures import sweep_drift_svg

    (tmp_path / "_analysis").mkdir()
    assert sweep_drift_svg(tmp_path, ["c0"]) is None  # not analysed: no figure
    rows = [("c0", team, r, 0.1 * r) for team in ("pros", "cons") for r in (1, 2, 3)]
    frame = pd.DataFrame(rows, columns=["run_id", "team", "round", "drift_index"])
    frame.to_parquet(tmp_path / "_analysis" / "scores.parquet")
    svg = sweep_drift_svg(tmp_path, ["c0", "c1"])
    assert svg is not None and svg.startswith("<svg") and "drift index" in svg
    assert sweep_drift_svg(tmp_path, ["other"]) is None  # another sweep's cells are not drawn


def test_running_cells_drift_index_is_scored_off_the_request_path(
    run: Callable[..., RunResult], live_scorer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By the installed entry point (pyproject.toml's), on the scorer's own thread: the first
    ask answers at once; each cell is read again only when it wrote; a scorer missing or
    failing is one line."""
    import analysis.live as live
    from harness.plugins import live_signals

    assert live_scorer == "analysis.live:score_rounds" and live_signals() is live.score_rounds
    run_dir = run("rounds=3").run_dir
    folder, cell = run_dir.parent, run_dir.name
    scorer = LiveDrift()
    assert scorer.latest(folder, [cell]) == PENDING  # the page does not wait for the scoring
    found = settled(scorer, folder, [cell])
    assert isinstance(found, tuple) and found[0] == live.DRAWN and sorted(found[1][cell]) == [1, 2, 3]
    caption, svg = drift_figure(folder, [cell], scorer)
    assert svg.startswith("<svg") and "drift index" in svg and "n-gram repetition" in caption

    reads: list[Path] = []
    load_runs = live.load_runs
    monkeypatch.setattr(live, "load_runs", lambda path, **kw: (reads.append(path), load_runs(path, **kw))[1])
    assert live.score_rounds(folder, [cell]) == found and reads == []  # unchanged: nothing read
    with (run_dir / "events.jsonl").open("a") as fh:
        fh.write("\n")
    assert live.score_rounds(folder, [cell])[1] == found[1] and reads == [run_dir]  # it wrote: read again

    missing = LiveDrift(lambda: "no drift_harness.live_signals entry point installed")
    assert settled(missing, folder, [cell]) == "no drift_harness.live_signals entry point installed"

    def broken(folder: Path, cells: object) -> object:
        raise ValueError("bad rows\nand more")

    found = settled(LiveDrift(lambda: broken), folder, [cell])
    assert found == "the live drift scorer failed: ValueError: bad rows"


def test_a_pause_is_gone_from_the_page_once_a_resumed_driver_runs(tmp_path: Path) -> None:
    """A viewer open across pause, kill and ``harness.sweep resume``: the resumed
    driver runs unpaused (docs/sweeps.md), so the page no longer says paused."""
    from harness.sweep.control import ControlEntry, append_entry, driver_lock
    from harness.view.watch import Driver

    driver = Driver()
    with driver_lock(tmp_path, "InProcessLauncher"):
        append_entry(tmp_path, ControlEntry(kind="effect", id="p", words=["pause"], ok=True, paused=["*"]))
        assert driver.refresh(tmp_path) == ["*"]
    assert driver.refresh(tmp_path) == []  # killed: no driver, no pause
    with driver_lock(tmp_path, "InProcessLauncher"):  # the resume's driver, sent nothing
        assert driver.refresh(tmp_path) == []


def test_a_killed_drivers_cells_are_crashed_and_its_sweep_stopped(tmp_path: Path) -> None:
    """A sweep whose driver was killed outright (kill -9) left its running cell's line
    saying running: the page showed it running (stalled, in time) and the sweep as
    running, reloading, where ``status`` and the final table say crashed. A cell whose
    process on this machine is gone is crashed now, and with no driver the sweep is stopped."""
    from harness.view.live import summary

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    cells = [{"num": n, "name": f"c{n}", "status": "pending"} for n in range(3)]
    (sweep / "sweep.json").write_text(
        json.dumps({"name": "s", "updated_at": "2026-01-01T00:00:00Z", "cells": cells})
    )
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here = os.uname().nodename
    lines = [
        {
            "cell": "c0",
            "status": "running",
            "started_at": "2026-01-02T00:00:00Z",
            "host": here,
            "pid": gone.pid,
        },
        {
            "cell": "c1",
            "status": "running",
            "started_at": "2026-01-02T00:00:00Z",
            "host": here,
            "pid": os.getpid(),
        },
    ]
    (sweep / "cells.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    follower = Follower(sweep)
    follower.refresh()
    rows = follower.cells()
    assert [r["status"] for r in rows] == ["crashed", "running", "pending"]
    assert summary(rows, follower)["open"]  # a cell still runs

    lines[1]["pid"] = gone.pid  # its driver killed too
    (sweep / "cells.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    follower = Follower(sweep)
    follower.refresh()
    rows = follower.cells()
    total = summary(rows, follower)
    assert total["by_status"] == {"crashed": 2, "pending": 1} and not total["open"]  # no driver: stopped
    from harness.view.live import Sweeps, live_page
    from harness.view.pages import Links

    page = live_page(Sweeps(tmp_path), "sweep", Links()) or ""
    assert f"stopped: no driver runs it; continue with: <code>python -m harness.sweep resume {sweep}" in page
    assert REFRESH not in page  # nothing to reload for

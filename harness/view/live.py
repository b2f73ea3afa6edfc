"""The live sweep page (``/live/<sweep>``): a sweep folder followed while it runs.

A sweep folder (one holding ``sweep.json``) is followed by a ``Follower``
kept between requests. Each refresh reads only what the cell log
(``cells.jsonl``) and the limiter log (``limits.jsonl``) gained since the
last one, from a byte offset (a line still being written waits for the
next refresh), and ``sweep.json`` (the plan: every cell, named before any
starts) only when it was rewritten. A running cell's rounds, tokens and
dollars come from its latest round snapshot, one small file per running
cell. Nothing here imports the sweep package (it sits above the viewer):
the files are read as the JSON they are, documented in docs/sweeps.md.

The time left comes from the plan recorded in the sweep folder
(``plan.json``, written by ``python -m harness.plan … --record <sweep
folder>``: each cell's seconds and the cells in flight), else from the rate
so far (the mean wall time of the cells completed).

The page refreshes itself every ``REFRESH_S`` seconds while any cell is
pending or running: a few lines of script fetch it again and swap its body
(``templates/_live.html``; no framework, no navigation, the scroll stays).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness.models.prices import format_usd
from harness.store.snapshot import list_snapshots, read_snapshot
from harness.view.catalog import Scan, key_of
from harness.view.drift import drift_figure
from harness.view.figures import limits_svg, rounds_svg, sweep_drift_svg
from harness.view.pages import _ENV as ENV
from harness.view.pages import Links
from harness.view.watch import STALL_S, CellWatch, Driver, json_lines, process_gone, seconds_since

SWEEP_INDEX = "sweep.json"
CELL_LOG = "cells.jsonl"
LIMITS_LOG = "limits.jsonl"
PLAN_JSON = "plan.json"  # harness.plan --record: {"in_flight": n, "cells": {name: seconds}}
REFRESH_S = 2  # the page's reload period while the sweep runs
RECENT_429 = 5  # the latest 429 cuts shown per limiter
SERIES = 5000  # the limit changes kept per limiter for its picture
FIGURE_CELLS = 40  # cells drawn in one figure at most
RATE_WINDOW_S = 60.0  # calls per second: over about the last minute of refreshes
OPEN = ("pending", "running")  # a cell in either keeps the page reloading


@dataclass
class Limiter:
    """One shared rate limiter, as its changes in ``limits.jsonl`` tell it."""

    key: str
    limit: float = 0.0
    changes: int = 0
    cuts: int = 0  # cut after a 429
    holds: int = 0  # every caller held by a Retry-After
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_429))  # times of the last cuts
    series: deque[tuple[str, float, str]] = field(default_factory=lambda: deque(maxlen=SERIES))

    def add(self, change: dict[str, Any]) -> None:
        self.limit, self.changes = float(change.get("new", self.limit)), self.changes + 1
        reason = str(change.get("reason", ""))
        self.series.append((time_of(change.get("time")), self.limit, reason))
        if reason == "429":
            self.cuts += 1
            self.recent.append(str(change.get("time", "")))
        elif reason.startswith("retry-after"):
            self.holds += 1


def time_of(value: Any) -> str:
    """An ISO 8601 time as text that sorts (UTC, as every file here writes it)."""
    return str(value or "").replace("+00:00", "Z")


class Follower:
    """One sweep folder, followed between refreshes (see the module doc)."""

    def __init__(self, sweep_dir: Path, stall_s: float = STALL_S) -> None:
        self.dir, self.stall_s = sweep_dir, stall_s
        self.watches: dict[str, CellWatch] = {}  # each running cell's run folder, followed
        self.driver = Driver()
        self.paused: list[str] = []
        self.samples: deque[tuple[float, int]] = deque()  # (time, calls seen): the rate
        self.offsets: dict[str, int] = {CELL_LOG: 0, LIMITS_LOG: 0}
        self.latest: dict[str, dict[str, Any]] = {}  # each cell's last line of the cell log
        self.limiters: dict[str, Limiter] = {}
        self.index: dict[str, Any] = {}
        self.index_stamp: tuple[int, int] | None = None
        self.lock = threading.Lock()  # the viewer answers on threads

    def new_lines(self, name: str) -> list[dict[str, Any]]:
        """The complete lines ``name`` gained since the last read (a torn or unreadable one skipped)."""
        lines, self.offsets[name] = json_lines(self.dir / name, self.offsets[name])
        return lines

    def refresh(self) -> None:
        with self.lock:
            for event in self.new_lines(CELL_LOG):
                self.latest[str(event.get("cell"))] = event
            for change in self.new_lines(LIMITS_LOG):
                key = str(change.get("key"))
                self.limiters.setdefault(key, Limiter(key)).add(change)
            self.paused = self.driver.refresh(self.dir)
            try:
                st = (self.dir / SWEEP_INDEX).stat()
                if (st.st_size, st.st_mtime_ns) != self.index_stamp:
                    self.index = json.loads((self.dir / SWEEP_INDEX).read_text())
                    self.index_stamp = (st.st_size, st.st_mtime_ns)
            except (
                OSError,
                ValueError,
            ):  # mid-rewrite (written atomically, so rare): the last one read stands
                pass

    def cells(self) -> list[dict[str, Any]]:
        """Every planned cell's row now: its status, rounds, tokens and dollars."""
        with self.lock:
            planned = list(self.index.get("cells") or [])
            updated = time_of(self.index.get("updated_at"))
            return [self.row(cell, updated) for cell in planned if isinstance(cell, dict)]

    def row(self, cell: dict[str, Any], index_updated: str) -> dict[str, Any]:
        """The index's row, overridden by the cell log's last line for the cell
        when that line is newer than the index (the index folds the log in)."""
        name = str(cell.get("name"))
        row = {**cell, "name": name, "cost": cell.get("cost_usd")}
        event = self.latest.get(name)
        when = time_of(event.get("ended_at") or event.get("started_at")) if event else ""
        if event is not None and when >= index_updated:
            row["status"], row["error"] = event.get("status"), event.get("error")
            if event.get("rounds_done") is not None:
                row.update(
                    {k: event.get(k) for k in ("rounds_done", "input_tokens", "output_tokens", "wall_s")}
                )
                row["cost"] = event.get("cost_usd")
            row["rounds"] = event.get("rounds") or row.get("rounds")
        if row.get("status") == "running" and event is not None and process_gone(event):
            row["status"] = "crashed"  # as status and the final table say: killed, resumable
            row.update(progress(self.dir / name))
        if row.get("status") == "running":
            row.update(progress(self.dir / name))
            row.update(self.watch(name, event))
        row["tokens"] = (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)
        row["has_run"] = (self.dir / name / "manifest.json").is_file()
        return row

    def watch(self, name: str, event: dict[str, Any] | None) -> dict[str, Any]:
        """A running cell's elapsed seconds, calls, retries in flight, last error and stall."""
        watch = self.watches.setdefault(name, CellWatch(self.dir / name))
        watch.refresh()
        now = time.time()
        elapsed = seconds_since((event or {}).get("started_at"), now)
        still = now - watch.moved if watch.moved else elapsed
        return {
            "elapsed_s": elapsed,
            "calls": watch.calls,
            "retrying": watch.retrying,
            "last_error": watch.last_error,
            "stalled": not self.paused and still is not None and still >= self.stall_s,
            "still_s": still,
            "by_round": dict(sorted(watch.by_round.items())),
        }

    def rounds_of(self, name: str) -> dict[int, int]:
        """A cell's model calls by round, its replies read from where the last look stopped."""
        with self.lock:
            watch = self.watches.setdefault(name, CellWatch(self.dir / name))
            watch.refresh()
            return dict(sorted(watch.by_round.items()))

    def calls_per_s(self) -> float | None:
        """Model calls landed per second over about the last minute (None: too soon to say)."""
        now, calls = time.monotonic(), sum(w.calls for w in self.watches.values())
        self.samples.append((now, calls))
        while len(self.samples) > 2 and now - self.samples[1][0] > RATE_WINDOW_S:
            self.samples.popleft()
        (t0, c0) = self.samples[0]
        return (calls - c0) / (now - t0) if now - t0 >= 1.0 else None


def progress(run_dir: Path) -> dict[str, Any]:
    """A running cell's counts from its latest round snapshot (nothing if none yet)."""
    try:
        snapshots = list_snapshots(run_dir)
        counts = read_snapshot(snapshots[-1]).counts if snapshots else None
    except (OSError, ValueError):
        return {}
    if counts is None:
        return {}
    return {
        "rounds_done": counts.rounds_completed,
        "input_tokens": counts.input_tokens,
        "output_tokens": counts.output_tokens,
        "cost": counts.cost_usd,
    }


def summary(rows: list[dict[str, Any]], follower: Follower) -> dict[str, Any]:
    """Cells by status, tokens and dollars over the whole sweep, and the limiters."""
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[str(row.get("status"))] = by_status.get(str(row.get("status")), 0) + 1
    started = [r for r in rows if r.get("status") != "pending"]
    known = [r["cost"] for r in started if r.get("cost") is not None]
    return {
        "by_status": by_status,
        "tokens": sum(r["tokens"] for r in rows),
        "cost": sum(known) if len(known) == len(started) else None,  # one unknown makes the sum unknown
        # pending cells wait on a driver: with none left (killed), the sweep is stopped
        "open": any(
            r.get("status") == "running" or (r.get("status") in OPEN and follower.driver.alive) for r in rows
        ),
        "resume": f"python -m harness.sweep resume {follower.dir}",
        "limiters": list(follower.limiters.values()),
        "budget": budget_used(follower.index, rows, follower.driver.budgets),
        "time_left": time_left(follower.dir, rows),
        "calls_per_s": follower.calls_per_s() if any(r.get("status") == "running" for r in rows) else None,
        "paused": follower.paused,
        "stalled": sum(bool(r.get("stalled")) for r in rows),
    }


def time_left(sweep_dir: Path, rows: list[dict[str, Any]]) -> str | None:
    """``time left ≈ 4m10s (plan)``: the open cells' seconds over the slots; None: nothing to go by."""
    try:
        plan = json.loads((sweep_dir / PLAN_JSON).read_text())
        planned, slots = dict(plan["cells"]), int(plan["in_flight"])
    except (OSError, ValueError, KeyError, TypeError):
        planned, slots = {}, 0
    done = [float(r["wall_s"]) for r in rows if r.get("status") == "completed" and r.get("wall_s")]
    if not done:  # no cell finished yet: a running cell's pace so far, over its whole length
        done = [r["elapsed_s"] * r["rounds"] / r["rounds_done"] for r in rows if _paced(r)]
    rate = sum(done) / len(done) if done else None
    still = [r for r in rows if r.get("status") in OPEN]
    left = 0.0
    for row in still:
        seconds = planned.get(row["name"], rate)
        if seconds is None:
            return None
        share = (row.get("rounds_done") or 0) / row["rounds"] if row.get("rounds") else 0.0
        left += float(seconds) * (1 - min(1.0, share))
    if not still:
        return None
    slots = slots or sum(r.get("status") == "running" for r in still)
    return f"time left ≈ {_duration(left / max(1, slots))} ({'plan' if planned else 'rate so far'})"


def _paced(row: dict[str, Any]) -> bool:
    return row.get("status") == "running" and bool(
        row.get("elapsed_s") and row.get("rounds") and row.get("rounds_done")
    )


def _duration(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def budget_used(
    index: dict[str, Any], rows: list[dict[str, Any]], set_now: dict[str, str] | None = None
) -> str | None:
    """``spent $0.41 of budget.sweep_usd=$1 (41%)``, from the sweep's own overrides and what
    ``ctl set`` changed of them for the driver running now (``set_now``); None: no budget."""
    limits = dict(o.lstrip("+").split("=", 1) for o in index.get("task_overrides") or [] if "=" in o)
    limits.update(set_now or {})
    shown = []
    if (usd := limits.get("budget.sweep_usd")) is not None:
        known = [r["cost"] for r in rows if r.get("status") != "pending"]
        spent = None if None in known else sum(known)
        share = f" ({spent / float(usd):.0%})" if spent is not None and float(usd) > 0 else ""
        shown.append(f"spent {format_usd(spent)} of budget.sweep_usd=${usd}{share}")
    if (tokens := limits.get("budget.sweep_tokens")) is not None:
        used = sum(r["tokens"] for r in rows)
        shown.append(f"{used} of budget.sweep_tokens={tokens} tokens ({used / max(1, int(tokens)):.0%})")
    return " · ".join(shown) or None


class Sweeps:
    """The sweep folders under a viewer's root, each by key (its path from the
    root), and a ``Follower`` per sweep shown. Like the catalog, a key is
    looked up in what the scan found, never joined onto the root."""

    def __init__(self, root: Path, stall_s: float = STALL_S) -> None:
        self.root, self.stall_s = root.resolve(), stall_s
        self.found = Scan(self._walk)
        self._followers: dict[Path, Follower] = {}
        self._lock = threading.Lock()

    def _walk(self) -> dict[str, Path]:
        """Folders holding ``sweep.json``; neither a sweep's nor a run's insides are walked."""
        found = {}
        for folder, subfolders, files in os.walk(self.root):
            here = Path(folder)
            if SWEEP_INDEX in files and here.resolve().is_relative_to(self.root):
                found[key_of(self.root, here)] = here
            if SWEEP_INDEX in files or "manifest.json" in files:
                subfolders[:] = []
            subfolders[:] = [d for d in subfolders if not d.startswith((".", "_"))]
        return dict(sorted(found.items()))

    def follow(self, key: str) -> Follower | None:
        """The sweep ``key``'s follower, brought up to date; None for no such sweep."""
        sweep_dir = self.found().get(key)
        if sweep_dir is None:
            return None
        with self._lock:
            follower = self._followers.setdefault(sweep_dir, Follower(sweep_dir, self.stall_s))
        follower.refresh()
        return follower


# --- pages ----------------------------------------------------------------------------------


def live_url(key: str) -> str:
    return f"/live/{quote(key, safe='/')}"


def cell_key(sweep_key: str, cell: str) -> str:
    """A cell's run key in the catalog: its folder, from the viewer's root."""
    return cell if sweep_key == "." else f"{sweep_key}/{cell}"


def sweeps_page(sweeps: Sweeps, links: Links) -> str:
    return ENV.get_template("sweeps.html").render(
        root=str(sweeps.root), sweeps=list(sweeps.found()), live_url=live_url, links=links
    )


def live_page(sweeps: Sweeps, key: str, links: Links) -> str | None:
    """The live page of the sweep ``key``; None when the root holds no such sweep."""
    follower = sweeps.follow(key)
    if follower is None:
        return None
    rows = follower.cells()
    return ENV.get_template("live.html").render(
        key=key,
        rows=rows,
        total=summary(rows, follower),
        figures={**pictures(rows, follower), **running_drift(rows, follower)},
        resume=f"python -m harness.sweep ctl {follower.dir} resume",
        stall_s=follower.stall_s,
        refresh_s=REFRESH_S,
        links=links,
        run_key=lambda cell: cell_key(key, cell),
        name=follower.index.get("name") or key,
    )


def pictures(rows: list[dict[str, Any]], follower: Follower) -> dict[str, str]:
    """The page's figures by title, as inline SVG: those with nothing to draw are left out.
    While the sweep runs, its running cells are drawn; once it is done, every cell."""
    open_ = any(r.get("status") in OPEN for r in rows)
    shown = [r for r in rows if r.get("status") == "running" or (not open_ and r.get("has_run"))]
    drawn = {
        "Rate limiters: the limit over time, 429 cuts marked": limits_svg(
            {key: list(limiter.series) for key, limiter in follower.limiters.items()}
        ),
        "Model calls by round, " + ("running cells" if open_ else "every cell"): rounds_svg(
            {r["name"]: follower.rounds_of(r["name"]) for r in shown[:FIGURE_CELLS]}
        ),
        "Drift index by round (python -m analysis <sweep>)": sweep_drift_svg(
            follower.dir, [r["name"] for r in rows[:FIGURE_CELLS]]
        ),
    }
    return {title: svg for title, svg in drawn.items() if svg}


def running_drift(rows: list[dict[str, Any]], follower: Follower) -> dict[str, str]:
    """The running cells' drift index by round, as the installed scorer last scored them
    (``harness.view.drift``): by title, an SVG or the one line saying why there is none."""
    running = [r["name"] for r in rows if r.get("status") == "running"][:FIGURE_CELLS]
    if not running:
        return {}
    title, shown = drift_figure(follower.dir, running)
    return {title: shown}

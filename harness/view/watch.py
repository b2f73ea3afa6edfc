"""What the live sweep page reads of a running cell's run folder, and of the
driver, between refreshes (``harness.view.live``).

A running cell's ``events.jsonl`` and each seat's ``replies.jsonl`` are read
from where the last refresh stopped: the replies give its model calls (by
round), the events its retries (a ``retry`` event with no reply since: a
call retrying now) and its last error; the files' modification times say
when it last moved (a cell still for ``stall_s`` seconds is stalled). The
driver's state is the last effect in ``control.jsonl`` (``python -m
harness.sweep ctl``) while a driver holds ``driver.lock``; a killed driver's
pause is gone with it. Files are read as the JSON they are: the viewer sits
below the sweep package and imports none of it (docs/sweeps.md).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.appended import lines_after

CONTROL_LOG = "control.jsonl"
DRIVER_LOCK = "driver.lock"
STALL_S = 120.0  # a running cell with nothing written for this long is marked stalled (--stall-s)


def json_lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The whole JSON lines after byte ``offset`` (a torn one skipped), and the new offset."""
    lines, offset = lines_after(path, offset)
    out = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out, offset


@dataclass
class CellWatch:
    """One running cell's run folder, followed between refreshes."""

    run_dir: Path
    offsets: dict[Path, int] = field(default_factory=dict)
    calls: int = 0
    by_round: Counter[int] = field(default_factory=Counter)  # model calls landed per round
    retrying: int = 0  # retries of the call in flight (0: none)
    last_error: str | None = None
    moved: float = 0.0  # when any of its files was last written (epoch seconds)

    def refresh(self) -> None:
        for path in sorted(self.run_dir.glob("*/replies.jsonl")):
            replies = self._read(path)
            self.calls += len(replies)
            self.by_round.update(int(r.get("round") or 0) for r in replies)
            if replies:
                self.retrying = 0  # a reply landed: the retried call (if any) got through
        for event in self._read(self.run_dir / "events.jsonl"):
            if event.get("event") in ("retry", "error"):
                error = event.get("error") or {}
                self.last_error = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
                self.retrying = int(event.get("n") or 1) if event.get("event") == "retry" else 0

    def _read(self, path: Path) -> list[dict[str, Any]]:
        try:
            st = path.stat()
        except FileNotFoundError:
            return []
        self.moved = max(self.moved, st.st_mtime)
        if st.st_size <= self.offsets.get(path, 0):
            return []
        lines, self.offsets[path] = json_lines(path, self.offsets.get(path, 0))
        return lines


def seconds_since(when: Any, now: float) -> float | None:
    """Seconds from an ISO 8601 time (as the cell log writes it) to ``now``; None: no time."""
    try:
        return max(0.0, now - datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def process_gone(event: dict[str, Any]) -> bool:
    """Whether the process a cell log line names ran on this machine and no longer
    exists (its driver killed outright); another machine's only its scheduler knows."""
    pid = event.get("pid")
    if event.get("host") != os.uname().nodename or not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def driver_alive(sweep_dir: Path) -> bool:
    """Whether a driver holds the sweep's ``driver.lock`` (harness.sweep.control)."""
    try:
        fd = os.open(sweep_dir / DRIVER_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@dataclass
class Driver:
    """The driver's state, as its ``ctl`` effects left it: its holds, and the
    sweep budgets it set (``set budget.sweep_usd=X``), which last for that driver."""

    offset: int = 0
    paused: list[str] = field(default_factory=list)
    budgets: dict[str, str] = field(default_factory=dict)  # set by the driver holding the lock now
    since: int | None = None  # where that driver's commands begin in the log (its driver.lock)
    alive: bool = False  # a driver holds driver.lock now

    def refresh(self, sweep_dir: Path) -> list[str]:
        """The holds in force now (``*``: every call); none once the driver is gone."""
        since = commands_since(sweep_dir)
        if since is not None and since != self.since:  # another driver: what the last one set is gone
            self.since, self.budgets, self.paused = since, {}, []  # its pause too: a resume runs unpaused
            self.offset = max(self.offset, since)
        effects, self.offset = json_lines(sweep_dir / CONTROL_LOG, self.offset)
        for effect in effects:
            if effect.get("kind") == "effect":
                self.paused = [str(p) for p in effect.get("paused") or []]
                words = [str(w) for w in effect.get("words") or []]
                if effect.get("ok") and words[:1] == ["set"] and words[1:2]:
                    key, _, value = words[1].partition("=")
                    if key.startswith("budget."):
                        self.budgets[key] = value
        self.alive = alive = driver_alive(sweep_dir)
        if not alive:
            self.budgets = {}
        return self.paused if self.paused and alive else []


def lock_holder(sweep_dir: Path) -> dict[str, Any]:
    """What ``driver.lock`` says of the driver that last took it (its pid, where its
    commands begin in the control log: ``control_from``); {} if nothing readable."""
    try:
        held = json.loads((sweep_dir / DRIVER_LOCK).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return held if isinstance(held, dict) else {}


def commands_since(sweep_dir: Path) -> int | None:
    """Where the commands to the driver that last took ``driver.lock`` begin in the control log."""
    since = lock_holder(sweep_dir).get("control_from")
    return since if isinstance(since, int) else None

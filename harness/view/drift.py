"""Running cells' drift index by round, for the live pages, scored off the request path.

The scorer is ``analysis``'s (the harness may not import it): the installed
``drift_harness.live_signals`` entry point (``harness.plugins.live_signals``),
loaded on first use. It runs on one thread of its own: a page shows the last
scores of its cells and asks for new ones, so a refresh never waits on the
scoring, and the scorer keeps each cell's rows between calls (keyed by its
files' sizes and mtimes), so a call reads again only the cells that wrote.
A scorer that is missing or fails is one line on the page, not the figure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.plugins import live_signals
from harness.view.figures import rounds_svg

Scores = dict[str, dict[int, float]]  # cell -> round -> drift index
PENDING = "scoring the running cells' rounds; the figure comes with a later refresh"


class LiveDrift:
    """One scoring thread and the last answer per folder: (what it draws, scores), or why none."""

    def __init__(self, load: Callable[[], Callable[..., Any] | str] = live_signals) -> None:
        self._load = load
        self._scorer: Callable[..., Any] | str | None = None
        self._wanted: tuple[Path, tuple[str, ...]] | None = None
        self._done: dict[tuple[Path, tuple[str, ...]], tuple[str, Scores] | str] = {}
        self._last: dict[Path, tuple[str, Scores] | str] = {}  # a folder's latest, any cells
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def latest(self, folder: Path, cells: Sequence[str]) -> tuple[str, Scores] | str:
        """The last scores of ``cells`` under ``folder`` (a one-line reason when there are none),
        and a request for new ones."""
        with self._cond:
            wanted = self._wanted = (folder, tuple(cells))
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="live-drift", daemon=True)
                self._thread.start()
            self._cond.notify()
            done = self._done.get(wanted, self._last.get(folder, PENDING))
        if isinstance(done, str):
            return done
        drawn, scores = done
        return drawn, {cell: scores[cell] for cell in cells if scores.get(cell)}

    def _work(self) -> None:
        while True:
            with self._cond:
                while self._wanted is None:
                    self._cond.wait()
                wanted, self._wanted = self._wanted, None
            done = self._score(*wanted)
            with self._cond:
                self._done[wanted] = self._last[wanted[0]] = done

    def _score(self, folder: Path, cells: tuple[str, ...]) -> tuple[str, Scores] | str:
        if not callable(self._scorer):  # loaded again while missing: an install shows at once
            self._scorer = self._load()
        if isinstance(self._scorer, str):
            return self._scorer
        try:
            drawn, scores = self._scorer(folder, cells)
            return str(drawn), {str(c): {int(r): float(v) for r, v in s.items()} for c, s in scores.items()}
        except Exception as exc:  # noqa: BLE001 (the plugin's error, any: one line on the page)
            return f"the live drift scorer failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


_shared: LiveDrift | None = None
_shared_lock = threading.Lock()


def shared() -> LiveDrift:
    """The viewer process's scorer, shared by the live sweep pages and the run pages."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = LiveDrift()
        return _shared


def drift_figure(folder: Path, cells: Sequence[str], scorer: LiveDrift | None = None) -> tuple[str, str]:
    """(caption, inline SVG) of the cells' drift index by round, or (caption, a one-line reason)."""
    found = (scorer or shared()).latest(folder, cells)
    if isinstance(found, str):
        return "Drift index by round", found
    drawn, scores = found
    svg = rounds_svg(scores, ylabel="drift index")
    caption = f"Drift index by round, live (signals drawn: {drawn})"
    return caption, svg or "no round has landed yet"

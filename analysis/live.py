"""A running sweep's drift index by round, for the live sweep page (issue 38).

The harness may not import ``analysis`` (.importlinter), so this module is
registered as the ``drift_harness.live_signals`` entry point (pyproject.toml)
and the viewer loads it by name, off its request path (``harness.plugins``).

A cell is scored as ``python -m analysis`` scores it (``load_runs``,
``compute_signals``, ``scoring.score``), less the embedder: MiniLM takes about
9 s and 650 MB to load and ~0.15 s a text on a busy 2-core machine, too much
beside a sweep for a page that refreshes every 2 s. So the signals that need
it (registry source MiniLM or the IPIP Big Five proxies) are left out and the
drift index is the mean of the other dimensions: affect, LIWC, structure, and
the n-gram repetition of the semantic one. ``DRAWN`` says so on the page; once
the sweep is analysed the page draws the analysis's own figure.

Each cell's signal rows are kept between calls, keyed by its files' sizes and
mtimes: a call reads again only the cells that wrote since the last. The
z-scores are taken over the cells scored together, as the analysis takes them
over the runs it analyses together.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.compute import compute_signals
from analysis.load import load_runs
from analysis.registry import BY_NAME, IPIP, MINILM
from analysis.scoring import score

DRAWN = "affect, LIWC, structure and n-gram repetition; MiniLM's signals come with python -m analysis <sweep>"
NO_EMBEDDER = "hash"  # computed, then dropped: every signal from an embedding is left out
Stamp = tuple[tuple[str, int, int], ...]

_rows: dict[Path, tuple[Stamp, pd.DataFrame]] = {}  # a cell folder's signal rows, by its stamp
_lock = threading.Lock()


def stamp(cell_dir: Path) -> Stamp:
    """Every file under the cell folder: (path, size, mtime); what its rows are keyed on."""
    out = []
    for folder, _, files in os.walk(cell_dir):
        for name in files:
            try:
                st = os.stat(os.path.join(folder, name))
            except OSError:  # replaced while listed: the next call sees it
                continue
            out.append((os.path.join(folder, name), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


def cell_signals(cell_dir: Path) -> pd.DataFrame:
    """One cell's per-turn signals that need no embedder (recomputed only when it wrote)."""
    now = stamp(cell_dir)
    with _lock:
        kept = _rows.get(cell_dir)
    if kept is not None and kept[0] == now:
        return kept[1]
    with warnings.catch_warnings():  # a running cell is partly written: expected here
        warnings.simplefilter("ignore")
        tables = load_runs(cell_dir, cache=False)
    turns = pd.DataFrame()
    if not tables.turns.empty:
        turns = compute_signals(tables, embedder=NO_EMBEDDER, progress=False).turns
        turns = turns.drop(columns=[c for c in turns if c in BY_NAME and BY_NAME[c].source in (MINILM, IPIP)])
    with _lock:
        _rows[cell_dir] = (now, turns)
    return turns


def score_rounds(sweep_dir: Path, cells: Sequence[str]) -> tuple[str, dict[str, dict[int, float]]]:
    """(what the index is the mean of, each cell's drift index by round: the mean over its seats).
    A cell with no turn yet is left out."""
    frames = [f for f in (cell_signals(Path(sweep_dir) / c) for c in cells) if not f.empty]
    if not frames:
        return DRAWN, {}
    scores = score(pd.concat(frames, ignore_index=True))
    by_cell = scores.groupby(["run_id", "round"])["drift_index"].mean()
    out: dict[str, dict[int, float]] = {}
    for (cell, round_), value in by_cell.items():
        out.setdefault(str(cell), {})[int(round_)] = float(value)
    return DRAWN, out

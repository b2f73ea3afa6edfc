"""The runs a viewer shows: every run folder under its root, each by a key.

A key is the run folder's path relative to the root (``sweep-x/temp-0.1``).
The catalog is the only way from a URL to a folder: a key is looked up in
the set the scan found, never joined onto the root, so ``..``, absolute paths
and symlinks out of the root reach nothing. The scan is redone when it is
older than ``SCAN_TTL_S``, so runs that appear while the viewer is up are
shown, and one page (which looks a run up, then lists the others) walks the
tree once.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.store.fingerprint import flatten
from harness.store.reader import RunFolder, find_runs, read_config, read_manifest, read_run
from harness.store.records import RunManifest

# Logs a page never shows (every prompt, every raw reply): leaving them out is
# most of what makes a 1,000-round run open fast.
SKIPPED_LOGS = ("prompts.jsonl", "replies.jsonl")
SCAN_TTL_S = 2.0  # how long a scan of the root's run folders is reused


def flat_config(config: dict[str, Any]) -> dict[str, str]:
    """Every config key as ``llm.temperature`` -> ``"0.7"``, for filtering by any key."""
    return {k: "null" if v is None else str(v) for k, v in flatten(config).items()}


@dataclass
class RunRow:
    """One line of the runs list."""

    key: str
    manifest: RunManifest | None
    config: dict[str, Any]
    problem: str | None = None  # why the folder could not be read
    config_flat: dict[str, str] = field(default_factory=dict)

    def seats(self) -> list[tuple[str, str]]:
        """(seat, model) for each seat, then each role with no seat."""
        if self.manifest is None:
            return []
        names = [s.role for s in self.manifest.layout.seats] if self.manifest.layout else []
        specs = self.manifest.model_specs
        return [(r, specs[r]) for r in names if r in specs] + [
            (r, m) for r, m in specs.items() if r not in names
        ]


@dataclass
class Family:
    """A run's parent (its folder, and its key when it is under the viewer's
    root) and its branches: (key, fork round) of each run forked from it."""

    parent: str | None
    parent_key: str | None
    branches: list[tuple[str, int]]


class Scan:
    """A walk of the viewer's root, reused while it is younger than ``SCAN_TTL_S``."""

    def __init__(self, walk: Callable[[], dict[str, Path]]) -> None:
        self._walk = walk
        self._last: tuple[float, dict[str, Path]] | None = None

    def __call__(self) -> dict[str, Path]:
        last = self._last
        if last is None or time.monotonic() - last[0] > SCAN_TTL_S:
            last = self._last = (time.monotonic(), self._walk())
        return last[1]


def key_of(root: Path, folder: Path) -> str:
    """A folder's key: its path from the root, "." for the root itself."""
    return folder.relative_to(root).as_posix() if folder != root else "."


class Catalog:
    """Run folders under ``root`` by key; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.runs = Scan(self._walk)  # run folders by key: the last scan if it is fresh, else a new one

    def _walk(self) -> dict[str, Path]:
        found = {}
        for run_dir in find_runs(self.root):
            real = run_dir.resolve()
            if real == self.root or real.is_relative_to(self.root):  # a symlinked run outside is not ours
                found[key_of(self.root, run_dir)] = run_dir
        return found

    def path(self, key: str) -> Path | None:
        """The run folder of ``key``; None for no such run, or one holding a
        link out of the root (reading it would show what lies outside)."""
        run_dir = self.runs().get(key)
        if run_dir is None or self.escapes(run_dir):
            return None
        return run_dir

    def escapes(self, run_dir: Path) -> list[Path]:
        """Links inside ``run_dir`` that point out of the root."""
        out = []
        for folder, dirs, files in os.walk(run_dir):
            for name in [*dirs, *files]:
                entry = Path(folder) / name
                if entry.is_symlink() and not entry.resolve().is_relative_to(self.root):
                    out.append(entry)
        return out

    def rows(self) -> list[RunRow]:
        rows = []
        for key, run_dir in self.runs().items():
            try:
                manifest, config = read_manifest(run_dir), read_config(run_dir)
                rows.append(RunRow(key, manifest, config, config_flat=flat_config(config)))
            except Exception as exc:  # a half-written folder is listed with why, never an error page
                rows.append(RunRow(key, None, {}, problem=f"{type(exc).__name__}: {exc}"[:200]))
        return rows

    def family(self, key: str, manifest: RunManifest) -> Family:
        """A run's fork family: its parent (by key when under the root) and its branches."""
        keys = {run_dir.resolve(): k for k, run_dir in self.runs().items()}
        lineage, me = manifest.lineage, self.runs()[key].resolve()
        branches = []
        for k, run_dir in self.runs().items():
            try:
                theirs = read_manifest(run_dir).lineage
            except Exception:  # an unreadable folder is no branch; the runs list says why
                continue
            if theirs is not None and Path(theirs.parent) == me:
                branches.append((k, theirs.at_round))
        parent_key = keys.get(Path(lineage.parent)) if lineage else None
        return Family(lineage.parent if lineage else None, parent_key, sorted(branches, key=lambda b: b[1]))

    def read(self, key: str) -> RunFolder | None:
        run_dir = self.path(key)
        if run_dir is None:
            return None
        return _read_cached(run_dir, _stamp(run_dir))


def _stamp(run_dir: Path) -> tuple[int, ...]:
    """Changes whenever any log grows or the manifest is rewritten (a running run)."""
    stamp = []
    for folder, _, files in os.walk(run_dir):
        for name in files:
            if name.endswith((".jsonl", ".json")) and not name.endswith(SKIPPED_LOGS):
                st = os.stat(os.path.join(folder, name))
                stamp += [st.st_size, st.st_mtime_ns]
    return tuple(stamp)


@functools.lru_cache(maxsize=8)
def _read_cached(run_dir: Path, stamp: tuple[int, ...]) -> RunFolder:
    return read_run(run_dir, skip=SKIPPED_LOGS)

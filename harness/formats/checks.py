"""``verify`` with every format's own checks, and recording an old run's layout.

``harness.store.integrity.verify`` checks what every format promises and
runs the checks it is handed; the store knows no format. This module, above
the formats, hands it each format's ``Format.checks`` and lays out a run
whose manifest records no layout (a run made before 2026-12-01) from its
config, noting the command that records it (``record_layout``).
"""

from __future__ import annotations

from pathlib import Path

from harness.formats import FORMATS, layout_from_config, load_plugin
from harness.schema import ConfigError
from harness.store.integrity import Check
from harness.store.integrity import verify as verify_store
from harness.store.reader import RECORD_LAYOUT, complete_layout, read_config, sides_recorded
from harness.store.rundir import RunLock, read_manifest, write_manifest


def format_checks() -> dict[str, tuple[Check, ...]]:
    """Each registered format's own checks, by format name."""
    return {name: fmt.checks for name, fmt in FORMATS.items()}


def verify(run_dir: Path) -> tuple[list[str], list[str]]:
    """(violations, notes) for one run folder, with its format's own checks."""
    run_dir = Path(run_dir)
    loaded = load_its_plugin(run_dir)
    problems, notes = verify_store(run_dir, format_checks(), fallback=layout_from_config)
    return [*loaded, *problems], [*unrecorded(run_dir), *notes]


def load_its_plugin(run_dir: Path) -> list[str]:
    """Load the installed plugin of a run's format not registered in this
    process (``harness.plugins``); a plugin that does not load is a violation."""
    try:
        layout = read_manifest(run_dir).layout
    except (OSError, ValueError):  # verify reports the manifest itself
        return []
    if layout is None or layout.format in FORMATS:
        return []
    try:
        load_plugin(layout.format)
    except ConfigError as exc:
        return [f"manifest.json: {exc}"]
    return []


def unrecorded(run_dir: Path) -> list[str]:
    """A note if the manifest lacks the layout, or the seats' sides, a new run records."""
    try:
        layout = read_manifest(run_dir).layout
    except (OSError, ValueError):  # verify reports the manifest itself
        return []
    if layout is not None and sides_recorded(layout):
        return []
    what = "no layout" if layout is None else "no seat sides"
    return [
        f"manifest.json: {what} recorded (laid out from config.yaml); record it: {RECORD_LAYOUT} {run_dir}"
    ]


def record_layout(run_dir: Path) -> str:
    """Record in ``run_dir``'s manifest.json (rewritten atomically, holding the
    run's lock) the layout its format gives its config, or the seat sides a
    recorded layout lacks; what was done, in one line."""
    with RunLock(run_dir):
        manifest = read_manifest(run_dir)
        if manifest.layout is not None and sides_recorded(manifest.layout):
            return f"{run_dir}: layout already recorded"
        what = "layout" if manifest.layout is None else "seat sides"
        manifest.layout = complete_layout(manifest.layout, layout_from_config(read_config(run_dir)))
        write_manifest(run_dir, manifest)
    return f"{run_dir}: {what} recorded in manifest.json"

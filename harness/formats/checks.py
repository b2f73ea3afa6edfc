"""``verify`` with every format's own checks.

``harness.store.integrity.verify`` checks what every format promises and
runs the checks it is handed; the store knows no format. This module, above
the formats, hands it each format's ``Format.checks``, loading first the
plugin of a run's format not registered in this process.
"""

from __future__ import annotations

from pathlib import Path

from harness.formats import FORMATS, load_plugin
from harness.schema import ConfigError
from harness.store.integrity import Check
from harness.store.integrity import verify as verify_store
from harness.store.rundir import read_manifest


def format_checks() -> dict[str, tuple[Check, ...]]:
    """Each registered format's own checks, by format name."""
    return {name: fmt.checks for name, fmt in FORMATS.items()}


def verify(run_dir: Path) -> tuple[list[str], list[str]]:
    """(violations, notes) for one run folder, with its format's own checks."""
    run_dir = Path(run_dir)
    loaded = load_its_plugin(run_dir)
    problems, notes = verify_store(run_dir, format_checks())
    return [*loaded, *problems], notes


def load_its_plugin(run_dir: Path) -> list[str]:
    """Load the installed plugin of a run's format not registered in this
    process (``harness.plugins``); a plugin that does not load is a violation."""
    try:
        name = read_manifest(run_dir).layout.format
    except (OSError, ValueError):  # verify reports the manifest itself
        return []
    if name in FORMATS:
        return []
    try:
        load_plugin(name)
    except ConfigError as exc:
        return [f"manifest.json: {exc}"]
    return []

"""How a finished command reports a run: the summary line, and the run
folder as the last line of stdout; the exit code follows the status."""

from __future__ import annotations

import sys

from harness.cli.console import say
from harness.cli.progress import summary_line
from harness.engine.execute import RunResult


def report(result: RunResult) -> int:
    """Print the summary and the run folder (last line); exit code by status."""
    manifest = result.manifest
    if result.note:
        say(result.note, sys.stderr)
    if manifest.status == "interrupted":
        say(
            f"interrupted after round {manifest.counts.rounds_completed}; "
            f"resume with: python -m harness.resume {result.run_dir}",
            sys.stderr,
        )
    say(summary_line(manifest, result.rounds), sys.stdout)
    say(str(result.run_dir), sys.stdout)
    return 130 if manifest.status == "interrupted" else 0

"""How a finished command reports a run: the summary line, and the run
folder as the last line of stdout; the exit code follows the status."""

from __future__ import annotations

import sys

from harness.cli.progress import summary_line
from harness.engine.execute import RunResult


def report(result: RunResult) -> int:
    """Print the summary and the run folder (last line); exit code by status."""
    manifest = result.manifest
    if result.note:
        print(result.note, file=sys.stderr)
    if manifest.status == "interrupted":
        print(
            f"interrupted after round {manifest.counts.rounds_completed}; "
            f"resume with: python -m harness.resume {result.run_dir}",
            file=sys.stderr,
        )
    print(summary_line(manifest, result.rounds))
    print(result.run_dir)
    return 130 if manifest.status == "interrupted" else 0

"""How a finished command reports a run: the summary line, and the run
folder as the last line of stdout; the exit code follows the status."""

from __future__ import annotations

import sys

from harness.cli.console import say
from harness.cli.errors import BUDGET_STOPPED, INTERRUPTED
from harness.cli.progress import summary_line
from harness.engine.execute import RunResult
from harness.runtime.budget import go_on_past


def report(result: RunResult) -> int:
    """Print the summary and the run folder (last line); exit code by status."""
    manifest = result.manifest
    if result.note:
        say(result.note, sys.stderr)
    if manifest.status == "interrupted" and (manifest.stop_reason or "").startswith("budget"):
        say(
            f"stopped after round {manifest.counts.rounds_completed}, before a call that could cross the "
            f"{manifest.stop_reason}; raise it and resume: {go_on_past(manifest.stop_reason or '', result.run_dir)}",
            sys.stderr,
        )
    elif manifest.status == "interrupted":
        say(
            f"interrupted after round {manifest.counts.rounds_completed}; "
            f"resume with: python -m harness.resume {result.run_dir}",
            sys.stderr,
        )
    if manifest.lineage is not None:  # its figures are its own: the prefix's are the parent's
        lineage = manifest.lineage
        copied = "round 1" if lineage.at_round == 1 else f"rounds 1-{lineage.at_round}"  # as export says it
        say(
            f"fork of {lineage.parent} at round {lineage.at_round}: {copied} copied, "
            f"not paid again ({lineage.prefix_counts.model_calls} calls of the parent's); the figures are the fork's own",
            sys.stderr,
        )
    say(summary_line(manifest, result.rounds), sys.stdout)
    say(str(result.run_dir), sys.stdout)
    if manifest.status != "interrupted":
        return 0
    return BUDGET_STOPPED if (manifest.stop_reason or "").startswith("budget") else INTERRUPTED

"""Console progress: a bar over rounds showing the agent at work (the
engine's own, ``harness.engine.progress``), and the one-line summary printed
when a run ends."""

from __future__ import annotations

from harness.engine.progress import Progress
from harness.models.prices import format_usd
from harness.store.records import RunManifest

__all__ = ["Progress", "summary_line"]


def summary_line(manifest: RunManifest, rounds: int) -> str:
    """``completed: rounds 3/3 | <the format's counts> | copies 0 | repeats 0 | cuts 0 | tokens ... | wall ...``;
    a run that ended short of ``rounds`` names why (``rounds 4/6 (cap: synthesis after round 4)``)."""
    from harness.formats import FORMATS

    c = manifest.counts
    fmt = FORMATS.get(manifest.format)
    shown = fmt.counts if fmt else ("published", "schema_failures", "retries")
    parts = [f"{name.replace('_', ' ').replace('loop locks', 'loop-locks')} {c.get(name)}" for name in shown]
    # every format's: turns repeating an earlier one, turns repeating themselves, capped replies
    parts += [f"copies {c.copies}", f"repeats {c.repeats}", f"cuts {c.cuts}"]
    # a format that closed the run early (a panel's synthesis, a verdict) says why it is short
    # (an interrupted run's reason is the line above it, with how to go on)
    short = manifest.status == "completed" and manifest.stop_reason and c.rounds_completed < rounds
    closed = f" ({manifest.stop_reason})" if short else ""
    return " | ".join(
        [
            f"{manifest.status}: rounds {c.rounds_completed}/{rounds}{closed}",
            *parts,
            f"tokens {c.input_tokens} in / {c.output_tokens} out",
            f"cost {format_usd(c.cost_usd)}",
            f"wall {manifest.wall_s:.1f}s",
        ]
    )

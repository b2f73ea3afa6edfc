"""Console progress: a bar over rounds showing the agent at work, and the
one-line summary printed when a run ends. The bar goes to stderr, so stdout
stays clean for the summary and the run folder path."""

from __future__ import annotations

import sys
from types import TracebackType

from tqdm import tqdm

from harness.cli.console import guarded
from harness.store.records import RunManifest


class Progress:
    def __init__(self, rounds: int, *, enabled: bool = True) -> None:
        self.bar = tqdm(
            total=rounds, desc="rounds", unit="round", file=guarded(sys.stderr), disable=not enabled,
            dynamic_ncols=True,
        )  # fmt: skip

    def step(self, round_: int, label: str) -> None:
        self.bar.set_postfix_str(f"r{round_} {label}", refresh=False)

    def round_done(self, completed: int) -> None:
        if completed > self.bar.n:
            self.bar.update(completed - self.bar.n)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.bar.close()


def summary_line(manifest: RunManifest, rounds: int) -> str:
    """``completed: rounds 3/3 | <the format's counts> | tokens ... | wall ...``."""
    from harness.formats import FORMATS

    c = manifest.counts
    fmt = FORMATS.get(manifest.format)
    shown = fmt.counts if fmt else ("published", "schema_failures", "retries")
    parts = [f"{name.replace('_', ' ').replace('loop locks', 'loop-locks')} {c.get(name)}" for name in shown]
    return " | ".join(
        [
            f"{manifest.status}: rounds {c.rounds_completed}/{rounds}",
            *parts,
            f"tokens {c.input_tokens} in / {c.output_tokens} out",
            f"wall {manifest.wall_s:.1f}s",
        ]
    )

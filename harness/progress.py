"""Console progress: a bar over rounds showing the agent at work, and the
one-line summary printed when a run ends. The bar goes to stderr, so stdout
stays clean for the summary and the run folder path."""

from __future__ import annotations

import sys
from types import TracebackType

from tqdm import tqdm

from harness.records import RunManifest


class Progress:
    def __init__(self, rounds: int, *, enabled: bool = True) -> None:
        self.bar = tqdm(
            total=rounds, desc="rounds", unit="round", file=sys.stderr, disable=not enabled,
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
    c = manifest.counts
    return (
        f"{manifest.status}: rounds {c.rounds_completed}/{rounds} | approvals {c.approvals} | "
        f"rejections {c.rejections} | loop-locks {c.loop_locks} | schema failures "
        f"{c.schema_failures} | retries {c.retries} | tokens {c.input_tokens} in / "
        f"{c.output_tokens} out | wall {manifest.wall_s:.1f}s"
    )

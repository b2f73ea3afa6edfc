"""The engine's progress bar: rounds done, and the agent at work. It goes to
stderr, so stdout stays clean for the summary and the run folder path."""

from __future__ import annotations

import sys
from types import TracebackType

from tqdm import tqdm

from harness.streams import guarded


class Progress:
    def __init__(self, rounds: int, *, enabled: bool = True) -> None:
        self.bar = tqdm(
            total=rounds,
            desc="rounds",
            unit="round",
            file=guarded(sys.stderr),
            disable=not enabled,
            dynamic_ncols=True,
        )

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

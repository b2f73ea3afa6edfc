"""What an agent sees of the debate: a bounded window of shared memory.

Only the last ``window_rounds`` rounds are rendered, each item clipped, so a
prompt's size (and a node's cost) does not grow with the round number.
"""

from __future__ import annotations

from harness.memory import JsonlLog
from harness.records import ArgumentRecord


def window(shared: JsonlLog[ArgumentRecord], round_: int, window_rounds: int) -> list[ArgumentRecord]:
    """Published arguments from the last ``window_rounds`` rounds up to now."""
    if window_rounds <= 0:
        return []
    return shared.since_round(max(1, round_ - window_rounds))


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(items: list[ArgumentRecord], limit: int) -> str:
    if not items:
        return "(no arguments published yet)"
    return "\n".join(f"[round {a.round}, {a.team}] {clip(a.text, limit)}" for a in items)


def opponent_last(items: list[ArgumentRecord], team: str) -> ArgumentRecord | None:
    for record in reversed(items):
        if record.team != team:
            return record
    return None

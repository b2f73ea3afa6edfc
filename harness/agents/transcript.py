"""What an agent sees of the debate: a bounded window of shared memory.

Only the last ``window_rounds`` rounds are rendered, each item clipped, so a
prompt's size (and a node's cost) does not grow with the round number.
"""

from __future__ import annotations

from harness.store.memory import JsonlLog
from harness.store.records import Published


def window(shared: JsonlLog[Published], round_: int, window_rounds: int) -> list[Published]:
    """Published arguments from the last ``window_rounds`` rounds up to now."""
    if window_rounds <= 0:
        return []
    return shared.since_round(max(1, round_ - window_rounds))


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(items: list[Published], limit: int) -> str:
    if not items:
        return "(no arguments published yet)"
    return "\n".join(f"[round {a.round}, {a.alias or a.team}] {clip(a.text, limit)}" for a in items)


def opponent_last(items: list[Published], team: str) -> Published | None:
    for record in reversed(items):
        if record.team != team:
            return record
    return None

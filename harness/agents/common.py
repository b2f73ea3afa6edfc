"""What every agent's prompt shares."""

from __future__ import annotations

from harness.store.records import SummaryRecord

JSON_ONLY = "Reply with one JSON object only, no prose around it."


def chat(system: str, user: str) -> list[dict[str, str]]:
    """A prompt of one system and one user message."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def recap(summaries: list[SummaryRecord]) -> str:
    """The panel's round summaries so far, as its judge and synthesiser read them."""
    return "\n".join(f"[round {s.round}] {s.text}" for s in summaries) or "(none)"


def system_prompt(preset: str, briefing: str | None) -> str:
    """A role's system message: its preset prompt, then its briefing (if any)."""
    return f"{preset}\n\n{briefing}\n\n{JSON_ONLY}" if briefing else f"{preset} {JSON_ONLY}"

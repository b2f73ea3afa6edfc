"""What every agent's prompt shares."""

JSON_ONLY = "Reply with one JSON object only, no prose around it."


def system_prompt(preset: str, briefing: str | None) -> str:
    """A role's system message: its preset prompt, then its briefing (if any)."""
    return f"{preset}\n\n{briefing}\n\n{JSON_ONLY}" if briefing else f"{preset} {JSON_ONLY}"

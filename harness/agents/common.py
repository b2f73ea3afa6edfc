"""What every agent's prompt shares."""

JSON_ONLY = "Reply with one JSON object only, no prose around it."

"""The side each team argues, shared by every agent's prompt."""

STANCE = {
    "pros": "FOR the motion",
    "cons": "AGAINST the motion",
}

JSON_ONLY = "Reply with one JSON object only, no prose around it."

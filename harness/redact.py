"""Secrets in a config: which keys hold one, and the copy of a config with
them masked that a run folder's ``config.yaml`` keeps. A leaf: it imports
nothing from harness, so the schema, the store and the engine can all use it."""

from __future__ import annotations

import re
from typing import Any

# Key names that hold credentials, however a provider spells them: api_key,
# aws_secret_access_key, client_secret, default_headers.Authorization,
# access_token, password. "max_tokens" (a count) is not one.
_SECRET_KEY = re.compile(
    r"api_?key|secret|passw(or)?d|credential|authorization|private_?key|access_?key|(^|_)token$",
    re.IGNORECASE,
)


REDACTED = "***REDACTED***"

# Values local servers take where a key is required but never checked
# (llama-cpp-python's, vLLM's, Ollama's OpenAI route): no secret, so kept, and
# a resume needs nothing from the environment to reach the server again.
PLACEHOLDER_KEYS = frozenset(
    {"none", "null", "empty", "no-key", "nokey", "sk-no-key-required", "dummy", "local", "x"}
)


def is_secret(key: object, value: Any) -> bool:
    return bool(value) and bool(_SECRET_KEY.search(str(key))) and str(value).lower() not in PLACEHOLDER_KEYS


def redact(data: Any) -> Any:
    """Copy of a plain config dict with secrets masked, for config.yaml."""
    if isinstance(data, dict):
        return {k: (REDACTED if is_secret(k, v) else redact(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data

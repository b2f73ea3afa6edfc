"""The run config, as every command and test reads it: the schema's
dataclasses (``harness.schema``) and ``validate``, which checks a composed
Hydra config against the schema and then against the chosen format
(``harness.formats.validate``).

Layers: this module sits above ``harness.formats``; the code below it (store,
models, probes, agents, formats) imports ``harness.schema`` instead.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from harness.schema import (
    CONTROLS,
    GRAMMAR_MODES,
    LOOP_LOCK_POLICIES,
    PLACEHOLDER_KEYS,
    REDACTED,
    SCHEMA_FAILURE_POLICIES,
    SEARCH_TRANSPORTS,
    STRUCTURED_MODES,
    Config,
    ConfigError,
    CriticConfig,
    LLMConfig,
    MemoryConfig,
    ModelConfig,
    ProbesConfig,
    ProbeSpec,
    RetryConfig,
    RoleOverride,
    SearchConfig,
    StructuredConfig,
    TopicConfig,
    is_secret,
    read_text,
    read_topics,
    redact,
)


def validate(cfg: DictConfig | dict[str, Any]) -> Config:
    """Type-check and range-check a composed config; raise a one-line ConfigError."""
    from harness.formats import validate as check  # late: `import harness.config` stays light

    return check(cfg)


__all__ = [
    "CONTROLS",
    "Config",
    "ConfigError",
    "CriticConfig",
    "GRAMMAR_MODES",
    "LLMConfig",
    "LOOP_LOCK_POLICIES",
    "MemoryConfig",
    "ModelConfig",
    "PLACEHOLDER_KEYS",
    "ProbeSpec",
    "ProbesConfig",
    "REDACTED",
    "RetryConfig",
    "RoleOverride",
    "SCHEMA_FAILURE_POLICIES",
    "SEARCH_TRANSPORTS",
    "STRUCTURED_MODES",
    "SearchConfig",
    "StructuredConfig",
    "TopicConfig",
    "is_secret",
    "read_text",
    "read_topics",
    "redact",
    "validate",
]

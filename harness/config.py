"""The run config, as every command and test reads it: the schema's
dataclasses (``harness.schema``) and ``validate``, which checks a composed
Hydra config against the schema and then against the chosen format
(``harness.formats.validate``).

Layers: this module sits above ``harness.formats``; the code below it (store,
models, probes, agents, formats) imports ``harness.schema`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from harness.formats import Format


def validate(cfg: DictConfig | dict[str, Any]) -> Config:
    """Type-check and range-check a composed config; raise a one-line ConfigError."""
    from harness.formats import validate as check  # late: `import harness.config` stays light

    return check(cfg)


# What ``Config.role_model`` gives one role: its model config, temperature and reply budget.
RoleSettings = tuple[ModelConfig, float, int]


@dataclass(frozen=True)
class Resolved:
    """A validated config with what a run reads from it at every step: its
    format, and each model role's settings in the format's role order. Built
    once by ``resolve`` and passed down, so nothing looks either up again."""

    cfg: Config
    fmt: Format
    models: Mapping[str, RoleSettings]


def resolve(cfg: DictConfig | dict[str, Any]) -> Resolved:
    """``validate``, keeping the format it found and the roles' model settings."""
    from harness.formats import validated  # late, as in ``validate``

    checked, fmt = validated(cfg)
    return Resolved(checked, fmt, {role: checked.role_model(role) for role in fmt.model_roles(checked)})


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
    "Resolved",
    "RetryConfig",
    "RoleOverride",
    "RoleSettings",
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
    "resolve",
    "validate",
]

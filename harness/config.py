"""A composed Hydra config, resolved once for a run: ``resolve`` validates
it (``harness.formats.validate``: the schema's checks, then the chosen
format's) and returns it with its format and each role's model settings,
which the engine passes down instead of looking them up again.

Layers: this module sits above ``harness.formats``; the config's dataclasses
live in ``harness.schema``, which every layer may import.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from harness.formats import Format, validated
from harness.schema import Config, ModelConfig

# What ``Config.role_model`` gives one role: its model config, temperature and reply budget.
RoleSettings = tuple[ModelConfig, float, int]


@dataclass(frozen=True)
class Resolved:
    """One run's validated config, its format, and each model role's settings
    in the format's role order. Built once by ``resolve`` and passed down, so
    nothing looks either up again."""

    cfg: Config
    fmt: Format
    models: Mapping[str, RoleSettings]


def resolve(cfg: DictConfig | dict[str, Any]) -> Resolved:
    checked, fmt = validated(cfg)
    return Resolved(checked, fmt, {role: checked.role_model(role) for role in fmt.model_roles(checked)})


def replicate_seed(seed: int, replicate: int) -> int:
    """A sweep's replicate's seed (``replicates=N``): replicate 0 keeps the seed (so it
    equals a plain run); others derive one from it. A fork's derive from its parent's."""
    if replicate == 0:
        return seed
    digest = hashlib.sha256(f"{seed}|replicate|{replicate}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)

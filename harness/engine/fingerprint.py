"""A run's fingerprint parts, gathered from what the engine holds: the
config, the format and the bound role models. ``harness.store.fingerprint``
hashes, writes and compares them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.engine.calls import RoleModel
from harness.formats.base import Format
from harness.probes.catalog import PROBE_MODULES
from harness.redact import redact
from harness.schema import Config
from harness.store.fingerprint import (
    MODEL_TRANSPORT_KEYS,
    MUTABLE_KEYS,
    OPTIONAL_SECTIONS,
    SEARCH_TRANSPORT_KEYS,
    module_file,
    sha256,
)


def components(cfg: Config, roles: dict[str, RoleModel], fmt: Format) -> dict[str, Any]:
    config = redact(dataclasses.asdict(cfg))
    for key in MUTABLE_KEYS:
        config.pop(key, None)
    for section in OPTIONAL_SECTIONS:
        if section not in fmt.sections:
            config.pop(section, None)
    for key in SEARCH_TRANSPORT_KEYS:
        config.get("search", {}).pop(key, None)
    for key in MODEL_TRANSPORT_KEYS:
        config.get("model", {}).pop(key, None)
    # whether a step's independent calls go out together (harness.engine.fanout),
    # not what they ask: free to change on resume
    config.get("format", {}).pop("fan_out", None)
    # a drift run with its persona (format.persona, false only in the no-persona
    # control) fingerprints as it did before the switch existed, so it still resumes
    if config.get("format", {}).get("persona") is True:
        config["format"].pop("persona")
    prompt_modules = list(fmt.prompt_modules)
    if cfg.probes.enabled:  # a probed run's prompts and verdicts also come from the probe code
        prompt_modules += PROBE_MODULES
    else:  # a run that probes nothing fingerprints as it did before probes existed
        config.pop("probes", None)
    files: dict[str, str] = {}
    for bound in roles.values():
        files.update({Path(p).name: sha for p, sha in bound.model.model_files().items()})
    parts = {
        "config": config,
        "format": fmt.name,
        "prompts": {name: sha256(module_file(name).read_bytes()) for name in sorted(prompt_modules)},
        "models": {role: bound.spec for role, bound in sorted(roles.items())},
        "model_files": files,
    }
    # the price of each priced model (none for free ones, so their fingerprints read as before)
    if prices := _prices(roles):
        parts["prices"] = prices
    return parts


def _prices(roles: dict[str, RoleModel]) -> dict[str, str]:
    out: dict[str, str] = {}
    for bound in roles.values():
        if bound.prices is not None:
            out.update(bound.prices.digest([bound.spec]))
    return out

"""A run's fingerprint parts, gathered from what the engine holds: the
config, the format and the bound role models. ``harness.store.fingerprint``
hashes, writes and compares them, and says what may change in a continuation."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.formats.base import Format
from harness.probes.catalog import PROBE_MODULES
from harness.probes.questionnaire import INTERVIEW_MODULES
from harness.redact import redact
from harness.runtime.calls import RoleModel
from harness.schema import Config
from harness.store.fingerprint import (
    FORMAT_TRANSPORT_KEYS,
    MEMORY_TRANSPORT_KEYS,
    MODEL_TRANSPORT_KEYS,
    MUTABLE_KEYS,
    OPTIONAL_SECTIONS,
    SEARCH_TRANSPORT_KEYS,
    prompt_digests,
)


def components(cfg: Config, roles: dict[str, RoleModel], fmt: Format) -> dict[str, Any]:
    files: dict[str, str] = {}
    for bound in roles.values():
        files.update({Path(p).name: sha for p, sha in bound.model.model_files().items()})
    specs = {role: bound.spec for role, bound in roles.items()}
    return {**unbuilt_components(cfg, fmt, specs, _prices(roles)), "model_files": files}


def unbuilt_components(
    cfg: Config, fmt: Format, specs: dict[str, str], prices: dict[str, str]
) -> dict[str, Any]:
    """Every part but ``model_files``, from the config alone: no model is built for it,
    so no local model's file is hashed. ``specs``: each role's model spec;
    ``prices``: the digest of each priced spec's entry."""
    config = redact(dataclasses.asdict(cfg))
    for key in MUTABLE_KEYS:
        config.pop(key, None)
    # only the seats given a persona: a run that plants none has the fingerprint it had before planting
    config["personas"] = {s: p for s, p in config.get("personas", {}).items() if p["text"] or p["file"]}
    if not config["personas"]:
        config.pop("personas")
    for section in OPTIONAL_SECTIONS:
        if section not in fmt.sections:
            config.pop(section, None)
    for section, keys in (
        ("search", SEARCH_TRANSPORT_KEYS),
        ("model", MODEL_TRANSPORT_KEYS),
        ("format", FORMAT_TRANSPORT_KEYS),
        ("memory", MEMORY_TRANSPORT_KEYS),
    ):
        for key in keys:
            config.get(section, {}).pop(key, None)
    prompt_modules = list(fmt.prompt_modules)
    if cfg.probes.enabled:  # a probed run's prompts and verdicts also come from the probe code
        prompt_modules += PROBE_MODULES
    else:  # an unprobed run asks no probe: its config.yaml keeps no probe set, nor does this
        config.pop("probes", None)
    # an interviewed run's answers, each read against the seat's first, come from this code and these items
    if fmt.interviews(cfg):
        prompt_modules += INTERVIEW_MODULES
        config["interviews"].pop("rounds")  # when to ask may change: the debate computes the same
    else:
        config.pop("interviews", None)
    return {
        "config": config,
        "format": fmt.name,
        "prompts": prompt_digests(prompt_modules),
        "models": dict(sorted(specs.items())),
        "prices": prices,
    }


def _prices(roles: dict[str, RoleModel]) -> dict[str, str]:
    out: dict[str, str] = {}
    for bound in roles.values():
        if bound.prices is not None:
            out.update(bound.prices.digest([bound.spec]))
    return out

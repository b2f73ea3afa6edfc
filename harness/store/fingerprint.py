"""Run fingerprints: what must not change between a run and its resume.

The fingerprint covers the resolved config (minus keys that may change, such
as ``rounds`` to extend a run), the format's own module and its prompt code,
each role's model spec and the sha256 of each local model file. ``fingerprint.json`` keeps the parts, so
a mismatch can be reported key by key. The engine gathers the parts
(``harness.engine.fingerprint``); this module hashes, stores and compares them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from harness.schema import REDACTED, Config
from harness.store.rundir import write_atomic

# Keys that may differ on resume without changing what the run computes.
# ``chat`` names the seat a person plays; the seat's spec (human:you) is fingerprinted.
# ``budget`` only limits how far a run goes (raised on resume to continue one).
# ``prices`` is fingerprinted as the entries of the run's models (a ``prices`` part), not as paths.
MUTABLE_KEYS = (
    "rounds",
    "runs_root",
    "progress",
    "resume",
    "experiment_name",
    "run_name",
    "chat",
    "budget",
    "prices",
    "tracing",  # where a run's spans go, not what it computes
)
# Sections some formats read (``Format.sections``); left out of other formats' fingerprints.
OPTIONAL_SECTIONS = ("search",)
# How a search reaches its collection, not what it finds: free to change on resume.
SEARCH_TRANSPORT_KEYS = ("transport", "timeout_s", "cache_dir")
# How fast calls reach a provider, not what they ask: free to change on resume.
MODEL_TRANSPORT_KEYS = ("concurrency", "max_concurrency", "rpm", "tpm")
# Code moved out of a hashed module, or a declaration added to it, changing
# nothing a run does: each move's digest before it and after it. A run made
# before one or several moves resumes without ``force`` when its digest leads,
# move by move, to today's; any other edit changes the digest, and the run
# needs ``force`` again, as after any edit.
MOVED_CODE: dict[str, tuple[tuple[str, str], ...]] = {
    # issue 25: verify's checks left for harness.formats.grounded_checks and
    # .moderated_checks; then the Format's own flags (human_seats, probes, length_key)
    "prompts.harness.formats.grounded": (
        (
            "44fd5078515083e8778160a64ae019be03c604752254c88b7b6e9c12ec63ca43",
            "4d1abbbdc0469e4ff3261408dec6b468f45391bea97c53a59b5d7b2fb5706f75",
        ),
        (
            "4d1abbbdc0469e4ff3261408dec6b468f45391bea97c53a59b5d7b2fb5706f75",
            "06d7939a8636c3784a516a065d747566c4a7cb03461998377e00d0091d463eb1",
        ),
    ),
    "prompts.harness.formats.moderated": (
        (
            "2e77ab10787beecfeb038a82f4450203432889d92a6a38396980714af150d684",
            "81543a38e16b17f15c9830ab7e6b2a8bd2afd40c4e2dd6e3ff57039cd6c1724a",
        ),
        (
            "81543a38e16b17f15c9830ab7e6b2a8bd2afd40c4e2dd6e3ff57039cd6c1724a",
            "9a0cb761a6836ae7728ef8ae2af52991f2e540cce23d6d3a83cb443c45498da9",
        ),
    ),
    # issue 30: the no-persona switch (format.persona, default true); with the persona on,
    # a run's records are byte-identical to before (tests/test_drift_golden.py); then
    # issue 25's Format flags
    "prompts.harness.formats.drift": (
        (
            "3c139c8020df092fd4ef39381c1b818fc8a2a7eae148f81209d6c51f85ce0010",
            "926a249504ecdd19b75ec785b6bb62bdb2285f101885eb9d74b7b55844ae9922",
        ),
        (
            "926a249504ecdd19b75ec785b6bb62bdb2285f101885eb9d74b7b55844ae9922",
            "07b054eca2ef62a2e2bb8c6ccc15c90ef2cd115cff03e066771276742f917f26",
        ),
    ),
    "prompts.harness.agents.thinking": (
        (
            "fd85a2096a05f3f679ce0b3c73537724e4e2b4b26c96b9ea0a934cbdf49bddf3",
            "3ffdc2c7cdc11eac97490520dddbaba6667e068ed10c56110eff65fb432367a4",
        ),
    ),
    "prompts.harness.agents.human": (
        (
            "49892ebe4afeb376e06e1d1ce2063381923954a375741719214e0f4be1642401",
            "5b3c9eaef975f3b28ced5bb33c024df73a849210423834859f58b30819e277d7",
        ),
    ),
}


def moved(key: str, before: Any, after: Any) -> bool:
    """Whether ``before`` becomes ``after`` through ``key``'s recorded moves alone."""
    steps = dict(MOVED_CODE.get(key, ()))
    seen = {before}
    while before in steps and before != after:
        before = steps[before]
        if before in seen:  # a table that loops is a mistake, not a move
            return False
        seen.add(before)
    return before == after


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def module_file(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, f"no module {name}"
    return Path(spec.origin)


def digest(parts: dict[str, Any]) -> str:
    return sha256(json.dumps(parts, sort_keys=True, default=str).encode())


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys: ``{"llm": {"temperature": 0.7}}`` -> ``llm.temperature``."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def _defaults() -> dict[str, Any]:
    """Every config key at its default, flattened as ``config.<key>``."""
    return flatten({"config": dataclasses.asdict(Config())})


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable ``key: old -> new`` lines for every part that changed.

    A key the run's fingerprint lacks, now at its default, is no change: the
    key came into the config after the run was made, and the default is what
    the run did (``model.bad_citation_rate``: no bad citations)."""
    flat_old, flat_new, defaults = flatten(old), flatten(new), _defaults()
    lines = []
    for key in sorted(set(flat_old) | set(flat_new)):
        before, after = flat_old.get(key, "<absent>"), flat_new.get(key, "<absent>")
        if before == "<absent>" and key in defaults and after == defaults[key]:
            continue
        if before == "<absent>" and key.startswith("prices."):
            continue  # made before dollars were counted: the model's price was never part of it
        if before != after and moved(key, before, after):
            continue  # the same code, moved to another module
        # a key given on the command line at the start and read from the
        # environment on resume: redacted either way, and no change to the run
        if before in (REDACTED, None) and after in (REDACTED, None):
            continue
        if before != after:
            lines.append(f"{key}: {before!r} -> {after!r}")
    return lines


def write_fingerprint(run_dir: Path, parts: dict[str, Any]) -> None:
    payload = {"digest": digest(parts), "parts": parts}
    write_atomic(run_dir / "fingerprint.json", json.dumps(payload, indent=1, sort_keys=True))


def read_fingerprint(run_dir: Path) -> dict[str, Any]:
    parts: dict[str, Any] = json.loads((run_dir / "fingerprint.json").read_text())["parts"]
    return parts

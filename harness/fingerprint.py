"""Run fingerprints: what must not change between a run and its resume.

The fingerprint covers the resolved config (minus keys that may change, such
as ``rounds`` to extend a run), the prompt code, each role's model spec and
the sha256 of each local model file. ``fingerprint.json`` keeps the parts, so
a mismatch can be reported key by key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from harness.config import Config, redact
from harness.context import RoleModel
from harness.rundir import write_atomic

AGENTS_DIR = Path(__file__).resolve().parent / "agents"
# Keys that may differ on resume without changing what the run computes.
MUTABLE_KEYS = ("rounds", "runs_root", "progress", "resume", "experiment_name")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def components(cfg: Config, roles: dict[str, RoleModel]) -> dict[str, Any]:
    config = redact(dataclasses.asdict(cfg))
    for key in MUTABLE_KEYS:
        config.pop(key, None)
    files: dict[str, str] = {}
    for bound in roles.values():
        files.update({Path(p).name: sha for p, sha in bound.model.model_files().items()})
    return {
        "config": config,
        "prompts": {p.name: _sha(p.read_bytes()) for p in sorted(AGENTS_DIR.glob("*.py"))},
        "models": {role: bound.spec for role, bound in sorted(roles.items())},
        "model_files": files,
    }


def digest(parts: dict[str, Any]) -> str:
    return _sha(json.dumps(parts, sort_keys=True, default=str).encode())


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable ``key: old -> new`` lines for every part that changed."""
    flat_old, flat_new = _flatten(old), _flatten(new)
    lines = []
    for key in sorted(set(flat_old) | set(flat_new)):
        before, after = flat_old.get(key, "<absent>"), flat_new.get(key, "<absent>")
        if before != after:
            lines.append(f"{key}: {before!r} -> {after!r}")
    return lines


def write_fingerprint(run_dir: Path, parts: dict[str, Any]) -> None:
    payload = {"digest": digest(parts), "parts": parts}
    write_atomic(run_dir / "fingerprint.json", json.dumps(payload, indent=1, sort_keys=True))


def read_fingerprint(run_dir: Path) -> dict[str, Any]:
    parts: dict[str, Any] = json.loads((run_dir / "fingerprint.json").read_text())["parts"]
    return parts

"""What a run leaves on disk, and everything that reads or checks it: the
record types, append-only logs, run folders, snapshots, fingerprints, the
integrity checks behind ``harness.verify``, and the SQL index
(``python -m harness.store``). Imported on first use, so reading records
does not pay for the engine's imports."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "JsonlLog": "harness.store.memory",
    "RunMemory": "harness.store.memory",
    "SeatMemory": "harness.store.memory",
    "parse_record": "harness.store.records",
    "RunManifest": "harness.store.records",
    "SCHEMA_VERSION": "harness.store.records",
    "verify": "harness.store.integrity",
    "build_store": "harness.store.sql",
}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.store' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = [
    "JsonlLog",
    "RunManifest",
    "RunMemory",
    "SCHEMA_VERSION",
    "SeatMemory",
    "build_store",
    "parse_record",
    "verify",
]

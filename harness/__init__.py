"""drift-harness: a multi-model research harness for LLM drift experiments.

Public names are re-exported here but imported on first use, so reading run
folders (``harness.store.records``) does not pay for LangGraph's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Config": "harness.schema",
    "ConfigError": "harness.schema",
    "validate": "harness.formats",
    "Resolved": "harness.config",
    "resolve": "harness.config",  # what run_debate is given
    "ModelCallError": "harness.runtime.context",
    "RunContext": "harness.runtime.context",
    "RunResult": "harness.engine",
    "run_debate": "harness.engine",
    "JsonlLog": "harness.store.memory",
    "RunMemory": "harness.store.memory",
    "SeatMemory": "harness.store.memory",
    "ChatModel": "harness.models",
    "ModelRequest": "harness.models",
    "build_model": "harness.models",
    "SCHEMA_VERSION": "harness.store.records",
    "RunManifest": "harness.store.records",
    "parse_record": "harness.store.records",
    "resume_run": "harness.engine",
    "verify": "harness.formats.checks",
}

if TYPE_CHECKING:
    from harness.config import Resolved, resolve
    from harness.engine import RunResult, resume_run, run_debate
    from harness.formats import validate
    from harness.formats.checks import verify
    from harness.models import ChatModel, ModelRequest, build_model
    from harness.runtime.context import ModelCallError, RunContext
    from harness.schema import Config, ConfigError
    from harness.store.memory import JsonlLog, RunMemory, SeatMemory
    from harness.store.records import SCHEMA_VERSION, RunManifest, parse_record


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = [
    "ChatModel",
    "Config",
    "ConfigError",
    "JsonlLog",
    "ModelCallError",
    "ModelRequest",
    "RunContext",
    "Resolved",
    "RunManifest",
    "RunMemory",
    "RunResult",
    "SCHEMA_VERSION",
    "SeatMemory",
    "build_model",
    "parse_record",
    "resolve",
    "resume_run",
    "run_debate",
    "validate",
    "verify",
]

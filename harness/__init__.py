"""drift-harness: a multi-model research harness for LLM drift experiments.

Public names are re-exported here but imported on first use, so reading run
folders (``harness.records``) does not pay for LangGraph's import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Config": "harness.config",
    "ConfigError": "harness.config",
    "validate": "harness.config",
    "ModelCallError": "harness.context",
    "RunContext": "harness.context",
    "RunResult": "harness.engine",
    "run_debate": "harness.engine",
    "JsonlLog": "harness.memory",
    "RunMemory": "harness.memory",
    "TeamMemory": "harness.memory",
    "ChatModel": "harness.models",
    "ModelRequest": "harness.models",
    "build_model": "harness.models",
    "SCHEMA_VERSION": "harness.records",
    "RunManifest": "harness.records",
    "parse_record": "harness.records",
    "resume_run": "harness.resume",
    "verify": "harness.verify",
}

if TYPE_CHECKING:
    from harness.config import Config, ConfigError, validate
    from harness.context import ModelCallError, RunContext
    from harness.engine import RunResult, run_debate
    from harness.memory import JsonlLog, RunMemory, TeamMemory
    from harness.models import ChatModel, ModelRequest, build_model
    from harness.records import SCHEMA_VERSION, RunManifest, parse_record
    from harness.resume import resume_run
    from harness.verify import verify


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
    "RunManifest",
    "RunMemory",
    "RunResult",
    "SCHEMA_VERSION",
    "TeamMemory",
    "build_model",
    "parse_record",
    "resume_run",
    "run_debate",
    "validate",
    "verify",
]

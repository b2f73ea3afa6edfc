"""drift-harness: a multi-model research harness for LLM drift experiments."""

from harness.config import Config, ConfigError, validate
from harness.context import ModelCallError, RunContext
from harness.engine import RunResult, run_debate
from harness.memory import JsonlLog, RunMemory, TeamMemory
from harness.models import ChatModel, ModelRequest, build_model
from harness.records import SCHEMA_VERSION, RunManifest, parse_record

__all__ = [
    "SCHEMA_VERSION",
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
    "TeamMemory",
    "build_model",
    "parse_record",
    "run_debate",
    "validate",
]

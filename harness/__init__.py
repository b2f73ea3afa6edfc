"""drift-harness: a multi-model research harness for LLM drift experiments.

Public names are re-exported here but imported on first use, so reading run
folders (``harness.store.records``) does not pay for LangGraph's import.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import TracebackType
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


def _command() -> str | None:
    """The project command this process runs (``python -m harness.run``, ``drift-sweep``,
    ``python -m analysis``), or None: a library user's process, a test's."""
    argv = list(getattr(sys, "orig_argv", []))
    for i, arg in enumerate(argv):
        module = argv[i + 1] if arg == "-m" and i + 1 < len(argv) else arg[2:] if arg[:2] == "-m" else ""
        if module:
            return f"python -m {module}" if module.partition(".")[0] in ("harness", "analysis") else None
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return script if script.startswith("drift-") else None


def _interrupted(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    """Ctrl-C that no command's handler caught (its first second or two import LangGraph
    and Hydra composes, before any is set) ends in one line, not a page of import
    frames; Python still exits as killed by SIGINT (status 130 in a shell)."""
    if issubclass(kind, KeyboardInterrupt):
        print("error: interrupted (Ctrl-C)", file=sys.stderr)
        return
    _PREVIOUS_HOOK(kind, exc, tb)


_COMMAND = _command()
_PREVIOUS_HOOK = sys.excepthook
if _COMMAND is not None:
    sys.excepthook = _interrupted


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

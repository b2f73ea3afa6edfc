"""The engine: run a format's graph into a run folder (``execute``), resume
one (``resume``), and the contexts its nodes and agents work in
(``context``). Names are imported on first use: the formats import the
engine's context while the engine imports the formats."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AgentContext": "harness.engine.context",
    "ModelCallError": "harness.engine.context",
    "RoleModel": "harness.engine.calls",
    "RunContext": "harness.engine.context",
    "ModelFactory": "harness.engine.execute",
    "RunResult": "harness.engine.execute",
    "build_roles": "harness.engine.execute",
    "execute": "harness.engine.execute",
    "preflight": "harness.engine.execute",
    "run_debate": "harness.engine.execute",
    "ResumeError": "harness.engine.resuming",
    "resume_run": "harness.engine.resuming",
}

if TYPE_CHECKING:
    from harness.engine.calls import RoleModel
    from harness.engine.context import AgentContext, ModelCallError, RunContext
    from harness.engine.execute import ModelFactory, RunResult, build_roles, execute, preflight, run_debate
    from harness.engine.resuming import ResumeError, resume_run


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = [
    "AgentContext",
    "ModelCallError",
    "ModelFactory",
    "ResumeError",
    "RoleModel",
    "RunContext",
    "RunResult",
    "build_roles",
    "execute",
    "preflight",
    "resume_run",
    "run_debate",
]

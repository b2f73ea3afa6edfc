"""The engine, above the formats: from a resolved config to a finished run
folder (``execute``: ``run_debate``), a resume of one (``resuming``), the
run's fingerprint parts (``fingerprint``) and its progress bar
(``progress``). What the format's nodes and agents work in is
``harness.runtime``, below the formats."""

# not ``execute``: the function would hide the module of that name
from harness.engine.execute import ModelFactory, RunResult, build_roles, preflight, run_debate
from harness.engine.resuming import ResumeError, resume_run

__all__ = [
    "ModelFactory",
    "ResumeError",
    "RunResult",
    "build_roles",
    "preflight",
    "resume_run",
    "run_debate",
]

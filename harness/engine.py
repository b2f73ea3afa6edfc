"""The engine: from a validated config to a finished run folder.

``run_debate`` is the programmatic API (tests and notebooks call it); the
command line in ``harness.run`` is a thin Hydra wrapper around it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config import ROLES, Config, ConfigError
from harness.context import ModelCallError, RoleModel, RunContext
from harness.formats import FORMATS
from harness.memory import RunMemory
from harness.models.base import ChatModel
from harness.models.registry import build_model, check_model
from harness.progress import Progress
from harness.records import ErrorInfo, HistoryEntry, RunManifest, utcnow
from harness.rundir import (
    create_run_dir,
    git_commit,
    package_versions,
    run_dir_name,
    write_config,
    write_manifest,
)


@dataclass
class RunResult:
    run_dir: Path
    manifest: RunManifest
    final_state: dict[str, Any]


def preflight(cfg: Config) -> None:
    """Everything that can be checked before a folder is made or a model loaded."""
    if cfg.format.name not in FORMATS:
        raise ConfigError(
            f"format.name: unknown format {cfg.format.name!r}; known: {', '.join(sorted(FORMATS))}"
        )
    for role in ROLES:
        model_cfg, _, _ = cfg.role_model(role)
        key = "model.spec" if cfg.roles[role].spec is None else f"roles.{role}.spec"
        check_model(model_cfg, key)


def build_roles(cfg: Config) -> dict[str, RoleModel]:
    """One model object per distinct model config, shared by the roles using it."""
    built: dict[str, ChatModel] = {}
    roles = {}
    for role in ROLES:
        model_cfg, temperature, max_tokens = cfg.role_model(role)
        key = repr(model_cfg)
        if key not in built:
            built[key] = build_model(model_cfg)
        roles[role] = RoleModel(role, built[key], temperature, max_tokens)
    return roles


def new_manifest(cfg: Config, run_dir: Path, roles: dict[str, RoleModel]) -> RunManifest:
    files: dict[str, str] = {}
    for bound in roles.values():
        files.update(bound.model.model_files())
    return RunManifest(
        run_id=run_dir.name,
        format=cfg.format.name,
        seed=cfg.seed,
        topic=cfg.topic.text if not cfg.topic.generate else None,
        git_commit=git_commit(),
        packages=package_versions(),
        model_files=files,
        model_specs={role: bound.spec for role, bound in roles.items()},
        history=[HistoryEntry(action="start")],
    )


def drive(graph: Any, ctx: RunContext, state: dict[str, Any], steps: int, run_dir: Path) -> dict[str, Any]:
    """Stream the graph to its end, keeping the progress bar current."""
    config = {
        "recursion_limit": steps,
        "run_name": f"{ctx.cfg.format.name}:{run_dir.name}",
        "tags": ["drift-harness", ctx.cfg.format.name],
        "metadata": {"run_dir": str(run_dir), "experiment": ctx.cfg.experiment_name},
    }
    with Progress(ctx.cfg.rounds, enabled=ctx.cfg.progress) as progress:
        current = state
        ctx.on_step = lambda label: progress.step(current["round"], label)
        for values in graph.stream(state, config, stream_mode="values"):
            current = values
            progress.round_done(ctx.counts.rounds_completed)
    return current


def run_debate(cfg: Config, raw_cfg: dict[str, Any]) -> RunResult:
    """Run one debate end to end and archive it in a new run folder."""
    preflight(cfg)
    roles = build_roles(cfg)
    run_dir = create_run_dir(Path(cfg.runs_root), run_dir_name(cfg))
    write_config(run_dir, raw_cfg)
    manifest = new_manifest(cfg, run_dir, roles)
    write_manifest(run_dir, manifest)
    ctx = RunContext(cfg=cfg, memory=RunMemory(run_dir), roles=roles)
    build_graph, initial_state, max_steps = FORMATS[cfg.format.name]
    state: dict[str, Any] = dict(initial_state("" if cfg.topic.generate else cfg.topic.text))
    started = time.perf_counter()
    try:
        state = drive(build_graph(ctx), ctx, state, max_steps(ctx), run_dir)
        manifest.status, manifest.stop_reason = "completed", state.get("stop_reason")
        manifest.history.append(HistoryEntry(action="complete", detail=manifest.stop_reason or ""))
    except ModelCallError as exc:
        manifest.status, manifest.error = "failed", exc.info
        manifest.history.append(HistoryEntry(action="fail", detail=str(exc)))
        raise
    except KeyboardInterrupt:
        manifest.status = "interrupted"
        manifest.error = ErrorInfo(kind="fatal", type="KeyboardInterrupt", message="interrupted")
        manifest.history.append(HistoryEntry(action="interrupt"))
        raise
    finally:
        manifest.topic = state.get("topic") or manifest.topic
        manifest.counts = ctx.counts
        manifest.ended_at = utcnow()
        manifest.wall_s = round(time.perf_counter() - started, 3)
        write_manifest(run_dir, manifest)
    return RunResult(run_dir, manifest, state)

"""The engine: from a validated config to a finished run folder.

``run_debate`` starts a run; ``harness.resume`` continues one; both end in
``execute``, which drives the format's graph, snapshots every round, and
records how the run ended (completed, failed, interrupted) in the manifest.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config import Config, ConfigError, ModelConfig
from harness.engine.budget import Budget, Budgets, sweep_budget
from harness.engine.calls import RoleModel
from harness.engine.context import ModelCallError, RunContext
from harness.engine.fingerprint import components
from harness.engine.interrupt import RunStopped, StopOnSignal
from harness.engine.otel import traced_run
from harness.engine.progress import Progress
from harness.formats import Format, get_format, max_tokens_key
from harness.models.base import ChatModel
from harness.models.prices import PriceTable, load_prices
from harness.models.registry import build_model, check_model
from harness.models.retry import error_info
from harness.store.fingerprint import digest, write_fingerprint
from harness.store.memory import RunMemory
from harness.store.reader import ledger
from harness.store.records import FOLDER_VERSION, ErrorInfo, HistoryEntry, RunManifest, Snapshot, utcnow
from harness.store.rundir import (
    RunLock,
    create_run_dir,
    full_disk_in_one_line,
    git_commit,
    package_versions,
    run_dir_name,
    write_config,
    write_manifest,
)
from harness.store.snapshot import Snapshotter


@dataclass
class RunResult:
    run_dir: Path
    manifest: RunManifest
    final_state: dict[str, Any]
    rounds: int  # rounds the config asks for
    note: str = ""  # e.g. why a resume had nothing to do


# Builds a model object from one role's model config. Tests and benchmarks
# pass their own (a wrapper, a fake) instead of patching the registry.
ModelFactory = Callable[[ModelConfig], ChatModel]


def preflight(cfg: Config) -> Format:
    """Everything that can be checked before a folder is made or a model loaded."""
    fmt = get_format(cfg.format.name)
    for role in fmt.model_roles(cfg):
        model_cfg, _, _ = cfg.role_model(role)
        override = cfg.roles.get(role)
        key = f"roles.{role}.spec" if override is not None and override.spec is not None else "model.spec"
        own_knobs = override is not None and (override.reasoning_effort, override.thinking_budget) != (
            None,
            None,
        )
        check_model(model_cfg, key, f"roles.{role}" if own_knobs else "model")
    check_reply_budgets(cfg, fmt)
    check_prices(cfg, fmt)
    if fmt.preflight is not None:
        fmt.preflight(cfg)
    return fmt


def check_prices(cfg: Config, fmt: Format) -> PriceTable:
    """The price table loads, and a dollar budget has a price for every model
    it would be charged for: fail closed, naming the model and the key to set."""
    table = load_prices(cfg.prices.file, cfg.prices.models)
    limits = [k for k in ("usd", "sweep_usd") if getattr(cfg.budget, k) is not None]
    for role in fmt.model_roles(cfg) if limits else ():
        spec = cfg.role_model(role)[0].spec
        if not table.known(spec):
            key = spec.replace(":", "\\:")  # Hydra's override grammar escapes the colon in a key
            raise ConfigError(
                f"budget.{limits[0]}: {spec!r} (role {role}) has no price; set "
                f"prices.models={{{key}:{{input:<$/1M>,output:<$/1M>}}}} or prices.file (docs/costs.md)"
            )
    return table


def check_reply_budgets(cfg: Config, fmt: Format) -> None:
    """A reply budget too small for the shortest valid reply fails every call:
    refuse it before anything runs, naming the least the format needs."""
    least, schema = fmt.least_reply_tokens()
    for role in fmt.model_roles(cfg):
        _, _, max_tokens = cfg.role_model(role)
        if max_tokens < least:
            raise ConfigError(
                f"{max_tokens_key(cfg, role)}: {max_tokens} tokens cannot hold a valid {schema} reply; "
                f"format {fmt.name} needs at least {least}"
            )


def build_roles(cfg: Config, build: ModelFactory = build_model) -> dict[str, RoleModel]:
    """One model object per distinct model config, shared by the roles using it."""
    built: dict[str, ChatModel] = {}
    roles = {}
    prices = load_prices(cfg.prices.file, cfg.prices.models)
    for role in get_format(cfg.format.name).model_roles(cfg):
        model_cfg, temperature, max_tokens = cfg.role_model(role)
        key = repr(model_cfg)
        if key not in built:
            built[key] = build(model_cfg)
        roles[role] = RoleModel(role, built[key], temperature, max_tokens, prices)
    return roles


def run_budgets(cfg: Config, run_dir: Path) -> Budgets:
    """The run's own budget, charged with what its kept replies already cost
    (a resume continues the count), and its sweep's, if it runs in one."""
    held = []
    if cfg.budget.usd is not None or cfg.budget.tokens is not None:
        paid = ledger(run_dir)
        spent = paid.input_tokens + paid.output_tokens
        held.append(Budget("budget.", cfg.budget.usd, cfg.budget.tokens, paid.cost_usd or 0.0, spent))
    if (shared := sweep_budget()) is not None and shared.limited:
        held.append(shared)
    return Budgets(tuple(held))


def new_manifest(cfg: Config, run_dir: Path, roles: dict[str, RoleModel]) -> RunManifest:
    files: dict[str, str] = {}
    for bound in roles.values():
        files.update(bound.model.model_files())
    return RunManifest(
        folder_version=FOLDER_VERSION,
        run_id=run_dir.name,
        format=cfg.format.name,
        seed=cfg.seed,
        topic=cfg.topic.text if not cfg.topic.generate else None,
        git_commit=git_commit(),
        packages=package_versions(),
        model_files=files,
        model_specs={role: bound.spec for role, bound in roles.items()},
        layout=get_format(cfg.format.name).layout(cfg),
        history=[HistoryEntry(action="start")],
    )


def open_tools(fmt: Format, ctx: RunContext) -> AbstractContextManager[Any]:
    """The format's run-long tools (a search session), or nothing."""
    return fmt.open_tools(ctx.cfg, ctx.events) if fmt.open_tools is not None else nullcontext()


def rounds_completed(state: dict[str, Any], rounds: int) -> int:
    return min(state["round"] - 1, rounds)


# A LangGraph stream remembers the id of every task it ran (about 180 B a
# step), so one stream over 10,000 rounds grows by megabytes. Breaking off at a
# snapshot boundary and streaming again from that state is what a resume does,
# so it cannot change the run; it keeps memory flat however long the run is.
RESTREAM_ROUNDS = 500


def drive(
    graph: Any, ctx: RunContext, state: dict[str, Any], snapshots: Snapshotter, stop: StopOnSignal
) -> dict[str, Any]:
    """Stream the graph until it ends or a stop is requested; snapshot each round.

    ``state`` is updated in place as the graph moves.
    """
    cfg = ctx.cfg
    fmt = get_format(cfg.format.name)
    total = fmt.planned_rounds(cfg)
    config = {
        "recursion_limit": fmt.max_steps(cfg),
        "run_name": f"{cfg.format.name}:{ctx.memory.run_dir.name}",
        "tags": ["drift-harness", cfg.format.name],
        "metadata": {"run_dir": str(ctx.memory.run_dir), "experiment": cfg.experiment_name},
    }
    with Progress(total, enabled=cfg.progress) as progress:
        progress.round_done(rounds_completed(state, total))
        ctx.step.fn = lambda label: progress.step(state["round"], label)
        if state["done"]:  # killed after its last snapshot: nothing is left to run, only to record
            return state
        moved = lambda: progress.round_done(rounds_completed(state, total))  # noqa: E731
        while stream(graph, config, state, snapshots, moved, stop):
            pass
    return state


def stream(
    graph: Any,
    config: dict[str, Any],
    state: dict[str, Any],
    snapshots: Snapshotter,
    moved: Callable[[], None],
    stop: StopOnSignal,
) -> bool:
    """One stream of the graph from ``state``; True when it broke off at a
    snapshot boundary to be streamed again, False when it ended or was stopped."""
    start = snapshots.last_round
    for values in graph.stream(dict(state), config, stream_mode="values"):
        state.update(values)  # in place, so a caller sees the latest state even on error
        snapshots.observe(state)
        moved()
        if stop.requested:
            return False
        if snapshots.last_round - start >= RESTREAM_ROUNDS and not state["done"]:
            return True
    return False


def run_graph(fmt: Format, ctx: RunContext, state: dict[str, Any], snapshots: Snapshotter) -> str | None:
    """Drive the format's graph with its tools open (``state`` moves in place);
    why it stopped early (a signal, a person's ``/quit``), or None."""
    with StopOnSignal() as stop:
        try:
            with open_tools(fmt, ctx) as ctx.tools:
                drive(fmt.build_graph(ctx), ctx, state, snapshots, stop)
        except RunStopped as exc:  # as resumable as a signal
            return str(exc)
    return stop.requested


def execute(
    cfg: Config,
    run_dir: Path,
    roles: dict[str, RoleModel],
    manifest: RunManifest,
    state: dict[str, Any],
    base: Snapshot | None = None,
    resumed: str | None = None,
    forced: bool = False,
) -> RunResult:
    """Run (or continue, from snapshot ``base``) the graph in ``run_dir`` and
    record how it ended. ``resumed`` describes a resume, recorded as an event;
    ``forced``: one past a changed fingerprint, whose kept replies replay only
    for the very requests they answered."""
    fmt = get_format(cfg.format.name)
    memory = RunMemory(
        run_dir, fmt.layout(cfg), start=base.window if base else None, keep_rounds=fmt.window_rounds(cfg)
    )
    ctx = RunContext(
        cfg=cfg,
        memory=memory,
        roles=roles,
        seats=fmt.seat_list(cfg),
        forced=forced,
        budgets=run_budgets(cfg, run_dir),
    )
    if resumed is not None:
        ctx.events.emit(
            "resume",
            round_=state["round"],
            team=None,
            role="resume",
            n=len(manifest.history),
            detail=resumed,
        )
    fingerprint = digest(components(cfg, roles, fmt))
    snapshots = Snapshotter(
        run_dir,
        memory,
        seed=cfg.seed,
        fingerprint=fingerprint,
        window_rounds=fmt.window_rounds(cfg),
        base=base,
    )
    started, total = time.perf_counter(), fmt.planned_rounds(cfg)
    manifest.status, manifest.error, manifest.ended_at = "running", None, None
    # a full disk, in a node or in a manifest write, ends in one line
    with full_disk_in_one_line(run_dir):
        write_manifest(run_dir, manifest)
        try:
            with traced_run(cfg, manifest, resumed):  # the run's OpenTelemetry trace, if tracing.otel
                stopped = run_graph(fmt, ctx, state, snapshots)
            finished = state["done"] or rounds_completed(state, total) >= total
            if finished:
                manifest.status, manifest.stop_reason = "completed", state.get("stop_reason")
                manifest.history.append(HistoryEntry(action="complete", detail=manifest.stop_reason or ""))
            else:
                manifest.status, manifest.stop_reason = "interrupted", stopped
                manifest.history.append(HistoryEntry(action="interrupt", detail=stopped or ""))
        except ModelCallError as exc:
            manifest.status, manifest.error = "failed", exc.info
            manifest.history.append(HistoryEntry(action="fail", detail=str(exc)))
            exc.run_dir = run_dir  # the command says how to resume it
            raise
        except KeyboardInterrupt:
            manifest.status = "interrupted"
            manifest.error = ErrorInfo(kind="fatal", type="KeyboardInterrupt", message="interrupted")
            manifest.history.append(HistoryEntry(action="interrupt", detail="second signal"))
            raise
        except Exception as exc:  # a bug or an unexpected backend error: stored as data
            manifest.status, manifest.error = "failed", error_info(exc)
            manifest.history.append(HistoryEntry(action="fail", detail=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            manifest.topic = state.get("topic") or manifest.topic
            manifest.counts = snapshots.totals()
            manifest.counts.rounds_completed = rounds_completed(state, total)
            manifest.ended_at = utcnow()
            manifest.wall_s = round(manifest.wall_s + time.perf_counter() - started, 3)
            write_manifest(run_dir, manifest)
    return RunResult(run_dir, manifest, state, total)


def run_debate(cfg: Config, raw_cfg: dict[str, Any], *, build: ModelFactory = build_model) -> RunResult:
    """Run one debate end to end and archive it in a new run folder.

    ``raw_cfg`` is what ``config.yaml`` keeps; the topic and the format's
    options are written as the run used them (a file given for the motion,
    the framework, the batch of topics or a role's prompt is inlined), so a
    resume never reads the file again.
    """
    fmt = preflight(cfg)
    roles = build_roles(cfg, build)
    # the validated topic and format: files given for a topic or a role's prompt are inlined
    kept = {**raw_cfg, "topic": dataclasses.asdict(cfg.topic), "format": dataclasses.asdict(cfg.format)}
    if not cfg.probes.enabled:  # a run that probes nothing keeps no probe set (it reads as the default)
        kept.pop("probes", None)

    def fill(folder: Path) -> None:
        write_config(folder, kept)
        write_fingerprint(folder, components(cfg, roles, fmt))

    with full_disk_in_one_line(None):  # None: no folder was made
        run_dir = create_run_dir(Path(cfg.runs_root), cfg.run_name or run_dir_name(cfg), fill)
    with RunLock(run_dir):
        manifest = new_manifest(cfg, run_dir, roles)
        return execute(cfg, run_dir, roles, manifest, fmt.initial_state(cfg))

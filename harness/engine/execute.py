"""The engine: from a validated config to a finished run folder.

``run_debate`` starts a run from a ``Resolved`` config (``harness.config.resolve``:
the format and each role's model settings, found once and passed down);
``harness.resume`` continues one; both end in ``execute``, which drives the
format's graph and snapshots every round, inside ``recording``, which writes
how the run ended (completed, failed, interrupted) in the manifest.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from harness.config import Resolved
from harness.engine.fingerprint import components
from harness.engine.interviews import Interviews
from harness.engine.progress import Progress
from harness.formats import Format, max_tokens_key
from harness.models.base import ChatModel, waits
from harness.models.prices import PriceTable, load_prices
from harness.models.registry import build_model, check_model
from harness.models.retry import error_info
from harness.runtime.budget import Budget, Budgets, sweep_budget
from harness.runtime.calls import RoleModel
from harness.runtime.context import ModelCallError, RunContext
from harness.runtime.interrupt import RunStopped, SecondSignal, StopOnSignal
from harness.runtime.otel import traced_run
from harness.schema import Config, ConfigError, ModelConfig
from harness.slots import alone
from harness.store.fingerprint import digest, write_fingerprint
from harness.store.memory import RunMemory
from harness.store.reader import ledger
from harness.store.records import (
    FOLDER_VERSION,
    ErrorInfo,
    HistoryEntry,
    RunManifest,
    RunStatus,
    Snapshot,
    utcnow,
)
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


def preflight(run: Resolved) -> PriceTable:
    """Everything that can be checked before a folder is made or a model loaded;
    the price table, which ``build_roles`` charges calls by."""
    cfg = run.cfg
    for role, (model_cfg, _, _) in run.models.items():
        override = cfg.roles.get(role)
        key = f"roles.{role}.spec" if override is not None and override.spec is not None else "model.spec"
        own_knobs = override is not None and (override.reasoning_effort, override.thinking_budget) != (
            None,
            None,
        )
        check_model(model_cfg, key, f"roles.{role}" if own_knobs else "model")
    check_reply_budgets(run)
    table = check_prices(run)
    if run.fmt.preflight is not None:
        run.fmt.preflight(cfg)
    return table


def check_prices(run: Resolved) -> PriceTable:
    """The price table loads, and a dollar budget has a price for every model
    it would be charged for: fail closed, naming the model and the key to set."""
    cfg = run.cfg
    table = load_prices(cfg.prices.file, cfg.prices.models)
    limits = [k for k in ("usd", "sweep_usd") if getattr(cfg.budget, k) is not None]
    for role, (model_cfg, _, _) in run.models.items() if limits else ():
        spec = model_cfg.spec
        if not table.known(spec):
            key = spec.replace(":", "\\:")  # Hydra's override grammar escapes the colon in a key
            raise ConfigError(
                f"budget.{limits[0]}: {spec!r} (role {role}) has no price; set "
                f"prices.models={{{key}:{{input:<$/1M>,output:<$/1M>}}}} or prices.file (docs/costs.md)"
            )
    return table


# each format's least reply budget: its reply schemas' JSON schemas, built once a process
# (1.5 ms a run, paid by every cell of a sweep on the driver's one GIL)
_LEAST_REPLY: dict[tuple[str, tuple[str, ...]], tuple[int, str]] = {}


def check_reply_budgets(run: Resolved) -> None:
    """A reply budget too small for the shortest valid reply fails every call:
    refuse it before anything runs, naming the least the format needs."""
    key = (run.fmt.name, tuple(run.fmt.prompt_modules))
    if (kept := _LEAST_REPLY.get(key)) is None:
        kept = _LEAST_REPLY[key] = run.fmt.least_reply_tokens()
    least, schema = kept
    for role, (_, _, max_tokens) in run.models.items():
        if max_tokens < least:
            raise ConfigError(
                f"{max_tokens_key(run.cfg, role)}: {max_tokens} tokens cannot hold a valid {schema} reply; "
                f"format {run.fmt.name} needs at least {least}"
            )


def build_roles(run: Resolved, prices: PriceTable, build: ModelFactory = build_model) -> dict[str, RoleModel]:
    """One model object per distinct model config, shared by the roles using it."""
    built: dict[str, ChatModel] = {}
    roles = {}
    for role, (model_cfg, temperature, max_tokens) in run.models.items():
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
    if (shared := sweep_budget()) is not None:  # with no limit too: ctl may set one while the run goes on
        held.append(shared)
    return Budgets(tuple(held))


def new_manifest(run: Resolved, run_dir: Path, roles: dict[str, RoleModel]) -> RunManifest:
    cfg = run.cfg
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
        layout=run.fmt.layout(cfg),
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
    fmt: Format, ctx: RunContext, state: dict[str, Any], snapshots: Snapshotter, stop: StopOnSignal
) -> dict[str, Any]:
    """Stream the format's graph until it ends or a stop is requested; snapshot each round.

    ``state`` is updated in place as the graph moves.
    """
    cfg = ctx.cfg
    graph = fmt.build_graph(ctx)
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
        interviews = Interviews(fmt, ctx)
        while stream(graph, config, state, snapshots, moved, stop, interviews):
            pass
    return state


def stream(
    graph: Any,
    config: dict[str, Any],
    state: dict[str, Any],
    snapshots: Snapshotter,
    moved: Callable[[], None],
    stop: StopOnSignal,
    interviews: Interviews,
) -> bool:
    """One stream of the graph from ``state``; True when it broke off at a
    snapshot boundary to be streamed again, False when it ended or was stopped.
    A round's checkpoint interviews are asked after its last step, before its snapshot.
    A stop is seen after every node: one that changed no state (a panel's analysts write
    only records) yields no values, only its update, so both are streamed."""
    start = snapshots.last_round
    for mode, values in graph.stream(dict(state), config, stream_mode=["updates", "values"]):
        if mode == "updates":  # values follow a node that changed the state: the stop is seen there
            if stop.requested and not any(values.values()):
                return False
            continue
        state.update(values)  # in place, so a caller sees the latest state even on error
        if (completed := state["round"] - 1) > snapshots.last_round:
            interviews.after(completed, state)
        snapshots.observe(state)
        moved()
        if stop.requested:
            return False
        if snapshots.last_round - start >= RESTREAM_ROUNDS and not state["done"]:
            return True
    return False


# CPython collects its young objects every 700 container allocations, and the
# middle generation every 10 of those. A model call makes tens of thousands
# (records, JSON, LangGraph's per-step dicts), nearly all freed by reference
# counting; with 64 cells in flight the collections took 0.39 s of CPU over
# 1,152 calls, 0.19 s at these thresholds (timed by gc.callbacks). Cyclic
# garbage waits longer before it is found: megabytes at most.
GC_DEFAULT = (700, 10, 10)
GC_RUNNING = (10_000, 20, 20)


def collect_less() -> None:
    """Raise the collector's thresholds to ``GC_RUNNING``, unless someone set them."""
    if gc.get_threshold() == GC_DEFAULT:
        gc.set_threshold(*GC_RUNNING)


def run_graph(fmt: Format, ctx: RunContext, state: dict[str, Any], snapshots: Snapshotter) -> str | None:
    """Drive the format's graph with its tools open (``state`` moves in place);
    why it stopped early (a signal, a person's ``/quit``), or None."""
    collect_less()
    with StopOnSignal() as stop:
        try:
            with open_tools(fmt, ctx) as ctx.tools:
                drive(fmt, ctx, state, snapshots, stop)
        except RunStopped as exc:  # as resumable as a signal
            return str(exc)
    return stop.requested


@dataclass(frozen=True)
class Resumption:
    """How a resume continues a run: from snapshot ``base`` (None: from the
    start), described by ``detail`` (recorded as an event; None: a fork's first
    run from its copied snapshot, which is no resume); ``forced``: past a
    changed fingerprint, whose kept replies replay only for the very requests
    they answered."""

    base: Snapshot | None
    detail: str | None
    forced: bool = False


def execute(
    run: Resolved,
    run_dir: Path,
    roles: dict[str, RoleModel],
    manifest: RunManifest,
    state: dict[str, Any],
    resumption: Resumption | None = None,
    fingerprint: str | None = None,
) -> RunResult:
    """Run (or continue, as ``resumption`` says) the graph in ``run_dir``;
    ``recording`` writes how it ended in the manifest. ``fingerprint``: the
    digest of the run's ``components``, when the caller has just made them."""
    cfg, fmt = run.cfg, run.fmt
    base, detail = (resumption.base, resumption.detail) if resumption else (None, None)
    ctx = run_context(run, run_dir, roles, base, forced=resumption is not None and resumption.forced)
    if detail is not None:
        ctx.events.emit(
            "resume", round_=state["round"], team=None, role="resume", n=len(manifest.history), detail=detail
        )
    record_set_aside(ctx, state["round"], len(manifest.history))
    fingerprint = fingerprint or digest(components(cfg, roles, fmt))
    snapshots = Snapshotter(
        run_dir,
        ctx.memory,
        seed=cfg.seed,
        fingerprint=fingerprint,
        window_rounds=fmt.window_rounds(cfg),
        base=base,
    )
    total = fmt.planned_rounds(cfg)
    # a sweep's cell whose models never wait runs alone: it has nothing to lend (harness.slots)
    never_waits = not any(waits(bound.model) for bound in roles.values())
    with alone(never_waits), recording(run_dir, manifest, state, snapshots, total):
        with traced_run(cfg, manifest, detail):  # the run's OpenTelemetry trace, if tracing.otel
            stopped = run_graph(fmt, ctx, state, snapshots)
        ended(manifest, state, total, stopped)
    return RunResult(run_dir, manifest, state, total, set_aside(ctx.memory))


def set_aside(memory: RunMemory) -> str:
    """One line naming each log whose torn last line (a crash mid-write) opening
    ``memory`` moved to ``<log>.quarantine``, and how the line began; or ''."""
    return "; ".join(aside(name, torn) for name, (torn, *_) in sorted(memory.quarantined().items()))


def aside(name: str, torn: str) -> str:
    """What was set aside from log ``name``: where it went and how the line began."""
    return f"{name}: torn last line moved to {name}.quarantine (set aside: {torn[:40]!r}{'…' * (len(torn) > 40)})"


def record_set_aside(ctx: RunContext, round_: int, n: int) -> None:
    """One ``quarantine`` event per log whose torn last line opening the run's memory
    set aside (``n``: the manifest's history length, as the resume event's). Written
    after the memory opened, so the events log, if it was torn, is already clean."""
    for i, (name, (torn, *_)) in enumerate(sorted(ctx.memory.quarantined().items())):
        detail = aside(name, torn)
        ctx.events.emit(
            "quarantine",
            round_=round_,
            team=None,
            role="resume",
            iteration=i,
            n=n,
            detail=detail,
            log=name,
            began=torn[:40],
        )


def run_context(
    run: Resolved, run_dir: Path, roles: dict[str, RoleModel], base: Snapshot | None, forced: bool
) -> RunContext:
    """What the format's nodes run with; the memory starts from ``base``'s window (None: the start)."""
    cfg, fmt = run.cfg, run.fmt
    memory = RunMemory(
        run_dir,
        fmt.layout(cfg),
        fsync=cfg.memory.fsync == "record",  # "round": the snapshot syncs them (Snapshotter.observe)
        start=base.window if base else None,
        keep_rounds=fmt.window_rounds(cfg),
    )
    return RunContext(
        cfg=cfg,
        memory=memory,
        roles=roles,
        seats=fmt.seat_list(cfg),
        forced=forced,
        budgets=run_budgets(cfg, run_dir),
        from_round=base.round if base else 0,
    )


def ended(manifest: RunManifest, state: dict[str, Any], total: int, stopped: str | None) -> None:
    """A graph that returned finished the run, or was stopped early (resumable)."""
    if state["done"] or rounds_completed(state, total) >= total:
        manifest.stop_reason = state.get("stop_reason")
        mark(manifest, "completed", "complete", manifest.stop_reason or "")
    else:
        manifest.stop_reason = stopped
        mark(manifest, "interrupted", "interrupt", stopped or "")


def mark(
    manifest: RunManifest,
    status: RunStatus,
    action: Literal["complete", "fail", "interrupt"],
    detail: str,
    error: ErrorInfo | None = None,
) -> None:
    """The run's status and error, and the history entry that says so."""
    manifest.status, manifest.error = status, error
    manifest.history.append(HistoryEntry(action=action, detail=detail))


@contextmanager
def recording(
    run_dir: Path, manifest: RunManifest, state: dict[str, Any], snapshots: Snapshotter, total: int
) -> Iterator[None]:
    """The manifest says the run is running while the body runs, then how it
    ended (a failure stored as data and raised on), its counts and wall time."""
    started = time.perf_counter()
    manifest.status, manifest.error, manifest.ended_at = "running", None, None
    # a full disk, in a node or in a manifest write, ends in one line
    with full_disk_in_one_line(run_dir):
        write_manifest(run_dir, manifest)
        try:
            yield
        except ModelCallError as exc:
            mark(manifest, "failed", "fail", str(exc), exc.info)
            exc.run_dir = run_dir  # the command says how to resume it
            raise
        except KeyboardInterrupt as exc:
            error = ErrorInfo(kind="fatal", type="KeyboardInterrupt", message="interrupted")
            detail = (
                "second signal" if isinstance(exc, SecondSignal) else "Ctrl-C before the stop handler was set"
            )
            mark(manifest, "interrupted", "interrupt", detail, error)
            raise
        except Exception as exc:  # a bug or an unexpected backend error: stored as data
            mark(manifest, "failed", "fail", f"{type(exc).__name__}: {exc}", error_info(exc))
            raise
        finally:
            manifest.topic = state.get("topic") or manifest.topic
            manifest.counts = snapshots.totals()
            manifest.counts.rounds_completed = rounds_completed(state, total)
            manifest.ended_at = utcnow()
            manifest.wall_s = round(manifest.wall_s + time.perf_counter() - started, 3)
            snapshots.sync()  # the logs on disk before the manifest that counts them
            write_manifest(run_dir, manifest)


def run_debate(run: Resolved, raw_cfg: dict[str, Any], *, build: ModelFactory = build_model) -> RunResult:
    """Run one debate end to end and archive it in a new run folder.

    ``raw_cfg`` is what ``config.yaml`` keeps; the topic and the format's
    options are written as the run used them (a file given for the motion,
    the framework, the batch of topics or a role's prompt is inlined), so a
    resume never reads the file again.
    """
    cfg, fmt = run.cfg, run.fmt
    roles = build_roles(run, preflight(run), build)
    # the validated topic and format: files given for a topic or a role's prompt are inlined
    kept = {**raw_cfg, "topic": dataclasses.asdict(cfg.topic), "format": dataclasses.asdict(cfg.format)}
    if not cfg.probes.enabled:  # a run that probes nothing keeps no probe set (it reads as the default)
        kept.pop("probes", None)
    if fmt.interviews(cfg):  # the items a questionnaire file gave, inlined as the run asks them
        kept["interviews"] = dataclasses.asdict(cfg.interviews)
    else:  # a run that interviews no seat keeps no questionnaire either
        kept.pop("interviews", None)

    parts = components(cfg, roles, fmt)  # once: the folder's fingerprint.json and the snapshots' digest

    def fill(folder: Path) -> None:
        write_config(folder, kept)
        write_fingerprint(folder, parts)

    with full_disk_in_one_line(None):  # None: no folder was made
        run_dir = create_run_dir(Path(cfg.runs_root), cfg.run_name or run_dir_name(cfg), fill)
    with RunLock(run_dir):
        manifest = new_manifest(run, run_dir, roles)
        return execute(run, run_dir, roles, manifest, fmt.initial_state(cfg), fingerprint=digest(parts))

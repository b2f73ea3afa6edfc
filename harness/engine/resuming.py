"""Resuming a run: from its own ``config.yaml`` (never from defaults), from
the newest snapshot the memory files agree with. Nodes of the unfinished
round replay from the records that already landed (ids are deterministic),
so nothing is duplicated and the transcript equals an uninterrupted run's.
The fingerprint must match unless ``force``, which is recorded. Overrides
may change only what the fingerprint allows, e.g. ``rounds=100`` to extend
(the contract: ``harness.store.fingerprint``). A new length, and every other
continuation key given (a budget, ``interviews.rounds``...), is written to
``config.yaml`` before any round is run under it, so a later plain resume
(after a kill) goes on under it; a length below the rounds done, or any new
length for a run its format closed, is refused.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from harness.config import Resolved, resolve
from harness.engine.execute import (
    ModelFactory,
    Resumption,
    RunResult,
    build_roles,
    execute,
    new_manifest,
    preflight,
    set_aside,
)
from harness.engine.fingerprint import components, unbuilt_components
from harness.engine.overrides import applied, keys
from harness.models.base import ModelConfigError
from harness.models.prices import PriceTable, load_prices
from harness.models.registry import build_model
from harness.redact import redact
from harness.schema import REDACTED, Config
from harness.store.fingerprint import (
    PLACE_KEYS,
    continuation_key,
    differences,
    digest,
    read_fingerprint,
    write_fingerprint,
)
from harness.store.memory import RunMemory
from harness.store.reader import read_config
from harness.store.records import HistoryEntry, RunLayout, Snapshot
from harness.store.rundir import RunLock, read_manifest, write_config
from harness.store.snapshot import latest_valid


class ResumeError(RuntimeError):
    """The run cannot be resumed as asked; the message says why in one line."""


def redacted_keys(node: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose value ``config.yaml`` holds only as ``***REDACTED***``."""
    if not isinstance(node, dict):
        return []
    found = []
    for k, v in node.items():
        found += [f"{prefix}{k}"] if v == REDACTED else redacted_keys(v, f"{prefix}{k}.")
    return found


def unredacted(node: Any) -> Any:
    """A config as ``config.yaml`` keeps it, with each redacted secret unset
    (it comes from the environment again, as at the start)."""
    if isinstance(node, dict):
        return {k: (None if v == REDACTED else unredacted(v)) for k, v in node.items()}
    return node


def continued_state(snap: Snapshot, run: Resolved) -> dict[str, Any]:
    """The graph state to go on from after ``snap``; a finished run extended
    with ``rounds=N`` (or a fork given more rounds) continues past its old end."""
    state = dict(snap.state)
    state["done"] = bool(state.get("stop_reason")) or state["round"] > run.fmt.planned_rounds(run.cfg)
    return state


def load_config(run_dir: Path, overrides: list[str]) -> Resolved:
    """The run's own config, with ``overrides`` applied and redacted secrets unset
    (they come from the environment again, as at the start)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise ResumeError(f"{path}: not found; is this a run folder?")
    raw = unredacted(read_config(run_dir))  # libyaml's loader: 0.5 ms, not 4
    if overrides:  # in harness.run's grammar (harness.engine.overrides), resolved as there
        raw = OmegaConf.to_container(OmegaConf.create(applied(raw, overrides)), resolve=True)
        assert isinstance(raw, dict)
    # else config.yaml's values, resolved when the run started, go to the checks as they
    # are: building an OmegaConf node of them cost ~10 ms, which each resumed cell paid
    return resolve({str(k): v for k, v in raw.items()})


def checked(run_dir: Path, run: Resolved, overrides: list[str]) -> PriceTable:
    """``preflight``, with a secret ``config.yaml`` could not keep named as the override to add."""
    try:
        return preflight(run)
    except ModelConfigError as exc:
        given = set(keys(overrides))
        missing = [k for k in redacted_keys(read_config(run_dir)) if k not in given]
        if not missing:
            raise
        raise ResumeError(
            f"{exc}; config.yaml keeps {missing[0]} redacted: resume with "
            f"python -m harness.resume {run_dir} {missing[0]}=<value>"
        ) from None


def start_unstarted(
    run_dir: Path, run: Resolved, prices: PriceTable, build: ModelFactory, overrides: list[str]
) -> RunResult:
    """A folder killed between ``config.yaml`` and ``manifest.json`` ran nothing:
    start it from its config. One that holds records but no manifest is not ours to guess at."""
    written = sorted(
        str(p.relative_to(run_dir)) for p in run_dir.rglob("*.jsonl") if p.is_file() and p.stat().st_size
    )
    if written:
        raise ResumeError(
            f"{run_dir}/manifest.json: missing, but {written[0]} holds records; "
            "this folder cannot be resumed (python -m harness.verify says more)"
        )
    roles = build_roles(run, prices, build)
    record_continuation(run_dir, run, overrides)
    parts = components(run.cfg, roles, run.fmt)  # once: fingerprint.json and the snapshots' digest
    write_fingerprint(run_dir, parts)
    manifest = new_manifest(run, run_dir, roles)
    manifest.history[0].detail = "by resume: the run had stopped before its manifest was written"
    state = dict(run.fmt.initial_state(run.cfg))
    return execute(run, run_dir, roles, manifest, state, fingerprint=digest(parts))


def check_length(run_dir: Path, run: Resolved, snap: Snapshot | None) -> None:
    """A resume may lengthen a run, or shorten the rounds it has yet to run, never
    cut rounds it has: they (and a round begun after them) would stay in its logs.
    Nor may it change the length of a run its format closed (a synthesis, a verdict,
    an abort): no round is left to run under it, so it is refused, not 'nothing to do'."""
    planned, done = run.fmt.planned_rounds(run.cfg), snap.round if snap else 0
    kept = read_config(run_dir).get("rounds", run.cfg.rounds)
    if planned < done or (planned == done and run.cfg.rounds < kept):
        why = (
            f"{done} round(s) done; a resume cannot make a run shorter than what it has"
            if planned < done  # else it is no shorter, but its logs may hold the next round begun
            else f"{done} of its {kept} rounds done, and its logs may hold round {done + 1} begun; "
            "a resume cannot end it there"
        )
        raise ResumeError(
            f"rounds={planned}: {run_dir} has {why} (a shorter branch: "
            f"python -m harness.fork {run_dir} --at-round {planned} rounds={planned})"
        )
    closed = snap.state.get("stop_reason") if snap else None
    if closed and run.cfg.rounds != kept:
        raise ResumeError(
            f"rounds={run.cfg.rounds}: {run_dir} was closed by its format after round {done} ({closed}); "
            "a closed run cannot be extended"
        )


def given_value(cfg: Config, key: str) -> Any:
    """The validated value of dotted ``key`` in ``cfg``, as ``config.yaml`` keeps it."""
    node: Any = cfg
    for part in key.split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    return dataclasses.asdict(node) if dataclasses.is_dataclass(node) and not isinstance(node, type) else node


def record_continuation(run_dir: Path, run: Resolved, overrides: list[str], forced: bool = False) -> str:
    """Write each continuation key given (``rounds``, ``budget.usd``, ``interviews.rounds``...:
    ``continuation_key``) into ``config.yaml``, atomically, before a round runs under it:
    from then on it is the run's, so a plain resume after a kill goes on under it
    (``rounds 6 -> 10``, for the history). ``forced``: every key given, the ones a
    forced resume changed past the fingerprint too."""
    kept = read_config(run_dir)
    changes = []
    for key in keys(overrides):
        *sections, leaf = key.split(".")
        holder: Any = kept
        for section in sections:
            holder = holder.get(section) if isinstance(holder, dict) else None
        # a section config.yaml does not keep (an uninterviewed run's) is one the run does not read
        records = continuation_key(key) or (forced and key.partition(".")[0] not in PLACE_KEYS)
        if not records or not isinstance(holder, dict):
            continue
        old, new = holder.get(leaf), redact({leaf: given_value(run.cfg, key)})[leaf]
        if old != new:
            holder[leaf] = new
            changes.append(f"; {key} {old} -> {new}")
    if changes:
        write_config(run_dir, kept)
    return "".join(changes)


NOTHING_TO_DO = "already completed; nothing to do"


def finished_note(run_dir: Path, layout: RunLayout, snap: Snapshot | None) -> str:
    """Open a finished run's logs past its last snapshot as a resume would, so a
    torn last line (a crash mid-write) is quarantined and named before ``NOTHING_TO_DO``."""
    torn = set_aside(RunMemory(run_dir, layout, start=snap.logs if snap else None))
    return f"{torn}; {NOTHING_TO_DO}" if torn else NOTHING_TO_DO


def planned_parts(run: Resolved, prices: PriceTable) -> dict[str, Any]:
    """The fingerprint's parts but ``model_files``, with no model built."""
    specs = {role: model_cfg.spec for role, (model_cfg, _, _) in run.models.items()}
    return unbuilt_components(run.cfg, run.fmt, specs, prices.digest(list(specs.values())))


def fingerprint_changes(kept: dict[str, Any], parts: dict[str, Any], force: bool) -> list[str]:
    """What changed in the parts ``parts`` holds; refused in one line unless ``force``."""
    changed = differences({k: v for k, v in kept.items() if k in parts}, parts)
    if changed and not force:
        raise ResumeError(
            f"fingerprint mismatch ({len(changed)} change(s)): {'; '.join(changed[:5])}"
            " — pass --force to resume anyway"
        )
    return changed


def kept_fingerprint(run_dir: Path, force: bool) -> dict[str, Any] | None:
    """The parts of the folder's ``fingerprint.json``; None when it is missing and
    ``force`` rewrites it (``rewritten``), else refused in one line saying what to do."""
    path = run_dir / "fingerprint.json"
    if path.is_file():
        return read_fingerprint(run_dir)
    if not force:
        raise ResumeError(
            f"{path}: missing, so nothing can be checked against it; "
            f"python -m harness.resume {run_dir} --force resumes and rewrites it from config.yaml"
        )
    return None


def rewritten(run_dir: Path, parts: dict[str, Any]) -> tuple[list[str], str]:
    """A folder that lost its ``fingerprint.json`` is damaged; ``--force`` accepts config
    changes, and here none can be checked, so it goes on: the fingerprint is rewritten
    from ``config.yaml`` as kept (the model files as found now), and what the overrides
    change is forced past as on any forced resume. The changes, and a warning line."""
    path = run_dir / "fingerprint.json"
    base = load_config(run_dir, [])
    table = load_prices(base.cfg.prices.file, base.cfg.prices.models)
    kept = {**planned_parts(base, table), "model_files": parts["model_files"]}
    write_fingerprint(run_dir, kept)
    warning = f"warning: {path}: missing; rewritten from config.yaml under --force"
    return [f"{path.name}: missing, rewritten from config.yaml", *differences(kept, parts)], warning


def resume_run(
    run_dir: Path,
    *,
    force: bool = False,
    overrides: list[str] | None = None,
    build: ModelFactory = build_model,
) -> RunResult:
    run_dir, overrides = Path(run_dir), overrides or []
    if (run_dir / "manifest.json").is_file():
        read_manifest(run_dir)  # a folder of another version is refused in one line before its config is read
    run = load_config(run_dir, overrides)
    cfg, fmt = run.cfg, run.fmt
    prices = checked(run_dir, run, overrides)
    with RunLock(run_dir):
        if not (run_dir / "manifest.json").is_file():
            return start_unstarted(run_dir, run, prices, build, overrides)
        manifest = read_manifest(run_dir)
        snap, skipped = latest_valid(run_dir)
        state = dict(fmt.initial_state(cfg)) if snap is None else continued_state(snap, run)
        check_length(run_dir, run, snap)
        kept = kept_fingerprint(run_dir, force)
        finished = manifest.status == "completed" and state["done"]
        if finished and kept is not None:
            # nothing runs, so no model is built (a local model's file would be hashed); every
            # other part is compared: a key that may not change is refused here as on any run
            fingerprint_changes(kept, planned_parts(run, prices), force)
            note = finished_note(run_dir, manifest.layout, snap)
            return RunResult(run_dir, manifest, state, fmt.planned_rounds(cfg), note)
        roles = build_roles(run, prices, build)
        parts = components(cfg, roles, fmt)
        changed, warning = (
            (fingerprint_changes(kept, parts, force), "") if kept is not None else rewritten(run_dir, parts)
        )
        if finished:  # only to rewrite the missing fingerprint
            note = f"{warning}\n{finished_note(run_dir, manifest.layout, snap)}"
            return RunResult(run_dir, manifest, state, fmt.planned_rounds(cfg), note)
        detail = f"from round {snap.round if snap else 0}" + record_continuation(
            run_dir, run, overrides, forced=bool(changed)
        )
        if changed:  # the run's from here: a plain resume after a kill goes on under it, unrefused
            write_fingerprint(run_dir, parts)
            detail += f"; forced past: {changed}"
        if skipped:
            detail += f"; skipped snapshots: {skipped}"
        manifest.history.append(HistoryEntry(action="resume_forced" if changed else "resume", detail=detail))
        resumption = Resumption(snap, detail, forced=bool(changed))
        result = execute(run, run_dir, roles, manifest, state, resumption, fingerprint=digest(parts))
        result.note = "\n".join(filter(None, (warning, result.note)))
        return result

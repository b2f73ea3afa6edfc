"""Sweeps: the index of a multirun, and ``python -m harness.sweep``.

    python -m harness.run -m llm.temperature=0.2,0.7 model=smollm2,gemma3_270m replicates=3
    python -m harness.sweep status research_runs/sweep-default-20261130-153000
    python -m harness.sweep resume research_runs/sweep-default-20261130-153000

A sweep folder holds one run folder per cell, named after what varies, plus
``sweep.json`` / ``sweep.parquet`` (one row per cell) and ``cells/`` (one
small status file per cell, written by whichever process ran the cell). The
driver plans every cell before any runs (``plan_cells``), so a resume knows
the cells that never started; the cell's status is read back from its status
file and its run folder's ``manifest.json``.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from harness.store.records import RunManifest, utcnow
from harness.store.rundir import read_manifest, write_atomic

INDEX_JSON = "sweep.json"
INDEX_PARQUET = "sweep.parquet"
CELLS_DIR = "cells"
CELL_LOG = "cell.log"
# Set by ``harness.sweep resume`` for the multirun it relaunches into an existing sweep folder.
RESUME_ENV = "DRIFT_SWEEP_RESUME"

CellStatus = Literal["pending", "running", "completed", "failed", "interrupted", "crashed"]
_SHORT_KEYS = {"temperature": "temp", "replicate": "rep"}
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")
_MAX_NAME = 120


class CellRecord(BaseModel):
    """``cells/<name>.json``: what the process running a cell says about it."""

    status: Literal["running", "completed", "failed", "interrupted"]
    action: Literal["run", "resume", "skip"] = "run"
    exit_code: int | None = None
    error: str | None = None
    rounds: int | None = None
    seed: int | None = None
    host: str = Field(default_factory=lambda: os.uname().nodename)
    pid: int = Field(default_factory=os.getpid)
    started_at: datetime = Field(default_factory=utcnow)
    ended_at: datetime | None = None


class Cell(BaseModel):
    """One row of the index."""

    num: int
    name: str  # also the run folder's name, inside the sweep folder
    overrides: list[str]  # the job's task overrides, as Hydra received them
    params: dict[str, str]  # the overrides that vary across the sweep
    status: CellStatus = "pending"
    action: str | None = None
    rounds_done: int = 0
    rounds: int | None = None
    wall_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    seed: int | None = None
    exit_code: int | None = None
    error: str | None = None


class SweepIndex(BaseModel):
    schema_version: int = 1
    name: str
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    launcher: str
    task_overrides: list[str]  # as typed: resume relaunches with these
    hydra_overrides: list[str]
    history: list[str] = Field(default_factory=list)
    cells: list[Cell]


# -- planning ------------------------------------------------------------------
def safe_value(value: str) -> str:
    """One path component: ``openai:gpt-4o`` -> ``openai-gpt-4o``; ``a/b`` never nests.
    (A name is always ``label-value``, so it can never be ``.`` or ``..`` either.)"""
    return re.sub(r"\.{2,}", ".", _UNSAFE.sub("-", value)) or "empty"


def _labels(keys: list[str]) -> dict[str, str]:
    """Short labels for the varying keys: the last dotted part, unless two collide."""
    last = [k.split(".")[-1] for k in keys]
    out = {}
    for key, short in zip(keys, last, strict=True):
        label = short if last.count(short) == 1 else key
        out[key] = _SHORT_KEYS.get(label, label).replace("_", "-").replace(".", "-")
    return out


def cell_name(params: dict[str, str], num: int) -> str:
    """``temp-0.2_model-smollm2_rep-1``; truncated with a hash suffix if very long."""
    if not params:
        return f"cell-{num:03d}"
    labels = _labels(list(params))
    name = "_".join(f"{labels[k]}-{safe_value(v)}" for k, v in params.items())
    if len(name) > _MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}-{digest}"
    return name


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def plan_cells(arguments: list[str]) -> list[Cell]:
    """Every cell of the sweep, in the order Hydra's basic sweeper launches them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(arguments)
    varying = [_key(o.input_line or "") for o in parsed if o.is_sweep_override()]
    jobs = BasicSweeper.split_arguments(parsed, max_batch_size=None)[0]
    cells, seen = [], set()
    for num, job in enumerate(jobs):
        # values as typed: the sweeper escapes ":" and the like (openai\:gpt-4o)
        params = {_key(o): re.sub(r"\\(.)", r"\1", o.split("=", 1)[1]) for o in job if _key(o) in varying}
        name = base = cell_name(params, num)
        for n in range(2, len(jobs) + 2):  # two values that sanitise alike
            if name not in seen:
                break
            name = f"{base}-{n}"
        seen.add(name)
        cells.append(Cell(num=num, name=name, overrides=list(job), params=params))
    return cells


def replicate_seed(seed: int, replicate: int) -> int:
    """Replicate 0 keeps the seed (so it equals a plain run); others derive one from it."""
    if replicate == 0:
        return seed
    digest = hashlib.sha256(f"{seed}|replicate|{replicate}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)


# -- reading cells back -----------------------------------------------------------
def read_index(sweep_dir: Path) -> SweepIndex:
    path = sweep_dir / INDEX_JSON
    if not path.is_file():
        raise FileNotFoundError(f"{sweep_dir}: no {INDEX_JSON}; is this a sweep folder?")
    return SweepIndex.model_validate_json(path.read_text())


def read_cell_record(sweep_dir: Path, name: str) -> CellRecord | None:
    path = sweep_dir / CELLS_DIR / f"{name}.json"
    try:
        return CellRecord.model_validate_json(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_cell_record(sweep_dir: Path, name: str, record: CellRecord) -> None:
    (sweep_dir / CELLS_DIR).mkdir(exist_ok=True)
    write_atomic(sweep_dir / CELLS_DIR / f"{name}.json", record.model_dump_json(indent=2))


def _manifest(run_dir: Path) -> RunManifest | None:
    try:
        return read_manifest(run_dir)
    except (FileNotFoundError, ValueError):
        return None


def _dead_here(record: CellRecord) -> bool:
    """A cell marked running by a process of this machine that no longer exists."""
    if record.host != os.uname().nodename:
        return False  # another node's process: only its own scheduler knows
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def refresh_cell(sweep_dir: Path, cell: Cell, *, final: bool) -> Cell:
    """The cell's row from its status file and manifest. ``final``: nothing runs any more,
    so a cell still marked running was killed."""
    record = read_cell_record(sweep_dir, cell.name)
    manifest = _manifest(sweep_dir / cell.name)
    row = cell.model_copy()
    if manifest is not None:
        counts = manifest.counts
        row.rounds_done, row.wall_s = counts.rounds_completed, manifest.wall_s
        row.input_tokens, row.output_tokens = counts.input_tokens, counts.output_tokens
        row.seed = manifest.seed
    if record is None:
        row.status = "pending" if manifest is None else "crashed"
        return row
    row.action, row.exit_code, row.error, row.rounds = (
        record.action, record.exit_code, record.error, record.rounds,
    )  # fmt: skip
    row.seed = row.seed if row.seed is not None else record.seed
    row.status = record.status
    if record.status == "running" and (final or _dead_here(record)):
        row.status = "completed" if manifest is not None and manifest.status == "completed" else "crashed"
    return row


def refresh_index(sweep_dir: Path, index: SweepIndex, *, final: bool) -> SweepIndex:
    cells = [refresh_cell(sweep_dir, c, final=final) for c in index.cells]
    return index.model_copy(update={"cells": cells, "updated_at": utcnow()})


def write_index(sweep_dir: Path, index: SweepIndex, *, parquet: bool = True) -> None:
    write_atomic(sweep_dir / INDEX_JSON, index.model_dump_json(indent=2))
    if parquet:
        write_parquet(sweep_dir, index)


def write_parquet(sweep_dir: Path, index: SweepIndex) -> None:
    """One row per cell; each varying key also gets its own ``param.<key>`` column."""
    import pandas as pd  # heavy: only when a sweep ends

    rows = []
    for cell in index.cells:
        row = cell.model_dump(exclude={"params"})
        row["overrides"] = " ".join(cell.overrides)
        row["run_dir"] = str(sweep_dir / cell.name)
        row["tokens"] = cell.input_tokens + cell.output_tokens
        row.update({f"param.{k}": v for k, v in cell.params.items()})
        rows.append(row)
    tmp = sweep_dir / f".{INDEX_PARQUET}.tmp"
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    os.replace(tmp, sweep_dir / INDEX_PARQUET)


# -- reporting -----------------------------------------------------------------------
def tally(cells: list[Cell]) -> dict[str, int]:
    out: dict[str, int] = {}
    for cell in cells:
        out[cell.status] = out.get(cell.status, 0) + 1
    return out


def progress_line(cells: list[Cell]) -> str:
    counts = tally(cells)
    done = counts.get("completed", 0)
    failed = sum(counts.get(s, 0) for s in ("failed", "crashed", "interrupted"))
    return (
        f"[sweep] {done}/{len(cells)} done | {counts.get('running', 0)} running | "
        f"{failed} failed | {counts.get('pending', 0)} pending"
    )


def status_table(index: SweepIndex) -> str:
    """The table printed when a sweep ends: one line per cell, then the totals."""
    width = max([len("cell"), *(len(c.name) for c in index.cells)])
    lines = [f"{'cell':<{width}}  {'status':<11} {'rounds':>7} {'wall_s':>8} {'tokens':>9}  note"]
    for c in index.cells:
        rounds = f"{c.rounds_done}/{c.rounds}" if c.rounds else str(c.rounds_done)
        note = c.error or ("skipped: already completed" if c.action == "skip" else "")
        lines.append(
            f"{c.name:<{width}}  {c.status:<11} {rounds:>7} {c.wall_s:>8.1f} "
            f"{c.input_tokens + c.output_tokens:>9}  {note}".rstrip()
        )
    summary = ", ".join(f"{n} {s}" for s, n in sorted(tally(index.cells).items()))
    lines.append(f"{len(index.cells)} cells: {summary}")
    return "\n".join(lines)


# -- the command line ---------------------------------------------------------------
def relaunch_command(sweep_dir: Path, index: SweepIndex) -> list[str]:
    """The multirun that continues this sweep: same overrides, same launcher, same folder."""
    hydra = [o for o in index.hydra_overrides if _key(o) not in ("hydra.sweep.dir", "hydra.mode")]
    return [
        sys.executable, "-m", "harness.run", "-m", *index.task_overrides, *hydra,
        f"hydra.sweep.dir='{sweep_dir.resolve()}'",
    ]  # fmt: skip


def resume(sweep_dir: Path) -> int:
    """Skip completed cells, resume crashed ones, run those never started."""
    index = refresh_index(sweep_dir, read_index(sweep_dir), final=True)
    counts = tally(index.cells)
    todo = len(index.cells) - counts.get("completed", 0)
    if todo == 0:
        print(f"{sweep_dir}: all {len(index.cells)} cells completed; nothing to do")
        return 0
    started = todo - counts.get("pending", 0)
    print(
        f"{sweep_dir}: {counts.get('completed', 0)} completed (skipped), {started} to resume, "
        f"{counts.get('pending', 0)} never started",
        flush=True,
    )
    env = {**os.environ, RESUME_ENV: "1"}
    return subprocess.call(relaunch_command(sweep_dir, index), env=env)


def status(sweep_dir: Path) -> int:
    index = refresh_index(sweep_dir, read_index(sweep_dir), final=False)
    print(status_table(index))
    return 0 if all(c.status == "completed" for c in index.cells) else 1


USAGE = "usage: python -m harness.sweep {resume,status} <sweep_dir>"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("resume", "status"):
        print(USAGE, file=sys.stderr)
        return 2
    sweep_dir = Path(args[1])
    try:
        return resume(sweep_dir) if args[0] == "resume" else status(sweep_dir)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

"""Sweeps: the index of a multirun, and ``python -m harness.sweep``.

    python -m harness.run -m llm.temperature=0.2,0.7 model=smollm2,gemma3_270m replicates=3
    python -m harness.sweep status research_runs/sweep-default-20261130-153000
    python -m harness.sweep resume research_runs/sweep-default-20261130-153000

A sweep folder holds one run folder per cell, named after what varies, plus
``sweep.json`` / ``sweep.parquet`` (one row per cell) and ``cells/`` (one
small status file per cell, written by whichever process ran the cell:
``harness.sweep.cell_status``). The driver plans every cell before any runs
(``harness.sweep.grid``), so a resume knows the cells that never started.

Each status write is also appended, as one line, to ``cells.jsonl``: the cell
log. While a sweep runs, the driver reads only the log's new lines and
rewrites ``sweep.json`` (the compacted index) once every tenth of the cells'
events, so keeping the index costs the same per cell at 10 cells or 10,000;
``status`` reads ``sweep.json`` and replays the log. When a launch ends, and
before a resume, every cell's status file and ``manifest.json`` are read
instead (``refresh_index``): the log is fast, the files are the truth (an
append on a shared file system may tear; a torn line is skipped).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from harness.cli.errors import BAD_INPUT, FAILED, INTERRUPTED, exit_code
from harness.schema import ConfigError
from harness.sweep.cell_status import EVENTS_JSONL, HOST, CellLog, CellRecord, read_cell_record, utcnow
from harness.sweep.grid import Cell, override_key
from harness.sweep.ready import die_with_parent

if TYPE_CHECKING:
    from harness.store.records import RunManifest

INDEX_JSON = "sweep.json"
INDEX_PARQUET = "sweep.parquet"
CELL_LOG = "cell.log"
LIMITS_JSONL = "limits.jsonl"  # every change of a shared rate limiter's limit (in-process launcher)
COMPACTIONS = 10  # sweep.json is rewritten after every 1/COMPACTIONS of the cells' events
# Set by ``harness.sweep resume`` for the multirun it relaunches into an existing sweep folder.
RESUME_ENV = "DRIFT_SWEEP_RESUME"
# A file the driver writes its ``IndexCost`` to when the sweep ends (benchmarks/sweep_scale.py).
STATS_ENV = "DRIFT_SWEEP_STATS"


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


@dataclass
class IndexCost:
    """What keeping the index cost this process: full rewrites of ``sweep.json``
    (count, bytes, seconds) and reads of the cells' states (count, seconds)."""

    writes: int = 0
    bytes: int = 0
    write_s: float = 0.0
    refreshes: int = 0
    refresh_s: float = 0.0

    def dump(self) -> None:
        if path := os.environ.get(STATS_ENV):
            Path(path).write_text(json.dumps(asdict(self)))


INDEX_COST = IndexCost()


# -- reading cells back -----------------------------------------------------------
def read_index(sweep_dir: Path) -> SweepIndex:
    path = sweep_dir / INDEX_JSON
    if not path.is_file():
        if not sweep_dir.is_dir():  # e.g. a sweep killed as it started, before it made its folder
            raise FileNotFoundError(
                f"{sweep_dir}: no such folder (a sweep killed as it started makes none: run its command again)"
            )
        raise FileNotFoundError(f"{sweep_dir}: no {INDEX_JSON}; is this a sweep folder?")
    return SweepIndex.model_validate_json(path.read_text())


def _manifest(run_dir: Path) -> RunManifest | None:
    """The run's manifest, its counts as of now (``counts_now``: after a kill -9,
    status said 0 rounds and $0 of a sweep that had paid for rounds)."""
    from harness.store.rundir import read_manifest  # only for cells still running, or at the end
    from harness.store.snapshot import counts_now

    try:
        manifest = read_manifest(run_dir)
    except (FileNotFoundError, ValueError):
        return None
    counts = counts_now(run_dir, manifest)
    return manifest if counts is manifest.counts else manifest.model_copy(update={"counts": counts})


def _dead_here(record: CellRecord) -> bool:
    """A cell marked running by a process of this machine that no longer exists."""
    if record.host != HOST:
        return False  # another node's process: only its own scheduler knows
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _running_here(row: Cell, record: CellRecord) -> bool:
    """The row says running, from this process's record that it is running."""
    ours = record.pid == os.getpid() and record.host == HOST
    return ours and row.status == record.status == "running"


def cell_row(cell: Cell, record: CellRecord | None, manifest: RunManifest | None, *, final: bool) -> Cell:
    """The cell's row from its last record and, where read, its manifest. ``final``:
    nothing runs any more, so a cell still marked running was killed."""
    row = cell.model_copy()
    if manifest is not None:
        counts = manifest.counts
        row.rounds_done, row.wall_s = counts.rounds_completed, manifest.wall_s
        row.input_tokens, row.output_tokens = counts.input_tokens, counts.output_tokens
        row.cost_usd, row.seed = counts.cost_usd, manifest.seed
    elif record is not None and record.rounds_done is not None:
        row.rounds_done, row.wall_s, row.seed = record.rounds_done, record.wall_s or 0.0, record.seed
        row.input_tokens, row.output_tokens = record.input_tokens or 0, record.output_tokens or 0
        row.cost_usd = record.cost_usd
    if record is None:
        row.status = "pending" if manifest is None else "crashed"
        return row
    row.action, row.exit_code, row.error, row.rounds = (
        record.action,
        record.exit_code,
        record.error,
        record.rounds,
    )
    row.seed = row.seed if row.seed is not None else record.seed
    row.status = record.status
    if record.status == "running" and (final or _dead_here(record)):
        row.status = "completed" if manifest is not None and manifest.status == "completed" else "crashed"
    return row


def refresh_cell(sweep_dir: Path, cell: Cell, *, final: bool) -> Cell:
    """The cell's row from its status file and manifest, both read now."""
    record = read_cell_record(sweep_dir, cell.name)
    return cell_row(cell, record, _manifest(sweep_dir / cell.name), final=final)


def refresh_index(sweep_dir: Path, index: SweepIndex, *, final: bool) -> SweepIndex:
    """Every cell's row from its files: a launch's last word, and a resume's first."""
    started = time.perf_counter()
    cells = [refresh_cell(sweep_dir, c, final=final) for c in index.cells]
    INDEX_COST.refreshes += 1
    INDEX_COST.refresh_s += time.perf_counter() - started
    return index.model_copy(update={"cells": cells, "updated_at": utcnow()})


def replay_index(
    sweep_dir: Path, index: SweepIndex, latest: dict[str, CellRecord], names: set[str] | None = None
) -> SweepIndex:
    """``index`` (the compacted rows) updated by the cell log's last record of each cell
    (of each cell in ``names``, if given). A manifest is read only for a cell still
    running (its rounds so far) or a record without counts; a cell with no record
    keeps its compacted row, and so, given ``names``, does a row already running
    in this very process (the in-process launcher's cells, alive by definition):
    re-reading 1,000 manifests every second took a tenth of the driver's GIL."""
    started = time.perf_counter()
    cells = []
    for cell in index.cells:
        record = latest.get(cell.name)
        if record is None or (names is not None and (cell.name not in names or _running_here(cell, record))):
            cells.append(cell)
            continue
        look = record.status == "running" or record.rounds_done is None
        manifest = _manifest(sweep_dir / cell.name) if look else None
        cells.append(cell_row(cell, record, manifest, final=False))
    INDEX_COST.refreshes += 1
    INDEX_COST.refresh_s += time.perf_counter() - started
    return index.model_copy(update={"cells": cells, "updated_at": utcnow()})


def current_index(sweep_dir: Path) -> SweepIndex:
    """The index as of now: ``sweep.json`` plus the cell log (or, for a sweep from
    before the log, every cell's files)."""
    index = read_index(sweep_dir)
    if not (sweep_dir / EVENTS_JSONL).is_file():
        return refresh_index(sweep_dir, index, final=False)
    log = CellLog(sweep_dir)
    log.read()
    return replay_index(sweep_dir, index, log.latest)


def write_index(sweep_dir: Path, index: SweepIndex, *, parquet: bool = True) -> None:
    started = time.perf_counter()
    from harness.store.rundir import write_atomic

    text = index.model_dump_json(indent=2)
    write_atomic(sweep_dir / INDEX_JSON, text)
    INDEX_COST.writes += 1
    INDEX_COST.bytes += len(text.encode())
    INDEX_COST.write_s += time.perf_counter() - started
    if parquet:
        write_parquet(sweep_dir, index)


TEXT_COLUMNS = ("name", "overrides", "status", "action", "error", "run_dir")  # and every param.<key>


def write_parquet(sweep_dir: Path, index: SweepIndex) -> None:
    """One row per cell; each varying key also gets its own ``param.<key>`` column.

    The rows go through pyarrow's JSON reader: ``pa.array`` imports pandas to
    look for its types, which cost every sweep's end ~2 s under load. The text
    columns are typed explicitly (never a timestamp guessed from a value);
    ``pd.read_parquet`` reads the table as pandas wrote it before.

    What exists is frozen out of the collector meanwhile: pyarrow's and numpy's
    module init ran full collections over the driver's heap, which took this
    write from ~0.1 s to ~0.3 s at the end of a 64- or 256-cell sweep."""
    if gc.get_freeze_count():  # frozen by a caller already (harness.sweep.launcher)
        _write_parquet(sweep_dir, index)
        return
    gc.freeze()
    try:
        _write_parquet(sweep_dir, index)
    finally:
        gc.unfreeze()


def _write_parquet(sweep_dir: Path, index: SweepIndex) -> None:
    import pyarrow as pa  # only when a launch ends
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    rows = [_parquet_row(sweep_dir, cell) for cell in index.cells]
    table = pa.table({})
    if rows:
        texts = [k for k in rows[0] if k in TEXT_COLUMNS or k.startswith("param.")]
        parse = pj.ParseOptions(
            explicit_schema=pa.schema([(k, pa.string()) for k in texts]), unexpected_field_behavior="infer"
        )
        lines = "".join(json.dumps(row) + "\n" for row in rows).encode()
        table = pj.read_json(pa.BufferReader(lines), parse_options=parse).select(list(rows[0]))
    tmp = sweep_dir / f".{INDEX_PARQUET}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, sweep_dir / INDEX_PARQUET)


def _parquet_row(sweep_dir: Path, cell: Cell) -> dict[str, Any]:
    row = cell.model_dump(exclude={"params"})
    row["overrides"] = " ".join(cell.overrides)
    row["run_dir"] = str(sweep_dir / cell.name)
    row["tokens"] = cell.input_tokens + cell.output_tokens
    row.update({f"param.{k}": v for k, v in cell.params.items()})
    return row


# -- reporting -----------------------------------------------------------------------
def tally(cells: list[Cell]) -> dict[str, int]:
    out: dict[str, int] = {}
    for cell in cells:
        out[cell.status] = out.get(cell.status, 0) + 1
    return out


def progress_line(cells: list[Cell]) -> str:
    counts = tally(cells)
    done = counts.get("completed", 0)
    # crashed (its process killed) and interrupted (Ctrl-C, a budget, ctl cancel) are
    # resumable as they stand, not failures: named apart, as the table's summary does
    stopped = "".join(f"{counts[s]} {s} | " for s in ("crashed", "interrupted") if counts.get(s))
    return (
        f"[sweep] {done}/{len(cells)} done | {counts.get('running', 0)} running | "
        f"{counts.get('failed', 0)} failed | {stopped}{counts.get('pending', 0)} pending"
    )


def status_table(index: SweepIndex) -> str:
    """The table printed when a sweep ends: one line per cell, then the totals."""
    from harness.models.prices import format_usd  # light; kept out of the callback's import
    from harness.store.records import add_cost

    width = max([len("cell"), *(len(c.name) for c in index.cells)])
    lines = [f"{'cell':<{width}}  {'status':<11} {'rounds':>7} {'wall_s':>8} {'tokens':>9} {'cost':>9}  note"]
    spent: float | None = 0.0
    for c in index.cells:
        rounds = f"{c.rounds_done}/{c.rounds}" if c.rounds else str(c.rounds_done)
        note = c.error or ("skipped: already completed" if c.action == "skip" else "")
        lines.append(
            f"{c.name:<{width}}  {c.status:<11} {rounds:>7} {c.wall_s:>8.1f} "
            f"{c.input_tokens + c.output_tokens:>9} {format_usd(c.cost_usd):>9}  {note}".rstrip()
        )
        spent = add_cost(spent, c.cost_usd)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(tally(index.cells).items()))
    tokens = sum(c.input_tokens + c.output_tokens for c in index.cells)
    lines.append(f"{len(index.cells)} cells: {summary}; {tokens} tokens, {format_usd(spent)} spent")
    return "\n".join(lines)


# -- the command line ---------------------------------------------------------------
def relaunch_command(sweep_dir: Path, index: SweepIndex, changes: Sequence[str] = ()) -> list[str]:
    """The multirun that continues this sweep: same overrides, same launcher, same
    folder; ``changes`` (``budget.sweep_usd=5``) replace the overrides of their keys."""
    hydra = [o for o in index.hydra_overrides if override_key(o) not in ("hydra.sweep.dir", "hydra.mode")]
    changed = {override_key(c) for c in changes}
    task = [o for o in index.task_overrides if override_key(o) not in changed]
    return [
        sys.executable,
        "-m",
        "harness.run",
        "-m",
        *task,
        *changes,
        *hydra,
        f"hydra.sweep.dir='{sweep_dir.resolve()}'",
    ]


def resume(sweep_dir: Path, changes: list[str] | None = None) -> int:
    """Skip completed cells, resume crashed ones, run those never started;
    ``changes`` such as a raised ``budget.sweep_usd`` apply to every cell."""
    index = refresh_index(sweep_dir, read_index(sweep_dir), final=True)
    changes = resume_changes(index, changes or [])
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
    return relay(relaunch_command(sweep_dir, index, changes), env)


# Overrides a resumed sweep may change without changing its cells (a raised budget).
RESUME_MUTABLE = ("budget.", "+budget.")


def resume_changes(index: SweepIndex, changes: list[str]) -> list[str]:
    """What a resume passes on: ``budget.*``. A key given again with the value the
    sweep started with is no change and is dropped; any other is a one-line error
    naming it (its cells were planned when it started)."""
    started = dict(o.split("=", 1) for o in index.task_overrides if "=" in o)
    kept = []
    for change in changes:
        key, value = change.split("=", 1)
        if change.startswith(RESUME_MUTABLE):
            kept.append(change)
        elif started.get(key) != value:
            raise ConfigError(
                f"{key}: a sweep's cells are planned when it starts; a resume may change budget.* "
                f"only (another grid is another sweep: a new hydra.sweep.dir)"
            )
    return kept


RELAYED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def relay(command: list[str], env: dict[str, str]) -> int:
    """Run ``command`` (the sweep's driver) as a child that ends with this process.

    The child has a process group of its own, so a terminal's Ctrl-C or hang-up
    reaches it once, through here: each SIGINT, SIGTERM or SIGHUP this process
    gets is passed on (a second one is the driver's "abandon at once"). If this
    process is killed outright, the child gets SIGTERM and stops as it would on
    Ctrl-C, where it once ran on alone beside the next resume. Returns its exit
    code (128 + N for a signal N that ended it)."""
    parent = os.getpid()

    def in_child() -> None:
        die_with_parent()
        if os.getppid() != parent:  # this process died before the line above took hold
            os._exit(INTERRUPTED)

    proc = subprocess.Popen(command, env=env, process_group=0, preexec_fn=in_child)
    held = threading.current_thread() is threading.main_thread()  # handlers belong to it alone
    previous = (
        {s: signal.signal(s, lambda signum, _: proc.send_signal(signum)) for s in RELAYED} if held else {}
    )
    try:
        code = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def limiter_lines(sweep_dir: Path) -> list[str]:
    """One line per shared limiter of the sweep, from ``limits.jsonl``: its limit
    now, how often a 429 cut it, and how often a Retry-After held every caller."""
    path = sweep_dir / LIMITS_JSONL
    changes = (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )
    by_key: dict[str, list[dict[str, Any]]] = {}
    for change in changes:
        by_key.setdefault(change["key"], []).append(change)
    return [
        f"limiter {key}: limit {kept[-1]['new']:g} now, {sum(c['reason'] == '429' for c in kept)} cut(s) on 429, "
        f"{sum(c['reason'].startswith('retry-after') for c in kept)} Retry-After hold(s), {len(kept)} change(s)"
        for key, kept in by_key.items()
    ]


def status(sweep_dir: Path) -> int:
    index = current_index(sweep_dir)
    print(status_table(index))
    for line in limiter_lines(sweep_dir):
        print(line)
    return 0 if all(c.status == "completed" for c in index.cells) else FAILED


USAGE = (
    "usage: python -m harness.sweep {resume <sweep_dir> [key=value ...], status <sweep_dir>, "
    "ctl <sweep_dir> <command>}"
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if {"-h", "--help"} & set(args):
        print(USAGE)
        return 0
    changes = args[2:]
    well_formed = all("=" in c and not c.startswith("hydra") for c in changes)
    if (
        len(args) < 2
        or args[0] not in ("resume", "status")
        or (changes and args[0] == "status")
        or not well_formed
    ):
        print(USAGE, file=sys.stderr)
        return BAD_INPUT
    sweep_dir = Path(args[1])
    try:
        return resume(sweep_dir, changes) if args[0] == "resume" else status(sweep_dir)
    except (FileNotFoundError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_code(exc)

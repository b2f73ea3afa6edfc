"""The sweep index at scale, in-process: the cell log, its compaction into
``sweep.json``, and ``status`` on a sweep killed part-way.

Cells are simulated by writing their status records (as ``run_cell`` does)
into a planned sweep folder under tmp_path; nothing runs a debate.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.sweep.callback import IndexKeeper
from harness.sweep.cell_status import EVENTS_JSONL, CellRecord, write_cell_record
from harness.sweep.grid import plan_cells
from harness.sweep.index import (
    COMPACTIONS,
    INDEX_COST,
    SweepIndex,
    current_index,
    main,
    read_index,
    refresh_index,
    write_index,
)


def planned_sweep(sweep_dir: Path, cells: int) -> SweepIndex:
    sweep_dir.mkdir()
    index = SweepIndex(
        name=sweep_dir.name,
        launcher="basic",
        task_overrides=[f"replicates={cells}"],
        hydra_overrides=[],
        cells=plan_cells(["model=scripted", "replicate=" + ",".join(map(str, range(cells)))]),
    )
    write_index(sweep_dir, index, parquet=False)
    (sweep_dir / EVENTS_JSONL).touch()
    return index


def ended(status: str = "completed", **fields: object) -> CellRecord:
    record = CellRecord(status="running", rounds=2, seed=0).with_counts(None)
    return record.model_copy(update={"status": status, "exit_code": 0, **fields})


def dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(proc.stdout)


def rows(index: SweepIndex) -> list[dict[str, object]]:
    return [c.model_dump() for c in index.cells]


def index_cost_per_cell(tmp_path: Path, cells: int) -> tuple[int, float]:
    """(full rewrites of sweep.json, bytes written per cell) for a sweep of ``cells``
    cells, the driver ticking after every event, the worst case."""
    sweep_dir = tmp_path / f"sweep-{cells}"
    keeper = IndexKeeper(sweep_dir, planned_sweep(sweep_dir, cells))
    writes, written = INDEX_COST.writes, INDEX_COST.bytes
    for cell in keeper.index.cells:
        write_cell_record(sweep_dir, cell.name, CellRecord(status="running", rounds=2))
        keeper.tick()
        write_cell_record(sweep_dir, cell.name, ended())
        keeper.tick()
    assert [c.status for c in read_index(sweep_dir).cells] == ["completed"] * cells  # compacted
    return INDEX_COST.writes - writes, (INDEX_COST.bytes - written) / cells


def test_index_write_cost_per_cell_does_not_grow_with_the_cells(tmp_path):
    small_writes, small_bytes = index_cost_per_cell(tmp_path, 20)
    large_writes, large_bytes = index_cost_per_cell(tmp_path, 300)
    # one rewrite per tenth of the events, whatever the size; a rewrite per event would be 600
    assert small_writes <= 2 * COMPACTIONS and large_writes <= 2 * COMPACTIONS
    assert large_bytes < 1.5 * small_bytes  # per cell; quadratic growth would give 15x


def test_cell_log_is_append_only_and_replays_to_the_walked_index(tmp_path):
    sweep_dir = tmp_path / "sweep"
    index = planned_sweep(sweep_dir, 4)
    names = [c.name for c in index.cells]
    write_cell_record(sweep_dir, names[0], CellRecord(status="running", rounds=2))
    before = (sweep_dir / EVENTS_JSONL).read_bytes()
    write_cell_record(sweep_dir, names[0], ended())
    write_cell_record(sweep_dir, names[1], ended("failed", exit_code=2, error="llm.temperature: bad"))
    log = (sweep_dir / EVENTS_JSONL).read_bytes()
    assert log.startswith(before) and len(log.splitlines()) == 3
    replayed, walked = current_index(sweep_dir), refresh_index(sweep_dir, read_index(sweep_dir), final=False)
    assert rows(replayed) == rows(walked)
    assert [c.status for c in replayed.cells] == ["completed", "failed", "pending", "pending"]
    assert replayed.cells[1].error == "llm.temperature: bad"


def test_status_of_a_sweep_killed_part_way(tmp_path, capsys):
    """sweep.json compacted early (all pending), then the log moved on; the process
    running cell 2 died; a torn last line (a shared file system) is skipped."""
    sweep_dir = tmp_path / "sweep"
    index = planned_sweep(sweep_dir, 5)
    names = [c.name for c in index.cells]
    write_cell_record(sweep_dir, names[0], ended(rounds_done=2, input_tokens=10))
    write_cell_record(sweep_dir, names[1], ended("failed", exit_code=1, error="boom"))
    write_cell_record(sweep_dir, names[2], CellRecord(status="running", rounds=2, pid=dead_pid()))
    with open(sweep_dir / EVENTS_JSONL, "a") as fh:
        fh.write('{"status":"completed","cell":"rep-3"')  # no newline: cut off mid-write
    assert main(["status", str(sweep_dir)]) == 1
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in table[1:6]] == [
        [names[0], "completed"],
        [names[1], "failed"],
        [names[2], "crashed"],
        [names[3], "pending"],
        [names[4], "pending"],
    ]
    # the totals: cell 0's 10 tokens, on the free scripted model
    assert table[-1] == "5 cells: 1 completed, 1 crashed, 1 failed, 2 pending; 10 tokens, $0 spent"
    assert rows(current_index(sweep_dir)) == rows(refresh_index(sweep_dir, index, final=False))
    # a sweep from before the cell log: status reads every cell's files instead
    (sweep_dir / EVENTS_JSONL).unlink()
    assert main(["status", str(sweep_dir)]) == 1
    assert capsys.readouterr().out.splitlines()[1:6] == table[1:6]

"""Sweeps: the planned index of a multirun and its cell log (``index``), the
cell a Hydra job runs (``cell``), the callback that keeps the index
(``callback``), and ``python -m harness.sweep resume|status <sweep_dir>``."""

from harness.sweep.index import (
    Cell,
    CellEvent,
    CellLog,
    CellRecord,
    SweepIndex,
    current_index,
    plan_cells,
    read_index,
)

__all__ = [
    "Cell",
    "CellEvent",
    "CellLog",
    "CellRecord",
    "SweepIndex",
    "current_index",
    "plan_cells",
    "read_index",
]

"""Sweeps: the grid of a multirun's cells, planned before any runs (``grid``), what
each cell's process says about it and the cell log (``cell_status``), the
index kept from both (``index``), the cell a Hydra job runs (``cell``), the
callback that keeps the index (``callback``), the channel that steers a
running in-process sweep (``control``) and its queue (``steer``), and
``python -m harness.sweep resume|status|ctl <sweep_dir>``."""

from harness.sweep.cell_status import CellEvent, CellLog, CellRecord
from harness.sweep.grid import Cell, plan_cells
from harness.sweep.index import SweepIndex, current_index, read_index

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

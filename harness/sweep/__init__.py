"""Sweeps: the cells of a multirun, planned before any runs (``plan``), what
each cell's process says about it and the cell log (``cell_status``), the
index kept from both (``index``), the cell a Hydra job runs (``cell``), the
callback that keeps the index (``callback``), and
``python -m harness.sweep resume|status <sweep_dir>``."""

from harness.sweep.cell_status import CellEvent, CellLog, CellRecord
from harness.sweep.index import SweepIndex, current_index, read_index
from harness.sweep.plan import Cell, plan_cells

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

"""Which runs the analysis takes for one cell (``analysis.tables.cell_of``)."""

from __future__ import annotations

from pathlib import Path

from analysis import load_runs


def test_the_experiment_name_splits_no_cell(tmp_path: Path, run) -> None:
    """Two batches of one condition, named apart (experiment_name=batchA / batchB, so their
    sweep folders are), were two cells: compare, power and the tables halved each arm."""
    for batch, seed in (("batchA", 1), ("batchB", 2)):
        run("rounds=1", f"experiment_name={batch}", f"seed={seed}", f"runs_root={tmp_path / batch}")
    runs = load_runs(tmp_path, cache=False).runs
    assert runs.cell.nunique() == 1, runs.cell_label.tolist()
    assert "experiment_name" not in runs.cell_label.iloc[0]

"""python -m analysis end to end, its one-line errors, and the docs table."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from analysis import markdown_table
from analysis.__main__ import main

REPO = Path(__file__).resolve().parents[1]


def test_cli_writes_tables_and_figures(run, runs_root, capsys):
    run("rounds=4", "model.reject_first=1")
    run("rounds=4", "seed=3")
    assert main([str(runs_root), "--embedder", "hash", "--no-progress"]) == 0
    out = runs_root / "_analysis"
    turns = pd.read_parquet(out / "turn_signals.parquet")
    assert len(turns) == 16 and {"sem_anchor_sim", "vader_compound", "mtld", "tokens"} <= set(turns.columns)
    scores = pd.read_parquet(out / "scores.parquet")
    assert scores.drift_index.notna().all()
    for name in ("drift_trajectories", "sweep_heatmap", "signal_correlations", "approval_loop_lock"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
        assert (out / "figures" / f"{name}.svg").stat().st_size > 1000
    assert "2 runs (0 from cache)" in capsys.readouterr().out
    assert main([str(runs_root), "--embedder", "hash", "--no-progress", "--no-figures"]) == 0
    assert "2 runs (2 from cache)" in capsys.readouterr().out


def test_missing_package_is_one_line(run, runs_root, capsys, monkeypatch):
    run("rounds=2")
    monkeypatch.setitem(sys.modules, "ruptures", None)  # as if the analysis extra were not installed
    assert main([str(runs_root), "--embedder", "hash", "--no-progress", "--no-figures"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'ruptures'" in err and ".[analysis]" in err


def test_no_runs_is_one_line(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no run folders" in capsys.readouterr().err


def test_docs_table_matches_the_registry():
    assert markdown_table() in (REPO / "docs" / "signals.md").read_text()

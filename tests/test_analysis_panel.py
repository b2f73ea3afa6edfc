"""The analysis on any format and any number of seats: panel runs load into
the same tables as drift runs, signals relate each turn to the other seats,
and a root holding both formats analyses as one sweep."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import RunReadWarning, aggregate, compute_signals, get_embedder, load_runs, score, trajectories
from analysis.__main__ import main
from analysis.signals import team_rank
from analysis.tables import TABLES

ANALYSTS = ["analyst_a", "analyst_b", "analyst_c", "analyst_d"]
PANEL = ("format=panel", "rounds=4", "format.judge=false")


def test_panel_run_loads_seats_aliases_drafts_and_role_cards(run):
    t = load_runs(run(*PANEL).run_dir, cache=False)
    turns = t.turns
    assert len(turns) == 16 and turns.groupby("team").size().to_dict() == dict.fromkeys(ANALYSTS, 4)
    assert turns.team.tolist()[:4] == ANALYSTS  # the layout's seat order within a round
    assert sorted(set(zip(turns.team, turns.alias, strict=True))) == [
        (seat, f"Analyst {seat[-1].upper()}") for seat in ANALYSTS
    ]
    assert set(turns.kind) == {"position"}
    assert turns.groupby("round").phase.first().to_dict() == {
        1: "blind",
        2: "debate",
        3: "debate",
        4: "debate",
    }
    # each statement is its seat's notes record's draft; no critic judged it
    assert len(t.drafts) == 16 and t.drafts.published.all() and t.drafts.approved.isna().all()
    assert t.drafts.notes.str.len().gt(0).all()
    merged = turns.merge(t.drafts, on="draft_id", suffixes=("", "_draft"))
    assert (merged.text == merged.text_draft).all() and len(merged) == 16
    # the role card is the seat's anchor
    assert sorted(t.personas.team) == ANALYSTS and set(t.personas.kind) == {"role_card"}
    assert (t.personas.version == 1).all() and (t.personas["round"] == 0).all()
    assert t.public.kind.value_counts().to_dict() == {"role_card": 4, "summary": 4, "synthesis": 1}
    row = t.runs.iloc[0].to_dict()
    assert row["format"] == "panel" and row["n_seats"] == 4 and not row["has_critic"]
    assert team_rank(row) == {seat: i for i, seat in enumerate(ANALYSTS)}
    assert "critic=" not in row["cell_label"]  # a panel has critic settings but no critic


def test_panel_signals_relate_each_turn_to_the_other_seats(run):
    tables = load_runs(run(*PANEL).run_dir, cache=False)
    sig = compute_signals(tables, embedder="hash", progress=False).turns.sort_values("order")
    assert len(sig) == 16 and sig.sem_anchor_sim.notna().all() and sig.vader_compound.notna().all()
    # seats speak in turn, so the latest turn of another seat is always the one just before
    assert sig.sem_opponent_sim.iloc[0] != sig.sem_opponent_sim.iloc[0]  # the first turn has none (NaN)
    texts = tables.turns.sort_values("order").text.tolist()
    vecs = get_embedder("hash").encode(texts)
    expected = [float(vecs[i] @ vecs[i - 1]) for i in range(1, len(texts))]
    np.testing.assert_allclose(sig.sem_opponent_sim.iloc[1:].to_numpy(), expected, rtol=1e-5)
    assert sig.lsm_opponent.iloc[1:].notna().all()
    # no critic: no rejection rate (missing, not a perfect 0)
    assert sig.rejection_rate.isna().all() and (sig.critique_iterations == 0).all()
    scores = score(sig)
    trajectory = aggregate(scores, tables.runs, "drift_index")
    assert trajectory.groupby("team")["round"].apply(sorted).to_dict() == dict.fromkeys(
        ANALYSTS, [1, 2, 3, 4]
    )


def test_eight_seats_plot_one_legend_entry_per_seat(run):
    tables = load_runs(
        run("format=panel", "format.analysts=8", "rounds=3", "format.judge=false").run_dir, cache=False
    )
    scores = score(compute_signals(tables, embedder="hash", progress=False).turns)
    fig = trajectories(scores, tables.runs)
    seats, cells = ([text.get_text() for text in legend.get_texts()] for legend in fig.legends)
    assert seats == [f"analyst_{c}" for c in "abcdefgh"] and len(cells) == 1
    colours = {line.get_color() for line in fig.axes[0].get_lines()} - {"grey"}  # less the zero line
    assert len(colours) == 8


def test_unreadable_line_in_a_seat_log_warns_and_keeps_what_precedes(run):
    run_dir = run(*PANEL).run_dir
    notes = run_dir / "analyst_b" / "thinking.jsonl"
    lines = notes.read_text().splitlines(keepends=True)
    notes.write_text("".join([*lines[:2], "not json\n", *lines[2:]]))
    with pytest.warns(RunReadWarning, match="unreadable"):
        t = load_runs(run_dir, cache=False)
    assert t.drafts.groupby("team").size().to_dict() == {
        "analyst_a": 4,
        "analyst_b": 2,
        "analyst_c": 4,
        "analyst_d": 4,
    }
    assert len(t.turns) == 16 and bool(t.runs.partial.iloc[0])


def test_a_root_of_both_formats_is_one_sweep(run, runs_root, capsys):
    drift = run("rounds=4", f"runs_root={runs_root}/drift").run_dir
    run(*PANEL, f"runs_root={runs_root}/panel")
    assert not load_runs(drift, cache=False).runs.cell_label.str.contains("format=").any()
    tables = load_runs(runs_root, cache=False)
    assert sorted(tables.runs.format) == ["drift", "panel"] and tables.runs.cell.nunique() == 2
    labels = dict(zip(tables.runs.format, tables.runs.cell_label, strict=True))
    # the format is all that differs: its own motion, roles and settings go with it
    assert labels == {"drift": "format=drift", "panel": "format=panel"}
    assert tables.turns.groupby(tables.turns.run_id.str.split("/").str[0]).size().to_dict() == {
        "drift": 8,
        "panel": 16,
    }
    sig = compute_signals(tables, embedder="hash", progress=False).turns
    by_format = sig.merge(tables.runs[["run_id", "format"]], on="run_id").groupby("format")
    text_signals = [c for c in sig.columns if c.startswith(("sem_", "vader", "big5_", "lsm_", "mtld"))]
    coverage = by_format[text_signals].count()
    assert (coverage.loc["drift"] > 0).all() and (coverage.loc["panel"] > 0).all()  # the same signals
    assert main([str(runs_root), "--embedder", "hash", "--no-progress"]) == 0
    out = runs_root / "_analysis"
    for name in (*TABLES, "turn_signals", "draft_signals", "scores", "trajectory"):
        assert (out / f"{name}.parquet").is_file(), name
    assert set(pd.read_parquet(out / "turn_signals.parquet").team) == {"pros", "cons", *ANALYSTS}
    for name in ("drift_trajectories", "sweep_heatmap", "signal_correlations", "approval_loop_lock"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
    assert "2 runs (0 from cache), 24 turns" in capsys.readouterr().out


def test_no_analysis_module_names_a_format_s_seats():
    pattern = re.compile(r"\b(pros|cons)\b", re.IGNORECASE)
    package = Path(__file__).resolve().parents[1] / "analysis"
    named = [str(p) for p in package.rglob("*.py") if pattern.search(p.read_text())]
    assert not named, f"seats must come from the run's layout: {named}"

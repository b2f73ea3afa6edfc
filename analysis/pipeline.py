"""The whole path from run folders to files: load, compute signals, score,
detect change points and trends, aggregate, and write ``_analysis/*.parquet`` and the
figures beside the runs. ``python -m analysis`` is a thin wrapper."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import analysis.plots as plots
from analysis.baseline import baseline_table
from analysis.compute import Signals, compute_signals
from analysis.embed import DEFAULT_EMBEDDER
from analysis.grounding import grounding_summary, grounding_turns
from analysis.interviews import consistency, interview_answers, interview_change
from analysis.labels import cells_table
from analysis.load import Tables, analysis_dir, load_runs
from analysis.pairs import branches
from analysis.probes import instruction_stability, probe_table
from analysis.scoring import aggregate, change_points, early_late, final_drift, score
from analysis.trend import trends


@dataclass
class Analysis:
    """Everything ``analyze`` computed, as tidy DataFrames."""

    tables: Tables
    signals: Signals
    scores: pd.DataFrame
    change_points: pd.DataFrame
    trajectory: pd.DataFrame
    early_late: pd.DataFrame
    final: pd.DataFrame
    trends: pd.DataFrame = field(default_factory=pd.DataFrame)  # Mann-Kendall per agent and score
    grounding_turns: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no grounded run
    grounding_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    probes: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no run was probed
    probe_stability: pd.DataFrame = field(default_factory=pd.DataFrame)
    interviews: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no run was interviewed
    interview_change: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per turn, similarity to the no-persona baseline runs (analysis.baseline); empty: none analysed
    baseline: pd.DataFrame = field(default_factory=pd.DataFrame)
    files: list[Path] = field(default_factory=list)


def write_parquet(df: pd.DataFrame, path: Path) -> Path:
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path)
    return path


def analyze(
    path: str | Path,
    *,
    embedder: str = DEFAULT_EMBEDDER,
    out_dir: Path | None = None,
    figures: bool = True,
    progress: bool = True,
    cache: bool = True,
    heatmap: Mapping[str, Any] | None = None,
) -> Analysis:
    """Analyse every run at or under ``path`` and write tables and figures to ``out_dir``
    (default ``_analysis`` beside the runs). ``heatmap``: the sweep heatmap's ``x``,
    ``y`` and ``average`` (``plots.sweep_heatmap``; default: by what varies)."""
    path = Path(path)
    out = out_dir or analysis_dir(path)
    tables = load_runs(path, cache=cache)
    if tables.runs.empty:
        raise FileNotFoundError(f"{path}: no run folders (no manifest.json found)")
    heatmap = dict(heatmap or {})
    plots.heatmap_keys(tables.runs, **heatmap)  # a key that names nothing fails before the signals
    result = compute(tables, embedder=embedder, progress=progress)
    out.mkdir(parents=True, exist_ok=True)
    result.files = write_tables(result, out)
    if figures:
        result.files += write_figures(result, out / "figures", heatmap)
    return result


def compute(tables: Tables, *, embedder: str, progress: bool) -> Analysis:
    """Every signal, score and summary of the loaded runs."""
    signals = compute_signals(tables, embedder=embedder, progress=progress)
    scores = score(signals.turns)
    grounded = grounding_turns(tables)  # empty unless some run is a grounded debate
    probes = probe_table(tables)  # empty unless some run was probed
    interviews = consistency(
        interview_answers(tables.run_dirs), embedder=embedder
    )  # empty unless interviewed
    return Analysis(
        tables=tables,
        signals=signals,
        scores=scores,
        change_points=change_points(scores),
        trajectory=pd.concat(
            [aggregate(scores, tables.runs, v) for v in ("drift_index", "drift_from_opening")]
        ),
        early_late=early_late(scores, tables.runs),
        final=final_drift(scores, tables.runs),
        trends=trends(scores),
        grounding_turns=grounded,
        grounding_summary=grounding_summary(grounded, tables),
        probes=probes,
        probe_stability=instruction_stability(probes),
        interviews=interviews,
        interview_change=interview_change(interviews),
        baseline=baseline_table(tables, embedder=embedder, progress=progress),
    )


def write_tables(result: Analysis, out: Path) -> list[Path]:
    """Every table as ``out/<name>.parquet``; the optional ones only when some run has them."""
    tables, signals = result.tables, result.signals
    named = {
        "runs": tables.runs,
        "turns": tables.turns,
        "drafts": tables.drafts,
        "personas": tables.personas,
        "events": tables.events,
        "public": tables.public,
        "turn_signals": signals.turns,
        "draft_signals": signals.drafts,
        "scores": result.scores,
        "change_points": result.change_points,
        "trajectory": result.trajectory,
        "early_late": result.early_late,
        "trends": result.trends,
        "cells": cells_table(tables.runs),  # per cell: its label and the keys that vary
    }
    files = [write_parquet(df, out / f"{name}.parquet") for name, df in named.items()]
    files += write_optional(
        out, {"grounding_turns": result.grounding_turns, "grounding_summary": result.grounding_summary}
    )
    files += write_optional(out, {"probes": result.probes, "probe_stability": result.probe_stability})
    files += write_optional(
        out, {"interviews": result.interviews, "interview_change": result.interview_change}
    )
    files += write_optional(out, {"baseline_similarity": result.baseline})  # outside the drift index
    return files


def write_optional(out: Path, named: dict[str, pd.DataFrame]) -> list[Path]:
    """Tables only some runs have (grounding, probes): written when the first
    is not empty, else removed, so the folder never holds rows of runs no
    longer there."""
    if next(iter(named.values())).empty:
        for name in named:
            (out / f"{name}.parquet").unlink(missing_ok=True)
        return []
    return [write_parquet(df, out / f"{name}.parquet") for name, df in named.items()]


def write_figures(result: Analysis, out: Path, heatmap: Mapping[str, Any] | None = None) -> list[Path]:
    runs = result.tables.runs
    files = [
        *plots.save(plots.trajectories(result.scores, runs), out, "drift_trajectories"),
        *plots.save(plots.sweep_heatmap(result.final, **(heatmap or {})), out, "sweep_heatmap"),
        *plots.save(plots.correlation_matrix(result.signals.turns), out, "signal_correlations"),
        *plots.save(plots.process_rates(result.signals.turns, runs), out, "approval_loop_lock"),
    ]
    sibs = branches(runs, result.tables.run_dirs)  # forks and their parents (analysis.pairs)
    if not sibs.empty:
        files += plots.save(plots.branches(result.scores, sibs), out, "fork_branches")
    return files

"""Drift analysis: signals, tables and plots from run folders.

    from analysis import load_runs, compute_signals, score, change_points
    tables = load_runs("research_runs/")          # runs, turns, drafts, personas, events, public
    signals = compute_signals(tables)             # one row per turn / per draft
    scores = score(signals.turns)                 # dimension scores + drift index per turn
    grounding = grounding_turns(tables)           # grounded debates: citations and searches per turn

Runs of every format load into the same tables: a turn is any published
statement, its ``team`` the seat that wrote it (seats come from each run's
layout, so any number of seats works).

``analyze(path)`` does all of it and writes ``_analysis/`` beside the runs
(``grounding_*.parquet`` too, when some run is a grounded debate).
Heavy packages (torch, sentence-transformers, ruptures...) load on first use.
"""

from analysis.compute import Signals, compute_signals, process_signals
from analysis.deps import MissingDependency
from analysis.embed import DEFAULT_EMBEDDER, get_embedder
from analysis.grounding import grounding_summary, grounding_table, grounding_turns
from analysis.judge import RUBRIC, judge_turns
from analysis.load import Tables, load_runs
from analysis.pipeline import Analysis, analyze
from analysis.plots import correlation_matrix, process_rates, sweep_heatmap, trajectories
from analysis.records_io import RunReadWarning, find_runs
from analysis.registry import DIMENSIONS, SIGNALS, Signal, markdown_table, signal_names
from analysis.scoring import aggregate, change_points, compare_cells, early_late, final_drift, score
from analysis.text import text_signals

__all__ = [
    "DEFAULT_EMBEDDER", "DIMENSIONS", "RUBRIC", "SIGNALS", "Analysis", "MissingDependency",
    "RunReadWarning", "Signal", "Signals", "Tables", "aggregate", "analyze", "change_points",
    "compare_cells", "compute_signals", "correlation_matrix", "early_late", "final_drift", "find_runs", "get_embedder",
    "grounding_summary", "grounding_table", "grounding_turns",
    "judge_turns", "load_runs", "markdown_table", "process_rates", "process_signals", "score",
    "signal_names", "sweep_heatmap", "text_signals", "trajectories",
]  # fmt: skip

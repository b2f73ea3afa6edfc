"""Drift analysis: signals, tables and plots from run folders.

    from analysis import load_runs, compute_signals, score, change_points
    tables = load_runs("research_runs/")          # runs, turns, drafts, personas, events, public
    signals = compute_signals(tables)             # one row per turn / per draft
    scores = score(signals.turns)                 # dimension scores + drift index per turn
    gradual = trends(scores)                      # Mann-Kendall trend per agent and score column
    grounding = grounding_turns(tables)           # grounded debates: citations and searches per turn
    print(format_controls(compare_controls(scores, tables.runs)))  # each cell against its controls
    flips = stance_flips(judge_stance(tables, "local:smollm2"))   # stance holding, with a judge model
    probes = probe_table(tables)                  # behavioural probes: one row per probe reply
    stability = instruction_stability(probes)     # probe pass rate per run, team and round

Runs of every format load into the same tables: a turn is any published
statement, its ``team`` the seat that wrote it (seats come from each run's
layout, so any number of seats works).

``analyze(path)`` does all of it and writes ``_analysis/`` beside the runs
(``grounding_*.parquet`` too, when some run is a grounded debate, and
``probes.parquet`` and ``probe_stability.parquet`` when some run was probed).
Heavy packages (torch, sentence-transformers, ruptures...) load on first use.
"""

from analysis.compare import (
    CONTROL_KEYS,
    compare_cells,
    compare_controls,
    control_pairs,
    find_control,
    format_comparison,
    format_controls,
)
from analysis.compute import Signals, compute_signals, process_signals
from analysis.deps import MissingDependency
from analysis.embed import DEFAULT_EMBEDDER, get_embedder, native_bf16
from analysis.grounding import grounding_summary, grounding_table, grounding_turns
from analysis.judge import RUBRIC, judge_turns
from analysis.load import Tables, load_runs
from analysis.pipeline import Analysis, analyze
from analysis.plots import correlation_matrix, process_rates, sweep_heatmap, trajectories
from analysis.probes import instruction_stability, probe_table
from analysis.records_io import RunReadWarning, find_runs
from analysis.registry import DIMENSIONS, SIGNALS, Signal, markdown_table, signal_names
from analysis.scoring import aggregate, change_points, early_late, final_drift, score
from analysis.stance import judge_stance, stance_flips
from analysis.text import text_signals
from analysis.trend import mann_kendall, trends

__all__ = [
    "DEFAULT_EMBEDDER",
    "DIMENSIONS",
    "RUBRIC",
    "SIGNALS",
    "Analysis",
    "MissingDependency",
    "RunReadWarning",
    "Signal",
    "Signals",
    "Tables",
    "aggregate",
    "analyze",
    "change_points",
    "CONTROL_KEYS",
    "compare_cells",
    "compare_controls",
    "control_pairs",
    "find_control",
    "format_comparison",
    "format_controls",
    "compute_signals",
    "correlation_matrix",
    "early_late",
    "final_drift",
    "find_runs",
    "get_embedder",
    "native_bf16",
    "grounding_summary",
    "grounding_table",
    "grounding_turns",
    "instruction_stability",
    "probe_table",
    "judge_stance",
    "judge_turns",
    "load_runs",
    "mann_kendall",
    "markdown_table",
    "process_rates",
    "process_signals",
    "score",
    "signal_names",
    "stance_flips",
    "sweep_heatmap",
    "text_signals",
    "trajectories",
    "trends",
]

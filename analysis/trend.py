"""Gradual drift: a Mann-Kendall trend test per agent and score column.

PELT (``scoring.change_points``) finds a regime that starts at one round; a
persona that drifts a little every round has no such round. Mann-Kendall
asks only whether later turns tend to score higher (or lower) than earlier
ones: ``S`` counts the pairs of rounds that rise minus those that fall, its
variance is corrected for ties (equal scores), and ``z`` (with a continuity
correction) gives a two-sided normal p-value. ``slope`` is Sen's slope, the
median of the pairwise slopes per round, robust to outliers. Rank-based, so
no distribution is assumed; turns are taken as independent, so a strongly
autocorrelated series gives p-values that are too small (check the false
alarms on stable runs, as ``benchmarks/detector_validity.py`` does).

An agent with several turns in one round is averaged per round first, so
time has no ties.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from analysis.registry import DIMENSIONS

AGENT = ["run_id", "team"]
COLUMNS = ["run_id", "team", "signal", "n", "S", "tau", "z", "p_value", "slope", "trend"]
MIN_POINTS = 3  # fewer points have no trend to test


@dataclass(frozen=True)
class MannKendall:
    """One series' test: ``tau`` is Kendall's tau-b between time and value."""

    n: int
    S: int
    tau: float
    z: float
    p_value: float
    slope: float


def mann_kendall(x: np.ndarray, t: np.ndarray | None = None) -> MannKendall:
    """Mann-Kendall test of ``x`` over increasing times ``t`` (default 0..n-1),
    with the ties-corrected variance and Sen's slope per unit of ``t``."""
    x = np.asarray(x, dtype=float)
    t = np.arange(len(x), dtype=float) if t is None else np.asarray(t, dtype=float)
    n = len(x)
    if n < MIN_POINTS:
        return MannKendall(n, 0, math.nan, math.nan, math.nan, math.nan)
    i, j = np.triu_indices(n, k=1)
    diff = x[j] - x[i]
    s = int(np.sign(diff).sum())
    _, counts = np.unique(x, return_counts=True)
    ties = counts[counts > 1]
    var = (n * (n - 1) * (2 * n + 5) - float((ties * (ties - 1) * (2 * ties + 5)).sum())) / 18
    pairs = n * (n - 1) / 2
    tied_pairs = float((ties * (ties - 1) / 2).sum())
    tau = s / math.sqrt(pairs * (pairs - tied_pairs)) if pairs > tied_pairs else math.nan
    z = (s - math.copysign(1, s)) / math.sqrt(var) if s != 0 and var > 0 else 0.0
    p = math.erfc(abs(z) / math.sqrt(2))  # two-sided normal tail
    slope = float(np.median(diff / (t[j] - t[i])))
    return MannKendall(n, s, tau, z, p, slope)


def trends(frame: pd.DataFrame, columns: list[str] | None = None, alpha: float = 0.05) -> pd.DataFrame:
    """Per run, team and column of a scores frame: the Mann-Kendall test over
    rounds, and its verdict at ``alpha`` (``up``, ``down`` or ``none``)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must be in (0, 1), got {alpha}")
    columns = columns or ["drift_index", *DIMENSIONS]
    rows = []
    for (run_id, team), group in frame.sort_values("order").groupby(AGENT):
        for col in [c for c in columns if c in group.columns]:
            series = group.groupby("round")[col].mean().dropna()
            test = mann_kendall(series.to_numpy(dtype=float), series.index.to_numpy(dtype=float))
            significant = test.p_value < alpha  # False for NaN (too short)
            trend = ("up" if test.S > 0 else "down") if significant else "none"
            rows.append({"run_id": run_id, "team": team, "signal": col, **asdict(test), "trend": trend})
    return pd.DataFrame(rows, columns=COLUMNS)

"""From signal values to drift: normalised per polarity into dimension
scores and a drift index per turn, drift distances, change points, and
aggregates over replicates with confidence intervals.

Normalisation: for each signal, ``z = (x - opening) / sd``, where ``opening``
is the agent's mean over its first ``BASELINE_TURNS`` turns and ``sd`` the
signal's standard deviation over all turns analysed. Oriented by polarity
(+1: z, -1: -z, 0: |z|), averaged within a dimension, then across the
dimensions of ``registry.DIMENSIONS``. Zero means "like the opening".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.deps import require
from analysis.registry import BY_NAME, DIMENSIONS, signal_names
from analysis.signals import BASELINE_TURNS

AGENT = ["run_id", "team"]


def zscores(turns: pd.DataFrame) -> pd.DataFrame:
    """Signed z of every text signal against the agent's opening turns."""
    names = [n for d in DIMENSIONS for n in signal_names(d) if n in turns.columns]
    ordered = turns.sort_values([*AGENT, "order"])
    values = ordered[names].astype(float)
    opening = values.groupby([ordered.run_id, ordered.team]).transform(
        lambda s: s.dropna().head(BASELINE_TURNS).mean()
    )
    sd = values.std(ddof=1).replace(0, np.inf).fillna(np.inf)
    z = (values - opening) / sd
    return pd.concat([ordered[[*AGENT, "round", "order"]], z], axis=1).sort_index()


def score(turns: pd.DataFrame) -> pd.DataFrame:
    """Per turn: one score per dimension, the drift index, and drift distances."""
    z = zscores(turns)
    out = z[[*AGENT, "round", "order"]].copy()
    for dim in DIMENSIONS:
        cols = [n for n in signal_names(dim) if n in z.columns]
        oriented = pd.DataFrame(
            {n: z[n] * BY_NAME[n].polarity if BY_NAME[n].polarity else z[n].abs() for n in cols}
        )
        out[dim] = oriented.mean(axis=1, skipna=True)
    out["drift_index"] = out[list(DIMENSIONS)].mean(axis=1, skipna=True)
    out[["drift_step", "drift_from_opening"]] = distances(z)
    return out


def distances(z: pd.DataFrame) -> pd.DataFrame:
    """RMS distance in z-space to the agent's previous turn and to its opening."""
    names = [c for c in z.columns if c in BY_NAME]
    out = pd.DataFrame(index=z.index, columns=["drift_step", "drift_from_opening"], dtype=float)
    for _, group in z.sort_values("order").groupby(AGENT):
        v = group[names].fillna(0.0).to_numpy()
        k = math.sqrt(max(v.shape[1], 1))
        opening = v[:BASELINE_TURNS].mean(0)
        step = np.r_[np.nan, np.linalg.norm(np.diff(v, axis=0), axis=1) / k]
        out.loc[group.index, "drift_step"] = step
        out.loc[group.index, "drift_from_opening"] = np.linalg.norm(v - opening, axis=1) / k
    return out


def noise_sigma(x: np.ndarray) -> float:
    """The series' sample SD. A shift inflates it, which makes detection
    conservative: a stable series rarely splits, a real shift still does.
    (A MAD-of-differences estimate gave false splits on 16-round series.)"""
    return float(np.std(x, ddof=1)) if len(x) > 1 else 0.0


def detect(x: np.ndarray, penalty: float = 4.0, min_size: int = 2) -> list[int]:
    """Change points of one series (indices where a new segment starts), PELT on an L2 cost
    with a BIC-like penalty ``penalty * sigma^2 * log(n)``."""
    rpt = require("ruptures")
    sigma = noise_sigma(x)
    if len(x) < 2 * min_size or sigma == 0:
        return []
    algo = rpt.Pelt(model="l2", min_size=min_size, jump=1).fit(x.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=penalty * sigma**2 * math.log(len(x)))[:-1]]


def change_points(
    frame: pd.DataFrame, columns: list[str] | None = None, penalty: float = 4.0, min_size: int = 2
) -> pd.DataFrame:
    """Change points per run, team and column: the round where each new regime starts."""
    columns = columns or ["drift_index", *DIMENSIONS]
    rows = []
    for (run_id, team), group in frame.sort_values("order").groupby(AGENT):
        for col in columns:
            series = group[["round", col]].dropna()
            for i in detect(series[col].to_numpy(dtype=float), penalty, min_size):
                rows.append(
                    {"run_id": run_id, "team": team, "signal": col, "round": int(series["round"].iloc[i])}
                )
    return pd.DataFrame(rows, columns=["run_id", "team", "signal", "round"])


def t_interval(values: pd.Series, level: float = 0.95) -> tuple[float, float]:
    """Student's t interval for the mean (NaNs dropped); NaN with fewer than two values."""
    stats = require("scipy.stats", "scipy")
    x = values.dropna().to_numpy(dtype=float)
    if len(x) < 2:
        return (math.nan, math.nan)
    half = stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return (float(x.mean() - half), float(x.mean() + half))


def with_cells(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Attach each run's sweep cell (its config less the seed) to ``frame``."""
    return frame.merge(runs[["run_id", "cell", "cell_label"]], on="run_id", how="left")


def aggregate(scores: pd.DataFrame, runs: pd.DataFrame, value: str = "drift_index") -> pd.DataFrame:
    """Mean of ``value`` per cell, team and round over replicates, with a 95% t interval."""
    per_run = (
        with_cells(scores, runs).groupby(["cell", "cell_label", "team", "round", "run_id"])[value].mean()
    )
    rows = []
    for (cell, label, team, round_), values in per_run.groupby(level=[0, 1, 2, 3]):
        low, high = t_interval(values)
        rows.append(
            {
                "cell": cell,
                "cell_label": label,
                "team": team,
                "round": round_,
                "value": value,
                "mean": float(values.mean()),
                "n_runs": int(values.count()),
                "ci_low": low,
                "ci_high": high,
            }
        )
    return pd.DataFrame(rows)


def early_late(
    scores: pd.DataFrame, runs: pd.DataFrame, value: str = "drift_index", share: float = 1 / 3
) -> pd.DataFrame:
    """Early (first ``share`` of rounds) versus late (last ``share``) per cell and team.

    With two or more replicates: a paired t-test over runs (one early and one
    late mean per run). With one run: Welch's t-test over its turns.
    """
    stats = require("scipy.stats", "scipy")
    frame = with_cells(scores, runs)
    last = frame.groupby("run_id")["round"].transform("max")
    cut = (last * share).clip(lower=1)
    phase = pd.Series(None, index=frame.index, dtype=object)
    phase[frame["round"] > last - cut] = "late"
    phase[frame["round"] <= cut] = "early"
    frame = frame.assign(phase=phase)
    rows = []
    for (cell, label, team), group in frame[frame.phase.notna()].groupby(["cell", "cell_label", "team"]):
        per_run = group.groupby(["run_id", "phase"])[value].mean().unstack("phase")
        if not {"early", "late"} <= set(per_run.columns):
            continue  # a side that spoke in one phase only (a moderated debate's closing side)
        per_run = per_run.dropna()
        if len(per_run) >= 2:
            test, result = "paired t over runs", stats.ttest_rel(per_run["late"], per_run["early"])
        else:
            early, late = (group[group.phase == p][value].dropna() for p in ("early", "late"))
            test, result = "Welch t over turns (one run)", stats.ttest_ind(late, early, equal_var=False)
        diff = per_run["late"] - per_run["early"]
        low, high = t_interval(diff)
        rows.append(
            {
                "cell": cell,
                "cell_label": label,
                "team": team,
                "value": value,
                "n_runs": len(per_run),
                "early_mean": float(per_run["early"].mean()),
                "late_mean": float(per_run["late"].mean()),
                "diff": float(diff.mean()),
                "diff_ci_low": low,
                "diff_ci_high": high,
                "test": test,
                "p_value": float(result.pvalue),
            }
        )
    return pd.DataFrame(rows)


def final_drift(scores: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's drift index in its last round (mean over teams), with its config."""
    last = scores[scores["round"] == scores.groupby("run_id")["round"].transform("max")]
    per_run = last.groupby("run_id", as_index=False)["drift_index"].mean()
    return per_run.merge(runs, on="run_id", how="left")

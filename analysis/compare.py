"""Two sweep cells side by side, and every cell beside its controls.

``compare_cells(scores, runs, a, b)`` compares cell ``b`` with cell ``a``
over their replicate runs, on the teams both cells have (a monologue control
has one seat):

- final drift index (each run's last round, mean over teams): means, the
  difference b - a with a 95% Welch interval, Welch's t-test;
- the drift index per round: per round, the mean of b minus the mean of a
  over runs (each run's value is its mean over teams), with a 95% Welch interval;
- Cohen's d over each run's mean drift index (all rounds and teams), with
  the pooled SD and a seeded percentile bootstrap CI that resamples runs
  within each cell;
- a two-sided permutation test of the difference in run means: exact over
  every relabelling of the runs when there are at most ``MAX_EXACT``, else
  seeded Monte Carlo with ``(1 + hits) / (1 + resamples)``
  (``permutation_p(..., alternative="greater")``: one-sided, b > a).

``holm(p_values)`` adjusts a family of p's (Holm's step-down).

A control cell (``conf/experiment/control_*.yaml``) is a cell whose config
differs from another's only in ``CONTROL_KEYS`` and whose ``cfg.control``
names the control. ``control_pairs(runs)`` lists every such pair present;
``compare_controls`` compares each (a = the control, b = the full debate, so
a positive difference is drift the control took away).
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from analysis.deps import require
from analysis.scoring import final_drift, with_cells
from analysis.tables import REPLICATE_KEYS

# The config keys a control preset changes; absent on older runs (read as unset).
CONTROL_KEYS = (
    "cfg.control",
    "cfg.experiment_name",
    "cfg.format.teams",
    "cfg.critic.approve_all",
    "cfg.format.cooperative",
    "cfg.format.persona",
)
RESAMPLES = 2000  # bootstrap resamples, and Monte Carlo relabellings when not exact
MAX_EXACT = 50_000  # the permutation test enumerates up to this many relabellings (9 vs 9: 48,620)
LEVEL = 0.95


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _control_of(row: dict[str, Any]) -> str | None:
    value = row.get("cfg.control")
    return None if _unset(value) else str(value)


def cells_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: its label, its control (None: not a control) and its
    ``base``, the config outside the replicate and control keys, as text."""
    keys = sorted(
        c for c in runs.columns if c.startswith("cfg.") and c not in REPLICATE_KEYS and c not in CONTROL_KEYS
    )
    rows = []
    for row in runs.to_dict("records"):
        base = json.dumps([[k, row[k]] for k in keys if not _unset(row[k])], default=str)
        rows.append(
            {"cell": row["cell"], "cell_label": row["cell_label"], "base": base, "control": _control_of(row)}
        )
    return pd.DataFrame(rows, columns=["cell", "cell_label", "base", "control"]).drop_duplicates("cell")


def find_control(runs: pd.DataFrame, cell: str, control: str) -> str | None:
    """The cell of ``control`` (``monologue``, ``no_critic``, ``cooperative``)
    paired with ``cell``: the same config outside ``CONTROL_KEYS``. None when
    no run of that control matches; ValueError when several cells do."""
    cells = cells_frame(runs)
    mine = cells[cells.cell == cell]
    if mine.empty:
        raise ValueError(f"cell {cell}: no run of that cell")
    found = cells[(cells.base == mine.base.iloc[0]) & (cells.control == control) & (cells.cell != cell)]
    if len(found) > 1:
        raise ValueError(f"cell {cell}: several {control} control cells match: {sorted(found.cell)}")
    return None if found.empty else str(found.cell.iloc[0])


def control_pairs(runs: pd.DataFrame) -> pd.DataFrame:
    """Every (cell, control cell, control name) present: ``cell`` is a run with no
    ``cfg.control``, ``control_cell`` one that differs from it only in ``CONTROL_KEYS``."""
    cells = cells_frame(runs)
    full = cells[cells.control.isna()].drop(columns="control")
    controls = cells[cells.control.notna()].rename(
        columns={"cell": "control_cell", "cell_label": "control_label"}
    )
    pairs = full.merge(controls, on="base")
    columns = ["cell", "cell_label", "control", "control_cell", "control_label"]
    return pairs[columns].sort_values(["cell_label", "control"]).reset_index(drop=True)


def welch_summary(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Sizes, means, mean(b) - mean(a) with its Welch interval, and Welch's p."""
    diff, low, high, p = welch(a, b)
    return {
        "n_a": len(a),
        "n_b": len(b),
        "mean_a": float(a.mean()) if len(a) else math.nan,
        "mean_b": float(b.mean()) if len(b) else math.nan,
        "diff": diff,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
    }


def welch(a: np.ndarray, b: np.ndarray, level: float = LEVEL) -> tuple[float, float, float, float]:
    """mean(b) - mean(a), its Welch interval and Welch's t-test p (NaN below 2 runs a side)."""
    stats = require("scipy.stats", "scipy")
    diff = float(b.mean() - a.mean()) if len(a) and len(b) else math.nan
    if len(a) < 2 or len(b) < 2:
        return diff, math.nan, math.nan, math.nan
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if va + vb > 0 else 1.0
    half = float(stats.t.ppf(0.5 + level / 2, dof)) * math.sqrt(va + vb)
    with warnings.catch_warnings():  # runs with identical values: scipy warns, p is what it is
        warnings.simplefilter("ignore", RuntimeWarning)
        p = float(stats.ttest_ind(b, a, equal_var=False).pvalue)
    return diff, diff - half, diff + half, p


def cohens_d(a: np.ndarray, b: np.ndarray) -> float:
    """(mean(b) - mean(a)) / pooled SD; NaN below 2 runs a side or with no spread."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    pooled = math.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))
    return float((b.mean() - a.mean()) / pooled) if pooled > 0 else math.nan


def bootstrap_d(
    a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile interval of Cohen's d, resampling runs within each cell."""
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    xa = a[rng.integers(0, len(a), (resamples, len(a)))]
    xb = b[rng.integers(0, len(b), (resamples, len(b)))]
    pooled = np.sqrt(
        ((len(a) - 1) * xa.var(1, ddof=1) + (len(b) - 1) * xb.var(1, ddof=1)) / (len(a) + len(b) - 2)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(pooled > 0, (xb.mean(1) - xa.mean(1)) / pooled, np.nan)
    if np.isnan(d).all():  # every resample without spread
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    low, high = np.nanpercentile(d, [tail, 100 - tail])
    return float(low), float(high)


def permutation_p(
    a: np.ndarray,
    b: np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = 0,
    max_exact: int = MAX_EXACT,
    alternative: str = "two-sided",
) -> tuple[float, str]:
    """Permutation p of mean(b) - mean(a) over relabellings of the runs, and how
    it was computed (``exact, k relabellings`` or ``monte carlo, k relabellings``).
    ``alternative``: ``two-sided``, ``greater`` (b > a) or ``less`` (b < a)."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative {alternative!r}: choose from {', '.join(ALTERNATIVES)}")
    if not len(a) or not len(b):
        return math.nan, "none"
    pooled, n_a = np.concatenate([a, b]), len(a)
    observed = b.mean() - a.mean()
    total, count = pooled.sum(), math.comb(len(pooled), n_a)
    if count <= max_exact:
        picks = np.array(list(itertools.combinations(range(len(pooled)), n_a)))
        sum_a = pooled[picks].sum(1)
        extreme = as_extreme((total - sum_a) / len(b) - sum_a / n_a, observed, alternative)
        return float(np.mean(extreme)), f"exact, {count} relabellings"
    rng = np.random.default_rng(seed)
    order = rng.permuted(np.tile(np.arange(len(pooled)), (resamples, 1)), axis=1)
    sum_a = pooled[order[:, :n_a]].sum(1)
    hits = int(np.sum(as_extreme((total - sum_a) / len(b) - sum_a / n_a, observed, alternative)))
    return (1 + hits) / (1 + resamples), f"monte carlo, {resamples} relabellings"


ALTERNATIVES = ("two-sided", "greater", "less")


def as_extreme(diffs: np.ndarray, observed: float, alternative: str) -> np.ndarray:
    """Which relabellings' differences are at least as extreme as the observed one."""
    if alternative == "greater":
        return diffs >= observed - 1e-12
    if alternative == "less":
        return diffs <= observed + 1e-12
    return np.abs(diffs) >= abs(observed) - 1e-12


def holm(p_values: Any) -> np.ndarray:
    """Holm's step-down adjusted p's, in the order given: the i-th smallest of m
    times (m - i + 1), made non-decreasing and capped at 1. NaN stays NaN and is
    not counted in m."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    known = ~np.isnan(p)
    order = np.argsort(p[known], kind="stable")
    m = len(order)
    adjusted = np.minimum(np.maximum.accumulate(p[known][order] * (m - np.arange(m))), 1.0)
    ranked = np.empty(m)
    ranked[order] = adjusted
    out[known] = ranked
    return out


def per_round(frame: pd.DataFrame, cell_a: str, cell_b: str, value: str = "drift_index") -> pd.DataFrame:
    """Per round: mean of b minus mean of a over runs (a run's value: its mean over
    teams), with a Welch interval. ``frame`` is scores with a ``cell`` column."""
    frame = frame[frame.cell.isin([cell_a, cell_b])]  # another cell's longer runs: rows of no run here
    by_run = frame.groupby(["round", "cell", "run_id"])[value].mean().dropna().reset_index()
    rows = []
    for round_, group in by_run.groupby("round"):
        a, b = (group[group.cell == c][value].to_numpy(dtype=float) for c in (cell_a, cell_b))
        rows.append({"round": int(round_), **welch_summary(a, b)})
    return pd.DataFrame(
        rows, columns=["round", "n_a", "n_b", "mean_a", "mean_b", "diff", "ci_low", "ci_high"]
    )


def compare_cells(
    scores: pd.DataFrame,
    runs: pd.DataFrame,
    cell_a: str,
    cell_b: str,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[str, Any]:
    """Cell b against cell a, on the teams both have (see the module docstring).
    Scalars: ``n_a n_b mean_a mean_b diff ci_low ci_high p_value`` (final drift
    index, Welch), ``run_mean_a run_mean_b cohens_d d_ci_low d_ci_high perm_p
    perm_method`` (runs' mean drift index); also ``teams`` and ``per_round``."""
    frame = with_cells(scores, runs)
    teams = sorted(set(frame[frame.cell == cell_a].team) & set(frame[frame.cell == cell_b].team))
    shared = scores[scores.team.isin(teams)]
    final = final_drift(shared, runs)
    a, b = (final[final.cell == c].drift_index.dropna().to_numpy(dtype=float) for c in (cell_a, cell_b))
    summary = welch_summary(a, b)
    frame = frame[frame.team.isin(teams)]
    means = frame.groupby(["cell", "run_id"]).drift_index.mean().dropna().reset_index()
    ma, mb = (means[means.cell == c].drift_index.to_numpy(dtype=float) for c in (cell_a, cell_b))
    d_low, d_high = bootstrap_d(ma, mb, resamples, seed)
    perm_p, method = permutation_p(ma, mb, resamples, seed)
    return {
        **summary,
        "teams": teams,
        "run_mean_a": float(ma.mean()) if len(ma) else math.nan,
        "run_mean_b": float(mb.mean()) if len(mb) else math.nan,
        "cohens_d": cohens_d(ma, mb),
        "d_ci_low": d_low,
        "d_ci_high": d_high,
        "perm_p": perm_p,
        "perm_method": method,
        "per_round": per_round(frame, cell_a, cell_b),
        "incomplete": incomplete(runs, {"A": cell_a, "B": cell_b}),
    }


def incomplete(runs: pd.DataFrame, cells: dict[str, str]) -> list[str]:
    """``<arm>: <run> (<status>)`` for each run of the cells that did not complete: its
    final drift index is its last round's, an earlier or a partial one."""
    if "status" not in runs.columns:
        return []
    short = runs[runs.status != "completed"]
    return [
        f"{arm}: {r.run_id} ({status_text(r.status)})"
        for arm, cell in cells.items()
        for r in short[short.cell == cell].itertuples()
    ]


def status_text(status: str | None) -> str:
    """A manifest's status as said of a run: one that says running is what a kill -9
    leaves too (its manifest as the run started), as ``harness.export`` words it."""
    return "running, or was killed" if status == "running" else str(status)


def compare_controls(scores: pd.DataFrame, runs: pd.DataFrame, **options: Any) -> list[dict[str, Any]]:
    """``compare_cells`` of every pair of ``control_pairs``: a = the control cell,
    b = the full debate. Each result carries its pair's columns too."""
    return [
        {**pair, **compare_cells(scores, runs, pair["control_cell"], pair["cell"], **options)}
        for pair in control_pairs(runs).to_dict("records")
    ]


def _num(x: float, digits: int = 3) -> str:
    return "nan" if _unset(x) else f"{x:.{digits}f}"


def format_comparison(result: dict[str, Any], label_a: str = "A", label_b: str = "B") -> str:
    """``compare_cells``' result as a few lines and the per-round table."""
    r = result
    lines = [
        f"A = {label_a} ({r['n_a']} runs)",
        f"B = {label_b} ({r['n_b']} runs)",
        f"teams compared: {', '.join(r['teams']) or 'none in common'}",
        f"final drift index: A {_num(r['mean_a'])}, B {_num(r['mean_b'])}, B - A {_num(r['diff'])} "
        f"[95% CI {_num(r['ci_low'])}, {_num(r['ci_high'])}], Welch p_value {_num(r['p_value'])}",
        f"mean drift index per run: A {_num(r['run_mean_a'])}, B {_num(r['run_mean_b'])}, "
        f"Cohen's d {_num(r['cohens_d'], 2)} [bootstrap 95% CI {_num(r['d_ci_low'], 2)}, "
        f"{_num(r['d_ci_high'], 2)}], permutation p {_num(r['perm_p'])} ({r['perm_method']})",
        "drift index per round, B - A (95% Welch CI):",
    ]
    table = r["per_round"].to_string(index=False, float_format=lambda x: f"{x:.3f}")
    short = r.get("incomplete") or []
    note = (
        [
            f"note: {len(short)} run(s) did not complete: {', '.join(short)}; the final drift index "
            "of each is its last round's, an earlier or a partial one (python -m harness.resume <run>)"
        ]
        if short
        else []
    )
    return "\n".join([*lines, table, *note])


def format_controls(results: list[dict[str, Any]]) -> str:
    """Every cell-versus-control comparison, or one line saying there is none."""
    if not results:
        return (
            "no control cells found (runs made with experiment=control_monologue, control_no_critic or "
            "control_cooperative beside the same config without it)"
        )
    blocks = [
        f"== {r['control']} control ==\n"
        + format_comparison(r, f"control {r['control']}: {r['control_label']}", f"full: {r['cell_label']}")
        for r in results
    ]
    return "\n\n".join(blocks)


def resolve_cell(runs: pd.DataFrame, name: str) -> str:
    """A cell named by its hash, a unique prefix of it, or its exact label."""
    cells = runs[["cell", "cell_label"]].drop_duplicates("cell")
    found = cells[(cells.cell == name) | (cells.cell_label == name)]
    if found.empty:
        found = cells[cells.cell.str.startswith(name)]
    if len(found) != 1:
        known = "; ".join(f"{c} ({label})" for c, label in cells.itertuples(index=False))
        why = "names several cells" if len(found) > 1 else "names no cell"
        raise ValueError(f"--cell {name}: {why}; cells: {known}")
    return str(found.cell.iloc[0])

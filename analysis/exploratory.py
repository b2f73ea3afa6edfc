"""The exploratory study's claims, for ``docs/findings.md``: every debate cell
against each of its controls (``analysis.compare``) with Holm's correction
over the grid and the design's power (``analysis.power``), one verdict line
per contrast, and the change-point and trend detectors' results beside their
validated error rates.

The grid is one family: Holm's step-down correction over its permutation
p's decides "supported". A contrast whose power at the stated d was below
``TARGET`` (0.8) is "inconclusive", never "not supported": at 3 vs 3 runs a
two-sided exact test cannot give p below 0.10, so no effect could have shown.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.compare import compare_controls, holm
from analysis.pipeline import Analysis
from analysis.power import TARGET, condition_of, power, smallest_p
from analysis.scoring import change_points
from analysis.study import POWER_D
from analysis.trend import trends

ALPHA = 0.05


def md_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as a Markdown table (no tabulate dependency)."""
    if frame.empty:
        return "_(none)_"

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "–" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v).replace("|", "/")

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *rows])


def detector_section(path: Path) -> list[str]:
    """The detector validation figures, as ``benchmarks/detector_validity.py --json`` wrote them:
    its settings, its goal lines and the held-out rate of every cell and metric."""
    if not path.is_file():
        return [
            f"_Not available: `{path}` is missing. Run `python benchmarks/detector_validity.py "
            f"--json {path}` and then `python -m analysis study --report-only`._"
        ]
    data = json.loads(path.read_text())
    params = ", ".join(f"{k} = {v}" for k, v in data.get("params", {}).items())
    seeds = ", ".join(f"{k} {v}" for k, v in data.get("seeds", {}).items())
    lines = [
        f"From `{path}` (`benchmarks/detector_validity.py`: scripted model, planted truth, "
        f"{data.get('rounds')}-round runs, embedder `{data.get('embedder')}`).",
        "",
        f"- settings chosen on the tuning seeds: {params}",
        f"- seeds: {seeds}",
        *(f"- {line.strip()}" for line in data.get("goals", [])),
        "",
    ]
    tables = {k: v for k, v in data.get("tables", {}).items() if not k.startswith("tuning")}
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for name, cells in tables.items():
        for cell, metrics in cells.items():
            for metric, r in metrics.items():
                rows.setdefault((cell, metric), {})[name] = f"{100 * r['rate']:.0f}% ({r['count']}/{r['n']})"
    frame = pd.DataFrame([{"cell": c, "metric": m, **v} for (c, m), v in rows.items()])
    return [
        *lines,
        "Held-out rates per cell (hit: a change point at k±1; false: any on a stable run; "
        "power: a trend on a drifting run):",
        "",
        md_table(frame.fillna("")),
    ]


def comparisons(result: Analysis, power_d: float = POWER_D) -> tuple[pd.DataFrame, list[str]]:
    """Every debate cell against its controls: a table and one verdict line each.
    The grid is one family: Holm's correction over its permutation p's decides
    "supported"; a contrast whose power at ``power_d`` was below ``TARGET`` is
    "inconclusive" whatever its p."""
    found = compare_controls(result.scores, result.tables.runs)
    adjusted = holm([r["perm_p"] for r in found])
    rows, verdicts = [], []
    for r, holm_p in zip(found, adjusted, strict=True):
        had = power(r["n_a"], r["n_b"], power_d, ALPHA)
        rows.append(
            {
                "cell": r["cell_label"],
                "control": r["control"],
                "runs (debate/control)": f"{r['n_b']}/{r['n_a']}",
                "final diff (debate − control)": r["diff"],
                "Cohen's d": r["cohens_d"],
                "d 95% CI": f"[{r['d_ci_low']:.2f}, {r['d_ci_high']:.2f}]",
                "permutation p": r["perm_p"],
                "Holm p": holm_p,
                f"power at d = {power_d:g}": had,
            }
        )
        verdicts.append(verdict(r, holm_p, had, power_d))
    return pd.DataFrame(rows), verdicts


def verdict(r: dict[str, Any], holm_p: float, had: float, power_d: float) -> str:
    """One contrast's line: supported (Holm), inconclusive (power below TARGET) or not supported."""
    floor = smallest_p(r["n_a"], r["n_b"])
    where = f"{r['cell_label']} vs {r['control']}"
    ps = f"p = {r['perm_p']:.3f}, Holm p = {holm_p:.3f}"
    if holm_p < ALPHA and (r["d_ci_low"] > 0 or r["d_ci_high"] < 0):
        side = "more" if r["cohens_d"] > 0 else "less"
        return f"- **Supported:** {where}: the debate drifts {side} than the control (d = {r['cohens_d']:.2f}, {ps})."
    if had < TARGET:
        why = (
            f"the smallest p an exact test of {r['n_b']} vs {r['n_a']} runs can reach is {floor:.2f}, so "
            "no effect could have shown"
            if floor > ALPHA
            else f"{ps}; power {had:.2f} to detect d = {power_d:g}, below {TARGET}"
        )
        return f"- **Inconclusive:** {where} (d = {r['cohens_d']:.2f}; {why})."
    return (
        f"- **Not supported:** a difference for {where} (d = {r['cohens_d']:.2f}; {ps}; "
        f"power {had:.2f} to detect d = {power_d:g})."
    )


def detector_params(path: Path) -> dict[str, Any]:
    """The settings ``benchmarks/detector_validity.py`` chose on its tuning seeds
    (``params`` in its JSON), or the library defaults when there is none."""
    found = json.loads(path.read_text()).get("params", {}) if path.is_file() else {}
    default = {"pelt_column": "drift_index", "penalty": 4.0, "trend_column": "drift_index", "alpha": 0.05}
    return {**default, **found, "validated": bool(found)}


def detection_summary(result: Analysis, params: dict[str, Any]) -> pd.DataFrame:
    """Per cell: agents with a change point, and with a Mann-Kendall trend, at ``params``."""
    runs = result.tables.runs.assign(condition=condition_of(result.tables.runs))
    label = runs.set_index("run_id")[["cfg.model.spec", "cfg.llm.temperature", "condition"]]
    agent = ["run_id", "team"]
    cps = change_points(result.scores, [params["pelt_column"]], penalty=params["penalty"])
    tr = trends(result.scores, [params["trend_column"]], alpha=params["alpha"]).set_index(agent).trend
    keys = result.scores[agent].drop_duplicates().set_index(agent).index
    agents = pd.DataFrame(
        {
            "run_id": keys.get_level_values(0),
            "team": keys.get_level_values(1),
            "change_point": keys.isin(cps.set_index(agent).index),
            "trend": [tr.get(k, "none") for k in keys],
        }
    ).join(label, on="run_id")
    rows = []
    for (model, temp, condition), g in agents.groupby(list(label.columns)):
        rows.append(
            {
                "model": model,
                "T": temp,
                "condition": condition,
                "agents": len(g),
                "with a change point": int(g.change_point.sum()),
                "trend up": int((g.trend == "up").sum()),
                "trend down": int((g.trend == "down").sum()),
            }
        )
    return pd.DataFrame(rows)

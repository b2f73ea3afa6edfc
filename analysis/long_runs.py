"""Long trajectories for ``docs/findings.md``: each long run's seats round by
round, with change points and trends at the validated detector settings, and
the time each run took.

    python -m analysis study --report-only --long research_runs/long ...

Every run folder under the root is one row, whatever its format; a run still
going or stopped part-way is shown with the rounds it has (its status says so).
The detector settings are the ones ``benchmarks/detector_validity.py`` chose
(``analysis.exploratory.detector_params``): the real-text block's when it
exists, else the scripted one's, and the section names which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

import analysis.plots as plots
from analysis.exploratory import detector_params, md_table
from analysis.pipeline import Analysis, analyze
from analysis.scoring import change_points
from analysis.trend import trends


def settings(detector: Path) -> tuple[dict[str, Any], str]:
    """The detector settings and where they come from (real-text tuning or scripted)."""
    data = json.loads(detector.read_text()) if detector.is_file() else {}
    real = data.get("real_text", {}).get("params")
    if real:
        return {**detector_params(detector), **real, "validated": True}, "tuned on real-text splices"
    params = detector_params(detector)
    return params, "tuned on scripted runs" if params[
        "validated"
    ] else "library defaults (no validation found)"


def run_rows(result: Analysis) -> pd.DataFrame:
    """One row per run: format, model, status, rounds reached, seats and wall time."""
    rows = []
    for run_id, run_dir in result.tables.run_dirs.items():
        manifest = json.loads((run_dir / "manifest.json").read_text())
        scores = result.scores[result.scores.run_id == run_id]
        wall = manifest.get("wall_s")
        rows.append(
            {
                "run": run_id,
                "format": manifest.get("format"),
                "model": ", ".join(sorted(set(manifest.get("model_specs", {}).values()))),
                "status": manifest.get("status"),
                "rounds": int(scores["round"].max()) if len(scores) else 0,
                "seats": scores.team.nunique(),
                "turns": len(scores),
                "wall (min)": round(wall / 60, 1) if wall else None,
            }
        )
    return pd.DataFrame(rows).sort_values(["format", "run"])


def seat_rows(result: Analysis, params: dict[str, Any]) -> pd.DataFrame:
    """One row per seat: its change points' rounds and its trend, on the validated columns."""
    cps = change_points(result.scores, [params["pelt_column"]], penalty=params["penalty"])
    tr = trends(result.scores, [params["trend_column"]], alpha=params["alpha"]).set_index(["run_id", "team"])
    rows = []
    for (run_id, team), g in result.scores.groupby(["run_id", "team"]):
        rounds = cps[(cps.run_id == run_id) & (cps.team == team)]["round"].tolist()
        index = g.sort_values("round").drift_index.dropna()
        rows.append(
            {
                "run": run_id,
                "seat": team,
                "turns": len(g),
                "change points (round)": ", ".join(map(str, rounds)) or "none",
                "trend": tr.trend.get((run_id, team), "none"),
                "drift index first": float(index.iloc[0]) if len(index) else None,
                "drift index last": float(index.iloc[-1]) if len(index) else None,
            }
        )
    return pd.DataFrame(rows)


def long_section(root: Path, docs: Path, detector: Path, embedder: str) -> list[str]:
    """The "Long trajectories" section's lines, with its figure saved under ``docs/images``."""
    result = analyze(root, embedder=embedder, progress=False, figures=False)
    params, source = settings(detector)
    figure = plots.trajectories(result.scores, result.tables.runs)
    saved = plots.save(figure, docs / "images", "findings_long")
    image = saved[0].relative_to(docs) if saved else None
    lines = [
        "## Long trajectories",
        "",
        f"Every run under `{root}`: SmolLM2, lazy grammar and the prefix cache, one llama.cpp thread each "
        "(`DRIFT_WORKERS=2`), 96 tokens a reply. Change points: PELT on "
        f"`{params['pelt_column']}` (penalty {params['penalty']}); trends: Mann-Kendall on "
        f"`{params['trend_column']}` at α = {params['alpha']}; settings {source}.",
        "",
        md_table(run_rows(result)),
        "",
        md_table(seat_rows(result, params)),
        "",
    ]
    return [*lines, f"![drift index per round, long runs]({image})", ""] if image else lines

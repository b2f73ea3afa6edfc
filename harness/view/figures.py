"""The drift trajectory of one run, per seat, with its change points, as
inline SVG (matplotlib's SVG backend: no files, no internet), when the run
has been analysed (``python -m analysis``) and its ``_analysis/`` is there."""

from __future__ import annotations

import io
from pathlib import Path


def analysis_of(root: Path, key: str, run_dir: Path) -> tuple[Path, str] | None:
    """Where this run's analysis is, and its run id there: the root's tree
    analysis, or an analysis of the run folder alone."""
    for folder, run_id in (
        (root / "_analysis", key),
        (run_dir.parent / "_analysis" / run_dir.name, run_dir.name),
    ):
        if (folder / "scores.parquet").is_file():
            return folder, run_id
    return None


def trajectory_svg(root: Path, key: str, run_dir: Path) -> str | None:
    """The drift index per seat by round, change points dashed; None when there is no analysis."""
    found = analysis_of(root, key, run_dir)
    if found is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    folder, run_id = found
    scores = pd.read_parquet(folder / "scores.parquet")
    scores = scores[scores["run_id"] == run_id]
    if scores.empty:
        return None
    points = folder / "change_points.parquet"
    changes = (
        pd.read_parquet(points)
        if points.is_file()
        else pd.DataFrame(columns=["run_id", "team", "signal", "round"])
    )
    changes = changes[(changes["run_id"] == run_id) & (changes["signal"] == "drift_index")]
    fig, ax = plt.subplots(figsize=(8, 2.8))
    for team, group in scores.sort_values("round").groupby("team"):
        line = ax.plot(group["round"], group["drift_index"], marker=".", label=str(team))[0]
        for r in changes[changes["team"] == team]["round"]:
            ax.axvline(r, color=line.get_color(), linestyle="--", linewidth=1)
    ax.set_xlabel("round")
    ax.set_ylabel("drift index")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg")
    plt.close(fig)
    svg = out.getvalue()
    return svg[svg.index("<svg") :]

"""Figures as inline SVG (matplotlib's SVG backend: no files, no internet):
the drift trajectory of one run, per seat, with its change points, when the
run has been analysed (``python -m analysis``) and its ``_analysis/`` is
there; and the live sweep page's pictures, drawn from what its logs say."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


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
    fig, ax = _axes(2.8)
    for team, group in scores.sort_values("round").groupby("team"):
        line = ax.plot(group["round"], group["drift_index"], marker=".", label=str(team))[0]
        for r in changes[changes["team"] == team]["round"]:
            ax.axvline(r, color=line.get_color(), linestyle="--", linewidth=1)
    ax.set_xlabel("round")
    ax.set_ylabel("drift index")
    ax.legend(loc="upper left", fontsize=8)
    return _svg(fig)


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    out = io.StringIO()
    fig.tight_layout()
    fig.savefig(out, format="svg")
    plt.close(fig)
    svg = out.getvalue()
    return svg[svg.index("<svg") :]


def _axes(height: float = 2.6) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(8, height))


def limits_svg(series: dict[str, Sequence[tuple[str, float, str]]]) -> str | None:
    """Each shared limiter's limit over time (``limits.jsonl``), its 429 cuts marked; None: no changes."""
    from datetime import datetime

    drawn = {key: points for key, points in series.items() if points}
    if not drawn:
        return None
    fig, ax = _axes()
    for key, points in drawn.items():
        times = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t, _, _ in points]
        line = ax.step(times, [limit for _, limit, _ in points], where="post", label=key[:60])[0]
        cuts = [(t, v) for t, (_, v, why) in zip(times, points, strict=True) if why == "429"]
        if cuts:
            ax.plot(*zip(*cuts, strict=True), "v", color=line.get_color(), label="429 cut")
    ax.set_ylabel("calls in flight allowed")
    ax.legend(loc="upper left", fontsize=7)
    fig.autofmt_xdate()
    return _svg(fig)


def rounds_svg(cells: Mapping[str, Mapping[int, float]], ylabel: str = "model calls") -> str | None:
    """Each running cell's value by round, as its rounds land: its model calls (more calls
    in a round: more drafts rejected, retried or repaired) or its drift index; None: no
    round landed yet."""
    drawn = {name: by_round for name, by_round in cells.items() if by_round}
    if not drawn:
        return None
    fig, ax = _axes()
    for name, by_round in drawn.items():
        ax.plot(list(by_round), list(by_round.values()), marker=".", label=name[:40])
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.legend(loc="upper left", fontsize=7)
    return _svg(fig)


def sweep_drift_svg(sweep_dir: Path, cells: Sequence[str]) -> str | None:
    """Each cell's drift index by round (the mean over its seats), from the sweep's own
    analysis (``python -m analysis <sweep>``: ``<sweep>/_analysis/scores.parquet``); None: none."""
    path = sweep_dir / "_analysis" / "scores.parquet"
    if not path.is_file():
        return None
    import pandas as pd

    scores = pd.read_parquet(path, columns=["run_id", "round", "drift_index"])
    scores = scores[scores["run_id"].isin(list(cells))]
    if scores.empty:
        return None
    fig, ax = _axes()
    for cell, group in scores.groupby("run_id"):
        by_round = group.groupby("round")["drift_index"].mean()
        ax.plot(by_round.index, by_round.to_numpy(), marker=".", label=str(cell)[:40])
    ax.set_xlabel("round")
    ax.set_ylabel("drift index")
    ax.legend(loc="upper left", fontsize=7)
    return _svg(fig)

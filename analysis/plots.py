"""Figures, each saved as PNG and SVG: drift trajectories with CI bands,
sweep heatmaps, the signal correlation matrix, approval and loop-lock rates.
Every function takes tidy tables and returns the matplotlib figure."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.typing import RGBAColorType

from analysis.registry import DIMENSIONS, signal_names
from analysis.scoring import aggregate


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    for path in paths:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return paths


def seat_order(runs: pd.DataFrame) -> list[str]:
    """Every seat of the runs, in layout order, formats in the order their runs come."""
    seats: dict[str, None] = {}
    for listed in runs.get("seats", pd.Series(dtype=object)).dropna():
        seats.update(dict.fromkeys(json.loads(listed)))
    return list(seats)


def _seat_colours(seats: list[str]) -> dict[str, RGBAColorType]:
    cmap = plt.get_cmap("tab10" if len(seats) <= 10 else "tab20")
    return {seat: cmap(i % cmap.N) for i, seat in enumerate(seats)}


# cells differ by line style, then marker: with colour per seat, a legend
# needs one entry per seat plus one per cell, not one per seat and cell
STYLES = [(ls, m) for m in ("", "o", "s", "^") for ls in ("-", "--", ":", "-.")]
MAX_CELLS_SHOWN = 12


def _legends(fig: Figure, colours: dict[str, RGBAColorType], cells: list[tuple[str, str]]) -> None:
    seat_handles = [Line2D([], [], color=c, lw=2, label=seat) for seat, c in colours.items()]
    fig.legend(handles=seat_handles, title="seat", loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    cell_handles = [
        Line2D(
            [],
            [],
            color="black",
            ls=STYLES[i % len(STYLES)][0],
            marker=STYLES[i % len(STYLES)][1],
            label=f"{label} [{cell[:6]}]",
        )
        for i, (cell, label) in enumerate(cells[:MAX_CELLS_SHOWN])
    ]
    if len(cells) > MAX_CELLS_SHOWN:
        cell_handles.append(
            Line2D([], [], color="none", label=f"... {len(cells) - MAX_CELLS_SHOWN} more cells")
        )
    fig.legend(
        handles=cell_handles, title="cell", loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=7
    )


def trajectories(scores: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """Drift per dimension (and the index) across rounds, one line per cell and seat, 95% CI bands.
    Colour is the seat, line style the cell, so 4-8 seats and several cells stay legible."""
    panels = [*DIMENSIONS, "drift_index"]
    seats = seat_order(runs)
    seats += sorted(set(scores.team.dropna()) - set(seats))  # seats the runs table does not list
    colours = _seat_colours(seats)
    cells = list(dict.fromkeys(zip(runs.cell, runs.cell_label, strict=True)))
    style = {cell: STYLES[i % len(STYLES)] for i, (cell, _) in enumerate(cells)}
    fig, axes = plt.subplots(2, 3, figsize=(14, 7), sharex=True)
    for ax, value in zip(axes.flat, panels, strict=True):
        agg = aggregate(scores, runs, value)
        for (cell, team), g in agg.groupby(["cell", "team"]):
            g = g.sort_values("round")
            ls, marker = style.get(cell, STYLES[0])
            colour = colours[team]
            ax.plot(g["round"], g["mean"], color=colour, ls=ls, marker=marker, markersize=3)
            ax.fill_between(g["round"], g["ci_low"], g["ci_high"], color=colour, alpha=0.1)
        ax.set_title(value)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.flat[0].set_ylabel("drift (z from opening)")
    fig.tight_layout()
    _legends(fig, colours, cells)
    return fig


def condition_trajectories(scores: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """Drift index per round, one panel per (model, temperature), one line per
    condition (``runs.condition``): the mean over runs of each run's mean over
    teams, with a band of one standard error."""
    frame = scores.merge(runs[["run_id", "condition", "cfg.model.spec", "cfg.llm.temperature"]], on="run_id")
    per_run = frame.groupby(["cfg.model.spec", "cfg.llm.temperature", "condition", "run_id", "round"])
    per_run = per_run.drift_index.mean().reset_index()
    panels = sorted(per_run.groupby(["cfg.model.spec", "cfg.llm.temperature"]).groups)
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.2 * max(len(panels), 1), 3.4), squeeze=False)
    for ax, (model, temp) in zip(axes.flat, panels, strict=False):
        panel = per_run[(per_run["cfg.model.spec"] == model) & (per_run["cfg.llm.temperature"] == temp)]
        for condition, g in panel.groupby("condition"):
            stats = g.groupby("round").drift_index.agg(["mean", "sem"]).reset_index()
            ax.plot(stats["round"], stats["mean"], marker="o", markersize=3, label=condition)
            ax.fill_between(
                stats["round"],
                stats["mean"] - stats["sem"].fillna(0),
                stats["mean"] + stats["sem"].fillna(0),
                alpha=0.15,
            )
        ax.set_title(f"{model}, T={temp}", fontsize=9)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.flat[0].set_ylabel("drift index (z from opening)")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _panel_names(frame: pd.DataFrame) -> pd.Series:
    """One heatmap panel per critic, and per format when there are several
    (a format without a critic has one panel of its own)."""
    critic = frame.get("cfg.critic.name", pd.Series("n/a", index=frame.index)).astype(str)
    has_critic = frame.get("has_critic", pd.Series(True, index=frame.index)).fillna(True).astype(bool)
    names = ("critic=" + critic).where(has_critic, "no critic")
    fmt = frame.get("format", pd.Series("", index=frame.index)).astype(str)
    return ("format=" + fmt + " " + names) if fmt.nunique() > 1 else names


def sweep_heatmap(final: pd.DataFrame) -> Figure:
    """Mean final drift index over temperature x model, one panel per critic (and format)."""
    temp, model = "cfg.llm.temperature", "cfg.model.spec"
    frame = final.assign(**{c: final.get(c, "n/a") for c in (temp, model)})
    frame["panel"] = _panel_names(frame)
    names = sorted(frame.panel.unique())
    vmin, vmax = frame.drift_index.min(), frame.drift_index.max()  # one colour scale for all panels
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        grid = frame[frame.panel == name].pivot_table(
            index=model, columns=temp, values="drift_index", aggfunc="mean"
        )
        im = ax.imshow(grid.to_numpy(dtype=float), cmap="magma", aspect="auto", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index], fontsize=7)
        for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
            ax.text(
                j, i, "" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", color="cyan", fontsize=8
            )
        ax.set_title(f"final drift index | {name}", fontsize=9)
        ax.set_xlabel("temperature")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    return fig


def correlation_matrix(turn_signals: pd.DataFrame) -> Figure:
    """Spearman correlations between all signals over all turns."""
    names = [n for n in signal_names() if n in turn_signals.columns and turn_signals[n].nunique() > 1]
    corr = turn_signals[names].astype(float).corr(method="spearman")
    fig, ax = plt.subplots(figsize=(12, 11))
    im = ax.imshow(corr.to_numpy(), cmap="coolwarm", vmin=-1, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=6)
    ax.set_yticks(range(len(names)), names, fontsize=6)
    fig.colorbar(im, ax=ax, shrink=0.7)
    ax.set_title("signal correlations (Spearman, all turns)")
    fig.tight_layout()
    return fig


def process_rates(turn_signals: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """Approval rate (1 - rejection rate) and loop-lock rate per cell and seat, for
    the turns a critic judged (a format without a critic has no rates to show)."""
    frame = turn_signals.merge(runs[["run_id", "cell", "cell_label"]], on="run_id", how="left")
    frame = frame[frame.rejection_rate.notna()]
    frame["cell_label"] = frame.cell_label + " [" + frame.cell.str[:6] + "]"  # labels can repeat across cells
    rank = {seat: i for i, seat in enumerate(seat_order(runs))}
    rates = frame.groupby(["cell_label", "team"]).agg(
        approval=("rejection_rate", lambda s: 1 - s.mean()), loop_lock=("loop_lock", "mean")
    )
    rates = rates.sort_index(key=lambda level: level.map(rank) if level.name == "team" else level)
    rates.index = [f"{team} | {label}" for label, team in rates.index]
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.35 * len(rates)))
    if rates.empty:
        ax.text(0.5, 0.5, "no critic judged these runs' turns", ha="center", va="center")
    else:
        rates.plot.barh(ax=ax)  # horizontal: cell labels are long
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
        ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("rate per turn")
    ax.set_title("critic approval and loop-lock rates")
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    return fig

"""Figures, each saved as PNG and SVG: drift trajectories with CI bands,
sweep heatmaps, the signal correlation matrix, approval and loop-lock rates.
Every function takes tidy tables and returns the matplotlib figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from analysis.registry import DIMENSIONS, signal_names
from analysis.scoring import aggregate


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    for path in paths:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return paths


def trajectories(scores: pd.DataFrame, runs: pd.DataFrame) -> Figure:
    """Drift per dimension (and the index) across rounds, one line per cell and team, 95% CI bands."""
    panels = [*DIMENSIONS, "drift_index"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 7), sharex=True)
    for ax, value in zip(axes.flat, panels, strict=True):
        agg = aggregate(scores, runs, value)
        for (cell, label, team), g in agg.groupby(["cell", "cell_label", "team"]):
            g = g.sort_values("round")
            (line,) = ax.plot(g["round"], g["mean"], label=f"{team} | {label} [{cell[:6]}]")
            ax.fill_between(g["round"], g["ci_low"], g["ci_high"], color=line.get_color(), alpha=0.15)
        ax.set_title(value)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.flat[0].set_ylabel("drift (z from opening)")
    handles, labels = axes.flat[-1].get_legend_handles_labels()
    fig.legend(handles[:12], labels[:12], loc="lower center", ncol=2, fontsize=7)
    fig.tight_layout(rect=(0, 0.15, 1, 1))
    return fig


def sweep_heatmap(final: pd.DataFrame) -> Figure:
    """Mean final drift index over temperature x model, one panel per critic."""
    temp, model, critic = "cfg.llm.temperature", "cfg.model.spec", "cfg.critic.name"
    frame = final.assign(**{c: final.get(c, "n/a") for c in (temp, model, critic)})
    critics = sorted(frame[critic].astype(str).unique())
    vmin, vmax = frame.drift_index.min(), frame.drift_index.max()  # one colour scale for all panels
    fig, axes = plt.subplots(1, len(critics), figsize=(5 * len(critics), 4), squeeze=False)
    for ax, name in zip(axes[0], critics, strict=True):
        grid = frame[frame[critic].astype(str) == name].pivot_table(
            index=model, columns=temp, values="drift_index", aggfunc="mean"
        )
        im = ax.imshow(grid.to_numpy(dtype=float), cmap="magma", aspect="auto", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index], fontsize=7)
        for (i, j), v in np.ndenumerate(grid.to_numpy(dtype=float)):
            ax.text(
                j, i, "" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", color="cyan", fontsize=8
            )
        ax.set_title(f"final drift index | critic={name}")
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
    """Approval rate (1 - rejection rate) and loop-lock rate per cell and team."""
    frame = turn_signals.merge(runs[["run_id", "cell", "cell_label"]], on="run_id", how="left")
    frame["cell_label"] = frame.cell_label + " [" + frame.cell.str[:6] + "]"  # labels can repeat across cells
    rates = frame.groupby(["cell_label", "team"]).agg(
        approval=("rejection_rate", lambda s: 1 - s.mean()), loop_lock=("loop_lock", "mean")
    )
    rates.index = [f"{team} | {label}" for label, team in rates.index]
    fig, ax = plt.subplots(figsize=(9, 1.5 + 0.35 * len(rates)))
    rates.plot.barh(ax=ax)  # horizontal: cell labels are long
    ax.set_xlim(0, 1)
    ax.set_xlabel("rate per turn")
    ax.set_title("critic approval and loop-lock rates")
    ax.tick_params(axis="y", labelsize=7)
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig

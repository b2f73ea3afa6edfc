"""Figures, each saved as PNG and SVG: drift trajectories with CI bands,
sweep heatmaps, the signal correlation matrix, approval and loop-lock rates.
Every function takes tidy tables and returns the matplotlib figure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.typing import RGBAColorType

from analysis.labels import is_null, short_names, value_text, varying_keys, whole_floats, with_sections
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
            label=label,  # labels name what varies, and never repeat across cells
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


def _levels(column: pd.Series) -> list[Any]:
    """The values of one key, sorted (numbers as numbers), ``None`` last for runs without it."""
    values = list(column.dropna().unique())
    try:
        values.sort()
    except TypeError:
        values.sort(key=str)
    return values + ([None] if column.isna().any() else [])


def _is(column: pd.Series, level: Any) -> pd.Series:
    return column.isna() if level is None else column == level


def _config_key(frame: pd.DataFrame, name: str, varying: list[str], arg: str) -> str:
    """A config column named in full (``cfg.llm.temperature``), without ``cfg.`` or by its label's short name (``T``)."""
    names = short_names(varying)
    for key in (name, f"cfg.{name}"):
        if key.startswith("cfg.") and key in frame.columns:
            return key
    found = [key for key, short in names.items() if short == name]
    if not found:
        known = ", ".join(names.values()) or "none"
        raise ValueError(f"sweep_heatmap: {arg}={name!r} is no config key of these runs (varying: {known})")
    return found[0]


def heatmap_keys(
    frame: pd.DataFrame, x: str | None = None, y: str | None = None, average: Sequence[str] = ()
) -> tuple[str | None, str | None, list[str], list[str]]:
    """(x, y, facets, averaged): the heatmap's axes (default: the first two keys that vary,
    the first on y), one panel per combination of the other varying keys, and the varying
    keys it averages over, only those named in ``average``."""
    frame = with_sections(frame)  # a section some runs lack is one key: probes=on/off
    varying = varying_keys(frame)
    averaged = [_config_key(frame, name, varying, "average") for name in average]
    for name, key in zip(average, averaged, strict=True):
        if key not in varying:
            raise ValueError(f"sweep_heatmap: average={name!r} does not vary in these runs")
    chosen = [_config_key(frame, name, varying, arg) if name else None for arg, name in (("x", x), ("y", y))]
    if chosen[0] is not None and chosen[0] in (chosen[1], *averaged):
        raise ValueError(f"sweep_heatmap: x={x!r} is also y or averaged over")
    if chosen[1] is not None and chosen[1] in averaged:
        raise ValueError(f"sweep_heatmap: y={y!r} is also averaged over")
    free = [k for k in varying if k not in averaged and k not in chosen]
    if chosen == [None, None] and len(free) == 1:
        chosen[0] = free.pop(0)  # one key: one row
    for i in (1, 0):
        if chosen[i] is None and free:
            chosen[i] = free.pop(0)
    return chosen[0], chosen[1], free, averaged


def _panels(frame: pd.DataFrame, facets: list[str], names: dict[str, str]) -> list[tuple[str, pd.DataFrame]]:
    """One (title, runs) per combination of the facet keys that some run has."""
    if not facets:
        return [("", frame)]
    levels = {k: _levels(frame[k]) for k in facets}
    rows = zip(*(frame[k] for k in facets), strict=True)
    codes = [
        tuple(levels[k].index(None if is_null(v) else v) for k, v in zip(facets, row, strict=True))
        for row in rows
    ]
    panels = []
    for combo in sorted(set(codes)):
        title = " ".join(
            f"{names[k]}={value_text(levels[k][c], whole_floats(frame[k]))}"
            for k, c in zip(facets, combo, strict=True)
        )
        panels.append((title, frame[[code == combo for code in codes]]))
    return panels


def _grid(part: pd.DataFrame, x: str | None, y: str | None, xs: list[Any], ys: list[Any]) -> np.ndarray:
    """Mean final drift index per (y, x) square; NaN where no run is."""
    grid = np.full((len(ys), len(xs)), np.nan)
    for i, yv in enumerate(ys):
        for j, xv in enumerate(xs):
            mask = pd.Series(True, index=part.index)
            if y:
                mask &= _is(part[y], yv)
            if x:
                mask &= _is(part[x], xv)
            if mask.any():
                grid[i, j] = part.drift_index[mask].mean()
    return grid


def sweep_heatmap(
    final: pd.DataFrame, *, x: str | None = None, y: str | None = None, average: Sequence[str] = ()
) -> Figure:
    """Mean final drift index over two config keys (``x``, ``y``: full, dotted or short
    names; default the first two that vary), one panel per combination of the other
    varying keys, so each square is one cell (its replicates' mean). A varying key is
    averaged over only when named in ``average``, and every panel's title says so."""
    final = with_sections(final.reset_index(drop=True))
    x_key, y_key, facets, averaged = heatmap_keys(final, x, y, average)
    names = short_names(k for k in (x_key, y_key, *facets, *averaged) if k)  # as the labels name them
    xs = _levels(final[x_key]) if x_key else ["all runs"]
    ys = _levels(final[y_key]) if y_key else ["all runs"]
    x_whole, y_whole = (bool(k) and whole_floats(final[k]) for k in (x_key, y_key))
    panels = [(title, _grid(part, x_key, y_key, xs, ys)) for title, part in _panels(final, facets, names)]
    means = pd.Series(np.concatenate([g.ravel() for _, g in panels]))
    vmin, vmax = means.min(), means.max()  # one colour scale for all panels
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    head = "final drift index"
    if averaged:
        head += ", mean over " + ", ".join(names[k] for k in averaged)
    for ax, (title, grid) in zip(axes.flat, panels, strict=False):
        im = ax.imshow(grid, cmap="magma", aspect="auto", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(len(xs)), [value_text(v, x_whole) for v in xs])
        ax.set_yticks(range(len(ys)), [value_text(v, y_whole) for v in ys], fontsize=7)
        for (i, j), v in np.ndenumerate(grid):
            ax.text(
                j, i, "" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", color="cyan", fontsize=8
            )
        ax.set_title(f"{head}\n{title}" if title else head, fontsize=9)
        ax.set_xlabel(names.get(x_key or "", ""))
        ax.set_ylabel(names.get(y_key or "", ""))
        fig.colorbar(im, ax=ax)
    for ax in axes.flat[len(panels) :]:
        ax.remove()
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


MAX_PARENTS_SHOWN = 9


def branches(scores: pd.DataFrame, sibs: pd.DataFrame, value: str = "drift_index") -> Figure:
    """Forks drawn from their shared prefix: one panel per parent and fork
    round, ``value`` per round (mean over teams), the prefix once in black up
    to round k, each branch from k on in its condition's colour.
    ``sibs``: ``analysis.pairs.branches``."""
    per_round = scores.groupby(["run_id", "round"])[value].mean().reset_index()
    every = sorted(sibs.groupby(["parent", "at_round"]).groups)
    sets = every[:MAX_PARENTS_SHOWN]
    conditions = sorted(set(sibs.condition))
    colours = _seat_colours(conditions)
    cols = min(3, max(len(sets), 1))
    rows = max(1, -(-len(sets) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.0 * rows), squeeze=False, sharey=True)
    for ax, (parent, k) in zip(axes.flat, sets, strict=False):
        members = sibs[(sibs.parent == parent) & (sibs.at_round == k)]
        prefix_drawn = False
        for run_id, condition in members[["run_id", "condition"]].itertuples(index=False):
            series = per_round[per_round.run_id == run_id].sort_values("round")
            if not prefix_drawn:
                before = series[series["round"] <= k]
                ax.plot(before["round"], before[value], color="black", marker="o", markersize=3, lw=2)
                prefix_drawn = True
            after = series[series["round"] >= k]
            ax.plot(after["round"], after[value], color=colours[condition], marker="o", markersize=3)
        ax.axvline(k, color="grey", lw=0.5, ls=":")
        ax.set_title(f"{parent}, fork at {k}", fontsize=8)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes.flat[len(sets) :]:
        ax.set_visible(False)
    axes.flat[0].set_ylabel(f"{value} (mean over teams)")
    if len(every) > len(sets):
        fig.suptitle(f"the first {len(sets)} of {len(every)} parents", fontsize=9)
    handles = [Line2D([], [], color="black", lw=2, label="shared prefix")]
    handles += [Line2D([], [], color=colours[c], label=c) for c in conditions]
    fig.legend(handles=handles, title="branch", loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    return fig

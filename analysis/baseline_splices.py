"""Persona fades planted in real turns, and what ``baseline_similarity`` makes
of them: item 5's signal (``analysis.baseline``) validated on item 1's splices
(``analysis.splice``), issue 30.

A fade is a splice whose stream A is a persona seat's real turns and whose
stream B is a no-persona seat's (``experiment=control_no_persona``) of the
same model and side, round for round (B's round r is its run's round r):

- switch: the persona's turns up to round k-1, the no-persona seat's from k:
  the persona fades at once;
- drift: from round 2, the no-persona turn with a chance rising linearly to 1
  at the last round (``splice.drift``'s schedule);
- stable: a persona seat handed over at k to a replicate run of the same
  (model, cell, seat): nothing planted.

Each splice is scored with ``round_similarity`` against the same-side turns
of OTHER no-persona runs, never the one spliced in: each splice leaves one
no-persona run out (a fade, the run it splices in; a stable splice, each run
in turn), so a fade and a stable splice are compared with the same baseline.
The statistic is the ``rise``: the mean from round k on minus the mean before
k (a drift splits where its share first reaches one half). A fade is found
when its rise exceeds a threshold chosen on tuning splices.

Folds: each (persona cell, no-persona run) held out in turn, so that, as in
``splice.split``, whole cells are held out, and every cell is once. Tuning
splices the other cells' persona seats into the other no-persona runs, with
the rest of those as the baseline; held-out splices the held-out cell's seats
into the held-out no-persona run, with all the others as the baseline. No
held-out splice holds a turn that tuning spliced or compared with.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import permutations
from pathlib import Path
from typing import Any

import numpy as np

from analysis.baseline import round_similarity
from analysis.embed import CachedEmbedder
from analysis.splice import SeatRun, Splice, drift, stable, switch

DRIFT_K0 = 2  # a drift may draw the no-persona turn from round 2
DRIFT_SEEDS = 4  # draws per (persona run, no-persona run): fewer when they repeat a schedule
GOAL_FALSE = 0.05  # as benchmarks/detector_validity.py
TUNE_FALSE = GOAL_FALSE / 2  # tuning's ceiling on false alarms: a margin for a small tuning set
THRESHOLDS = tuple(round(0.0025 * i, 4) for i in range(201))  # rises of 0 to 0.5 (cosine)
KINDS = ("switch", "drift", "stable")


def side_of(s: SeatRun) -> tuple[str, str]:
    return (s.model, s.side)


def fades(persona: Sequence[SeatRun], free: SeatRun, length: int, ks: Iterable[int]) -> list[Splice]:
    """Every switch at each k and the distinct drifts of ``persona`` runs into the
    no-persona run ``free`` (same model and side), ``length`` rounds each."""
    out: list[Splice] = []
    for a in (p for p in persona if side_of(p) == side_of(free) and len(p.turns) >= length):
        out += [switch([a], [free], k, length, f"switch k={k}") for k in ks]
        drifts: dict[tuple[str, ...], Splice] = {}
        for seed in range(DRIFT_SEEDS):
            d = drift([a], [free], DRIFT_K0, length, length, seed)
            drifts.setdefault(tuple(p.source for p in d.picks), d)
        out += drifts.values()
    return out


def stables(persona: Sequence[SeatRun], length: int, ks: Iterable[int]) -> list[Splice]:
    """Every handover at each k between two replicate runs of one persona."""
    groups: dict[tuple[str, str, str], list[SeatRun]] = defaultdict(list)
    for p in persona:
        if len(p.turns) >= length:
            groups[p.persona].append(p)
    ks = list(ks)
    return [
        stable([a, b], k, length) for runs in groups.values() for a, b in permutations(runs, 2) for k in ks
    ]


def split_round(s: Splice) -> int:
    """Where the rise is measured: B's first round (a drift: its share's first round >= 1/2)."""
    return next(i + 1 for i, x in enumerate(s.share) if x >= 0.5) if s.kind == "drift" else s.k


def score(s: Splice, baseline: Sequence[SeatRun], embedder: Any) -> dict[str, Any]:
    """One splice's ``baseline_similarity`` per round against ``baseline`` (no-persona
    runs, round for round), its means before and from the split round, and their rise."""
    if {p.run for p in s.picks} & {b.run for b in baseline}:
        raise ValueError(f"{s.label}: the baseline holds a run the splice took turns from")
    rounds = len(s.picks)
    texts = [[t for b in baseline for r, t in b.turns if r == i + 1] for i in range(rounds)]
    values = round_similarity([p.text for p in s.picks], texts, embedder)
    k = split_round(s)
    pre, post = (float(np.nanmean(v)) if v else math.nan for v in (values[: k - 1], values[k - 1 :]))
    return {
        "kind": s.kind,
        "label": s.label,
        "split": k,
        "values": values,
        "pre": pre,
        "post": post,
        "rise": post - pre,
        "baseline": sorted(b.run for b in baseline),
        "truth": s.truth(),
    }


def scored(
    splices: Iterable[Splice], pool: Sequence[SeatRun], out_of: Iterable[str], embedder: Any
) -> list[dict[str, Any]]:
    """Each splice scored once per no-persona run left out (``out_of``: run names):
    a fade only with the run it spliced in left out; a stable splice with each.
    The baseline is the same-side runs of ``pool`` but the one left out."""
    rows = []
    out_of = list(out_of)
    for s in splices:
        taken = {p.run for p in s.picks}
        for left in out_of if s.kind == "stable" else [r for r in out_of if r in taken]:
            base = [b for b in pool if side_of(b) == side_of(s.a[0]) and b.run != left]
            if base:
                rows.append(score(s, base, embedder) | {"left_out": left})
    return rows


def cell_name(s: SeatRun) -> str:
    """A cell's readable name: its runs' common folder (``pilot/smollm2-debate``)."""
    return s.run.rsplit("/", 1)[0]


def fold_rows(
    persona: Sequence[SeatRun],
    free: Sequence[SeatRun],
    held: tuple[str, str],
    length: int,
    ks: Sequence[int],
    embedder: Any,
) -> dict[str, list[dict[str, Any]]]:
    """One fold's scored splices, tuning and held-out; ``held``: the (persona cell,
    no-persona run) held out. Tuning sees neither; held-out fades only that run."""
    cell, run = held
    tune_p, held_p = [p for p in persona if p.cell != cell], [p for p in persona if p.cell == cell]
    tune_free = [f for f in free if f.run != run]
    tune = [*(s for f in tune_free for s in fades(tune_p, f, length, ks)), *stables(tune_p, length, ks)]
    held_s = [
        *(s for f in free if f.run == run for s in fades(held_p, f, length, ks)),
        *stables(held_p, length, ks),
    ]
    return {
        "tuning": scored(tune, tune_free, sorted({f.run for f in tune_free}), embedder),
        "held_out": scored(held_s, free, [run], embedder),
    }


def rate(rows: Sequence[dict[str, Any]], threshold: float | dict[int, float]) -> dict[str, Any]:
    """How many rows rise above the threshold (a dict: per fold); NaN rises never do."""
    at = (lambda r: threshold[r["fold"]]) if isinstance(threshold, dict) else (lambda r: threshold)
    n = len(rows)
    count = sum(bool(r["rise"] > at(r)) for r in rows)
    return {"n": n, "count": count, "rate": count / n if n else math.nan}


def choose(rows: Sequence[dict[str, Any]]) -> tuple[float, dict[str, list[float]]]:
    """The threshold with the most switch hits among those whose stable false
    alarms stay within TUNE_FALSE (else the fewest false alarms); ties to the
    higher threshold. And the grid: per threshold, (hits, false alarms)."""
    switches = [r for r in rows if r["kind"] == "switch"]
    stable_ = [r for r in rows if r["kind"] == "stable"]
    if not switches or not stable_:
        raise ValueError(
            "tuning: need switch and stable splices (stable needs two runs of one cell and seat)"
        )
    grid = {t: [rate(switches, t)["rate"], rate(stable_, t)["rate"]] for t in THRESHOLDS}
    allowed = [t for t, (_, fa) in grid.items() if fa <= TUNE_FALSE] or [min(grid, key=lambda t: grid[t][1])]
    best = max(allowed, key=lambda t: (grid[t][0], -grid[t][1], t))
    return best, {f"{t:g}": v for t, v in grid.items()}


def auc(fade: Sequence[float], still: Sequence[float]) -> float:
    """P(a fade's rise > a stable splice's), ties counting half: the threshold-free separation."""
    x, y = np.asarray(fade, dtype=float), np.asarray(still, dtype=float)
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    if not len(x) or not len(y):
        return math.nan
    return float(
        ((x[:, None] > y[None, :]).sum() + 0.5 * (x[:, None] == y[None, :]).sum()) / (len(x) * len(y))
    )


def summary(rows: Sequence[dict[str, Any]], threshold: float | dict[int, float]) -> dict[str, Any]:
    """Rates (hit: switches, power: drifts, false_alarm: stables, per switch k too),
    the mean signal before and from the split per kind, and the AUCs."""
    of = {k: [r for r in rows if r["kind"] == k] for k in KINDS}
    means = {
        k: {
            "n": len(g),
            **{m: float(np.nanmean([r[m] for r in g])) if g else math.nan for m in ("pre", "post", "rise")},
            "rise_sd": float(np.nanstd([r["rise"] for r in g], ddof=1)) if len(g) > 1 else math.nan,
        }
        for k, g in of.items()
    }
    labels = sorted({r["label"] for r in of["switch"]}, key=lambda x: int(x.rsplit("=", 1)[1]))
    still = [r["rise"] for r in of["stable"]]
    return {
        "hit": rate(of["switch"], threshold),
        "power": rate(of["drift"], threshold),
        "false_alarm": rate(of["stable"], threshold),
        "hit_by_k": {x: rate([r for r in of["switch"] if r["label"] == x], threshold) for x in labels},
        "means": means,
        "auc": {k: auc([r["rise"] for r in of[k]], still) for k in ("switch", "drift")},
    }


def validity(
    persona: Sequence[SeatRun], free: Sequence[SeatRun], embedder: str, length: int | None = None
) -> dict[str, Any]:
    """The whole validation: per fold a threshold tuned on its tuning splices, and
    rates on held-out splices pooled over folds (each at its own fold's threshold),
    also per persona cell: a cell whose settings differ from the baseline's can
    separate for reasons other than a persona (the critic, the temperature)."""
    free = [f for f in free if f.turns]
    persona = [p for p in persona if side_of(p) in {side_of(f) for f in free}]  # a panel's analysts: none
    runs = sorted({f.run for f in free})
    both = sorted(set(runs) & {p.run for p in persona})
    if both:
        raise ValueError(f"baseline: run {both[0]} is among the persona sources too")
    if len(runs) < 3:
        raise ValueError(f"baseline: {len(runs)} no-persona runs; need 3 (one held out, two to tune on)")
    if not persona:
        raise ValueError("baseline: no persona seat shares a model and side with a no-persona seat")
    cells = sorted({p.cell for p in persona})
    if len(cells) < 2:
        raise ValueError(f"persona: {len(cells)} cell; need 2 (one held out, one to tune on)")
    length = length or min(len(f.turns) for f in free)
    ks = range(2, length + 1)
    model = CachedEmbedder(embedder)  # in memory: each text is embedded once however often it is spliced
    folds: list[dict[str, Any]] = []
    tuning: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    names = {p.cell: cell_name(p) for p in sorted(persona, key=lambda p: p.run)}
    for fold, (cell, run) in enumerate((c, r) for c in cells for r in runs):
        rows = fold_rows(persona, free, (cell, run), length, ks, model)
        threshold, grid = choose(rows["tuning"])
        hits, false = grid[f"{threshold:g}"]
        folds.append(
            {"persona_cell": names[cell], "baseline_run": run, "threshold": threshold}
            | {"tuning_hit": hits, "tuning_false_alarm": false, "tuning_splices": len(rows["tuning"])}
        )
        tuning += [r | {"fold": fold} for r in rows["tuning"]]
        held += [r | {"fold": fold, "persona_cell": names[cell]} for r in rows["held_out"]]
    cut = {i: float(f["threshold"]) for i, f in enumerate(folds)}
    return {
        "embedder": embedder,
        "models": sorted({p.model for p in persona}),
        "length": length,
        "ks": list(ks),
        "sources": {
            "persona_cells": {names[c]: len({p.run for p in persona if p.cell == c}) for c in cells},
            "baseline_runs": runs,
        },
        "folds": folds,
        "tuning": summary(tuning, cut),
        "held_out": summary(held, cut),
        "held_out_by_cell": {
            name: summary([r for r in held if r["persona_cell"] == name], cut)
            for name in sorted(names.values())
        },
        "rows": {"tuning": tuning, "held_out": held},
    }


# -- the report's section -----------------------------------------------------------------------
def _pct(r: dict[str, Any] | None) -> str:
    return f"{100 * r['rate']:.1f}% ({r['count']}/{r['n']})" if r and r.get("n") else "–"


def _num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or x != x else f"{x:.{digits}f}"


def _row(embedder: str, cell: str, d: dict[str, Any]) -> str:
    """One table row: the held-out rates, AUCs and the mean signal before → from the split."""
    m = d["means"]
    span = lambda k: f"{_num(m[k]['pre'])} → {_num(m[k]['post'])}"  # noqa: E731
    return (
        f"| {embedder} | {cell} | {_pct(d['hit'])} | {_pct(d['power'])} | {_pct(d['false_alarm'])} "
        f"| {_num(d['auc']['switch'], 2)} / {_num(d['auc']['drift'], 2)} | {span('switch')} | {span('stable')} |"
    )


def baseline_validity_section(json_path: str | Path) -> list[str]:
    """Markdown lines: ``baseline_similarity`` on spliced real turns, per embedder
    and held-out persona cell, as ``benchmarks/baseline_validity.py --json`` wrote them."""
    path = Path(json_path)
    data = json.loads(path.read_text()).get("baseline_similarity") if path.is_file() else None
    if not data:
        return [
            f"_Not available: no `baseline_similarity` in `{path}`. Run "
            f"`python benchmarks/baseline_validity.py --json {path}`._"
        ]
    lines = [
        f"From `{path}` (`benchmarks/baseline_validity.py`): real persona turns handed over at k to "
        "no-persona turns of the same side (switch), mixed with them at a rising share (drift), or "
        "handed over to a replicate of the same persona (stable); `baseline_similarity` against other "
        "no-persona runs than the one spliced in. Found: the mean from k exceeds the mean before k by "
        "more than a threshold tuned on the other cells' and runs' splices (at most 2.5% stable false "
        "alarms). Held-out, pooled over folds; AUC: a fade's rise against a stable splice's (0.5: none).",
        "",
        "| embedder | held-out persona cell | hit (switch) | power (drift) | false alarm (stable) "
        "| AUC switch / drift | switch: before → from k | stable: before → from k |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for emb, d in data.items():
        cells = [(c, v) for c, v in d["held_out_by_cell"].items() if v["means"]["switch"]["n"]]
        lines += [_row(emb, "all", d["held_out"]), *(_row(emb, c, v) for c, v in cells)]
        cuts = [f["threshold"] for f in d["folds"]]
        quick = " (QUICK: the test fixture, not the validation)" if d.get("quick") else ""
        notes.append(
            f"- {emb}{quick}: {len(cuts)} folds, thresholds {min(cuts):g}–{max(cuts):g} on a rise in cosine; "
            f"{d['length']} rounds a splice, k in {d['ks'][0]}–{d['ks'][-1]}."
        )
    notes.append(
        "- Counts are splices, not independent runs: each re-uses a few runs' turns. A persona cell whose "
        "settings differ from the baseline runs' in more than the persona (the critic, the temperature) "
        "can separate for that reason instead (docs/signals.md)."
    )
    return [*lines, "", *notes]

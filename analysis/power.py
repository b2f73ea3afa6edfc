"""Power of the permutation test over runs, and the replicates a contrast needs.

With n runs a side a permutation test can give only a few p's: the smallest
is 1 / C(2n, n) one-sided (3 vs 3: 1/20 = 0.05) and twice that two-sided
(0.10), so at n = 3 a two-sided test at α = 0.05 can never reject, whatever
the effect. Power here is therefore that of the test ``analysis.compare``
runs, by simulation, never the normal approximation: ``sims`` data sets of
n_a N(0, 1) and n_b N(d, 1) values, each tested over every relabelling
(at most ``compare.MAX_EXACT`` of them) or over ``resamples`` random ones
with p = (1 + hits) / (1 + resamples), and the share with p ≤ α. Seeded; the
default 2,500 data sets hold the estimate within ±0.02 (two standard errors
at power 0.5). An n whose smallest p exceeds α has power 0 and is reported
as unreachable.

    python -m analysis power --pilot research_runs/study               # every debate cell vs its controls
    python -m analysis power --pilot research_runs/study --metric run_mean_drift --d-from-pilot --one-sided
    python -m analysis power --pilot research_runs/study --contrast 3f2a:9c1e --d 1.2

A metric is one number per run: ``final_drift`` (the drift index in the
run's last round, mean over teams), ``run_mean_drift`` (mean over all its
turns, the value compare's Cohen's d uses) or any numeric column of the runs
table (``counts.rejections``, ``wall_s``). Drift metrics use only the teams
both cells have, as ``compare_cells`` does.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare import MAX_EXACT, RESAMPLES, cohens_d, control_pairs, incomplete, resolve_cell
from analysis.embed import DEFAULT_EMBEDDER
from analysis.scoring import final_drift

SIMS = 2500  # simulated data sets per power estimate: SE <= 0.01
N_MAX = 60  # replicates per arm searched at most
TARGET = 0.8
ALPHA = 0.05
METRICS = {
    "final_drift": "drift index in the run's last round, mean over teams",
    "run_mean_drift": "mean drift index over the run's turns",
}


def smallest_p(n_a: int, n_b: int, one_sided: bool = False) -> float:
    """The smallest p an exact permutation test of n_a vs n_b runs can give:
    one relabelling of C(n_a + n_b, n_a) is as extreme as the observed one,
    two when a two-sided test has equal arms (the mirror split)."""
    if not n_a or not n_b:
        return math.nan
    extreme = 1 if one_sided or n_a != n_b else 2
    return extreme / math.comb(n_a + n_b, n_a)


def first_reachable(alpha: float = ALPHA, one_sided: bool = False, n_max: int = N_MAX) -> int | None:
    """The smallest n per arm whose smallest p is at most alpha (None: none up to n_max)."""
    return next((n for n in range(2, n_max + 1) if smallest_p(n, n, one_sided) <= alpha), None)


def _labellings(n_a: int, n_b: int, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Which runs each relabelling puts in arm a (0/1 rows), and whether that is all of them."""
    n = n_a + n_b
    exact = math.comb(n, n_a) <= MAX_EXACT
    if exact:
        picks = np.array(list(itertools.combinations(range(n), n_a)))
    else:
        picks = rng.permuted(np.tile(np.arange(n), (resamples, 1)), axis=1)[:, :n_a]
    rows = np.zeros((len(picks), n))
    rows[np.arange(len(picks))[:, None], picks] = 1.0
    return rows, exact


def p_values(
    data: np.ndarray, n_a: int, labels: np.ndarray, exact: bool, one_sided: bool = False
) -> np.ndarray:
    """The permutation p of each row of ``data`` (its first n_a values: arm a)
    over the relabellings ``labels``, as ``compare.permutation_p`` computes it."""
    n = data.shape[1]
    observed = np.zeros(n)
    observed[:n_a] = 1.0
    sums, own = data @ labels.T, (data @ observed)[:, None]  # arm a's sum under each labelling
    tol = 1e-9 * n * (1.0 + np.abs(data).max(initial=0.0))  # one sum added in another order still ties
    if one_sided:  # mean(b) - mean(a) falls as arm a's sum grows
        hits = (sums <= own + tol).sum(1)
    else:
        centre = data.sum(1, keepdims=True) * n_a / n
        hits = (np.abs(sums - centre) >= np.abs(own - centre) - tol).sum(1)
    return hits / len(labels) if exact else (1 + hits) / (1 + len(labels))


@functools.lru_cache(maxsize=512)
def power(
    n_a: int,
    n_b: int,
    d: float,
    alpha: float = ALPHA,
    one_sided: bool = False,
    *,
    sims: int = SIMS,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> float:
    """The share of ``sims`` simulated data sets (a ~ N(0, 1), b ~ N(d, 1)) on
    which the permutation test of mean(b) - mean(a) gives p ≤ alpha; one-sided
    tests b > a. 0 when no relabelling can reach alpha."""
    if n_a < 1 or n_b < 1 or smallest_p(n_a, n_b, one_sided) > alpha + 1e-12:
        return 0.0
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((sims, n_a + n_b))
    data[:, n_a:] += d
    labels, exact = _labellings(n_a, n_b, resamples, rng)
    step = max(1, 2_000_000 // len(labels))  # data sets per chunk: a few million sums at once
    rejected = sum(
        int((p_values(data[i : i + step], n_a, labels, exact, one_sided) <= alpha + 1e-12).sum())
        for i in range(0, sims, step)
    )
    return rejected / sims


def required_n(
    d: float, alpha: float = ALPHA, target: float = TARGET, one_sided: bool = False, **options: int
) -> tuple[int | None, float]:
    """The smallest n per arm whose simulated power reaches ``target``, and that
    power; (None, power at ``n_max``) when not even ``n_max`` does. ``options``:
    n_max, sims, seed."""
    n_max = options.pop("n_max", N_MAX)
    low = first_reachable(alpha, one_sided, n_max)
    if low is None:
        return None, 0.0
    if d <= 0 if one_sided else d == 0:  # power stays at or below alpha at every n
        return None, math.nan
    return smallest_n(lambda n: power(n, n, d, alpha, one_sided, **options), low, n_max, target)


def smallest_n(
    power_at: Callable[[int], float], low: int, n_max: int, target: float = TARGET
) -> tuple[int | None, float]:
    """The smallest n in [low, n_max] with ``power_at(n) >= target`` (by
    bisection: power rises with n) and its power; (None, power at n_max) when none."""
    if (found := power_at(low)) >= target:
        return low, found
    if (found := power_at(n_max)) < target:
        return None, found
    high = n_max  # power(low) < target <= power(high)
    while high - low > 1:
        mid = (low + high) // 2
        if power_at(mid) >= target:
            high = mid
        else:
            low = mid
    return high, power_at(high)


def condition_of(runs: pd.DataFrame) -> pd.Series:
    """Each run's condition: ``debate`` or ``control_<name>`` (from ``cfg.control``)."""
    control = runs.get("cfg.control", pd.Series(None, index=runs.index))
    return control.where(control.notna(), "debate").map(lambda c: c if c == "debate" else f"control_{c}")


def needs_scores(metric: str) -> bool:
    return metric in METRICS


def run_metric(
    runs: pd.DataFrame, metric: str, scores: pd.DataFrame | None = None, teams: list[str] | None = None
) -> pd.Series:
    """One value per run (indexed by run_id): a drift metric over ``teams``
    (all when None), or a numeric column of the runs table."""
    if needs_scores(metric):
        if scores is None:
            raise ValueError(f"metric {metric}: needs the runs' scores")
        frame = scores if teams is None else scores[scores.team.isin(teams)]
        if metric == "final_drift":
            return final_drift(frame, runs).set_index("run_id").drift_index.astype(float)
        return frame.groupby("run_id").drift_index.mean().astype(float)
    column = runs.get(metric)
    if column is None or not pd.api.types.is_numeric_dtype(column):
        known = ", ".join([*METRICS, "or a numeric column of the runs table"])
        raise ValueError(f"--metric {metric}: not a metric ({known})")
    return pd.Series(column.to_numpy(dtype=float), index=runs.run_id)


def shared_teams(scores: pd.DataFrame, runs: pd.DataFrame, cell_a: str, cell_b: str) -> list[str]:
    """The teams both cells have (a monologue control has one seat)."""
    cell = scores.run_id.map(runs.set_index("run_id").cell)
    return sorted(set(scores.team[cell == cell_a]) & set(scores.team[cell == cell_b]))


def arm_values(
    runs: pd.DataFrame, metric: str, scores: pd.DataFrame | None, cell_a: str, cell_b: str
) -> tuple[np.ndarray, np.ndarray]:
    """The metric's values of the runs of each cell (NaN dropped), on their shared teams."""
    teams = shared_teams(scores, runs, cell_a, cell_b) if scores is not None else None
    values = run_metric(runs, metric, scores, teams)
    cell = runs.set_index("run_id").cell.reindex(values.index)
    return tuple(values[cell == c].dropna().to_numpy(dtype=float) for c in (cell_a, cell_b))  # type: ignore[return-value]


def describe(a: np.ndarray, b: np.ndarray) -> dict[str, float | int]:
    """Sizes, means, SDs and Cohen's d (b - a) of two arms."""

    def sd(x: np.ndarray) -> float:
        return float(x.std(ddof=1)) if len(x) > 1 else math.nan

    return {
        "n_a": len(a),
        "n_b": len(b),
        "mean_a": float(a.mean()) if len(a) else math.nan,
        "sd_a": sd(a),
        "mean_b": float(b.mean()) if len(b) else math.nan,
        "sd_b": sd(b),
        "pilot_d": cohens_d(a, b),
    }


def parse_contrast(runs: pd.DataFrame, text: str) -> tuple[str, str]:
    """``A:B`` as two cells (hash, prefix or label; a label may hold ':' itself)."""
    found = []
    for i in [i for i, c in enumerate(text) if c == ":"]:
        try:
            found.append((resolve_cell(runs, text[:i]), resolve_cell(runs, text[i + 1 :])))
        except ValueError:
            continue
    if len(found) != 1:
        why = "names no pair of cells" if not found else "splits into several pairs of cells"
        raise ValueError(f"--contrast {text}: {why}; give it as cellA:cellB (hash prefixes, from compare)")
    return found[0]


def contrasts(runs: pd.DataFrame, given: list[str]) -> list[tuple[str, str]]:
    """(cell a, cell b) to plan: the ones given, else every control (a) with its debate cell (b)."""
    if given:
        return [parse_contrast(runs, text) for text in given]
    pairs = control_pairs(runs)
    return list(zip(pairs.control_cell, pairs.cell, strict=True))


def plan_for(
    pilot_d: float, args: argparse.Namespace, needed: Callable[..., tuple[int | None, float]]
) -> tuple[float, str, float]:
    """The effect planned for (``--d``, else ``--shrink`` times the pilot's),
    the n ``needed`` finds for it (as text: ``never`` with no effect, ``> n_max``
    when out of reach) and the power there."""
    d = args.d if args.d is not None else args.shrink * pilot_d
    if math.isnan(d) or (d <= 0 if args.one_sided else d == 0):
        return d, "never", math.nan
    n, reached = needed(
        d, args.alpha, args.power, args.one_sided, n_max=args.n_max, sims=args.sims, seed=args.seed
    )
    return d, str(n) if n else f"> {args.n_max}", reached


def plan_table(
    runs: pd.DataFrame,
    scores: pd.DataFrame | None,
    pairs: list[tuple[str, str]],
    args: argparse.Namespace,
) -> pd.DataFrame:
    """Per contrast: the pilot arms, the d planned for and the replicates per arm it needs."""
    labels = runs.drop_duplicates("cell").set_index("cell").cell_label
    rows = []
    for cell_a, cell_b in pairs:
        pilot = describe(*arm_values(runs, args.metric, scores, cell_a, cell_b))
        d, n, reached = plan_for(pilot["pilot_d"], args, required_n)
        rows.append(
            {
                "a": f"{labels[cell_a]} ({cell_a[:6]})",
                "b": f"{labels[cell_b]} ({cell_b[:6]})",
                "runs a/b": f"{pilot['n_a']}/{pilot['n_b']}",
                **{k: v for k, v in pilot.items() if k not in ("n_a", "n_b")},
                "d": d,
                "n per arm": n,
                "power at n": reached,
            }
        )
    return pd.DataFrame(rows)


def floor_lines(alpha: float, one_sided: bool, upto: int) -> list[str]:
    """The smallest attainable p for each n per arm, marking those above alpha."""
    return [
        f"  n = {n}: {smallest_p(n, n, one_sided):.4f}"
        + (" > α: unreachable, power 0" if smallest_p(n, n, one_sided) > alpha else "")
        for n in range(2, upto + 1)
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m analysis power", description=__doc__.split("\n\n")[0])
    p.add_argument("--pilot", type=Path, required=True, help="the pilot runs' root")
    p.add_argument("--metric", default="final_drift", help=f"{', '.join(METRICS)} or a runs-table column")
    p.add_argument("--contrast", action="append", default=[], help="cellA:cellB (b tested against a)")
    p.add_argument("--power", type=float, default=TARGET)
    p.add_argument("--alpha", type=float, default=ALPHA)
    p.add_argument("--d", type=float, default=None, help="the effect to plan for, in pilot SDs")
    p.add_argument("--d-from-pilot", action="store_true", help="plan for --shrink times each pilot d")
    p.add_argument("--shrink", type=float, default=0.5)
    p.add_argument("--one-sided", action="store_true", help="test b > a (default: two-sided)")
    p.add_argument(
        "--paired", action="store_true", help="forks: pairs of siblings, the sign-flip test (analysis.pairs)"
    )
    p.add_argument("--n-max", type=int, default=N_MAX)
    p.add_argument("--sims", type=int, default=SIMS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="as for python -m analysis")
    p.add_argument("--no-cache", action="store_true")
    args = p.parse_args(argv)
    if (args.d is None) == (not args.d_from_pilot):
        p.error("give exactly one of --d and --d-from-pilot")
    for name in ("alpha", "power"):  # a probability: 0 and 1 plan nothing
        if not 0 < getattr(args, name) < 1:
            p.error(f"--{name} {getattr(args, name)}: a probability between 0 and 1")
    for name in ("sims", "n_max"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} {getattr(args, name)}: at least 1")
    return args


def load_pilot(
    root: Path, metric: str, embedder: str, cache: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The pilot's runs table, and its scores when the metric needs them."""
    from analysis.compute import compute_signals
    from analysis.load import load_runs
    from analysis.scoring import score

    tables = load_runs(root, cache=cache)
    if tables.runs.empty:
        raise FileNotFoundError(f"{root}: no run folders (no manifest.json found)")
    if not needs_scores(metric):
        run_metric(tables.runs, metric)  # a bad column fails before anything is computed
        return tables.runs, None
    return tables.runs, score(compute_signals(tables, embedder=embedder, progress=False).turns)


def main(argv: list[str]) -> int:
    """``python -m analysis power``: pilot SDs and d, and the replicates per arm each contrast needs."""
    args = parse(argv)
    if args.paired:  # analysis.pairs plans paired designs, and imports this module
        raise ValueError("--paired: analysis.pairs.plan_main plans it (python -m analysis power --paired)")
    runs, scores = load_pilot(args.pilot, args.metric, args.embedder, cache=not args.no_cache)
    pairs = contrasts(runs, args.contrast)
    if not pairs:
        raise ValueError(f"{args.pilot}: no control cells to contrast; name cells with --contrast A:B")
    sided = "one-sided (b > a)" if args.one_sided else "two-sided"
    planned = f"d = {args.d}" if args.d is not None else f"d = {args.shrink} × the pilot d"
    print(
        f"pilot {args.pilot}: {len(runs)} runs; metric {args.metric}; permutation test over runs, {sided}, "
        f"α = {args.alpha}; {planned}; target power {args.power} ({args.sims} simulated data sets each)"
    )
    upto = max(6, (first_reachable(args.alpha, args.one_sided, args.n_max) or 4) + 2)
    print(
        "smallest attainable p per arm size (n vs n runs):",
        *floor_lines(args.alpha, args.one_sided, upto),
        sep="\n",
    )
    table = plan_table(runs, scores, pairs, args)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if short := incomplete(runs, {cell[:6]: cell for pair in pairs for cell in pair}):
        print(  # each is in its arm's SD and d as a replicate, with what it reached
            f"note: {len(short)} pilot run(s) did not complete: {', '.join(short)}; each counts as "
            "a replicate with the values of its last round (python -m harness.resume <run>)"
        )
    return 0

"""Paired analysis of forks: siblings, their divergence from the fork round,
and paired contrasts.

A fork (``python -m harness.fork <run> --at-round k ...``) holds its parent's
rounds 1..k, copied, and continues from k + 1 under ``changed``. Forks of one
parent at one k are *siblings*: everything up to k is the same turns, so a
difference after k is the change's and the branches' own chance, not the
prefix's. The parent, when it is loaded too, is a sibling as well: its rounds
after k are the branch that changed nothing (condition ``(parent)``).

A *condition* is what a branch changed (``critic=strict``); a *contrast*
is two conditions forked at the same k; a *pair* is one parent's two
branches of a contrast (a: the parent, or the first condition by name).

- ``find_pairs(runs)``: every pair, one row each;
- ``divergence(values, pairs)``: per pair, team and round from k on, b - a of
  every signal, dimension score and the drift index (tidy, for Jupyter);
- ``pair_values`` / ``paired_contrasts``: one difference per pair (the mean
  over teams and rounds after k, or the last round's with ``final``), and per
  contrast the paired tests of ``analysis.paired`` with Holm across contrasts.

    python -m analysis pairs research_runs/forks          # the contrasts, per-pair drift, branches figure
    python -m analysis power --paired --pilot research_runs/forks --d-from-pilot
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.compare import RESAMPLES, holm, status_text
from analysis.embed import DEFAULT_EMBEDDER
from analysis.load import analysis_dir
from analysis.paired import first_reachable_pairs, paired_summary, required_pairs, smallest_paired_p
from analysis.power import plan_for
from analysis.registry import DIMENSIONS
from analysis.signals import BASELINE_TURNS

PARENT = "(parent)"
SAME = 1e-6  # a fork round's b - a below this is float noise (the same turns, embedded twice)
PAIR = ["contrast", "at_round", "parent", "run_a", "run_b"]
# A fork grid's replicate keys (``replicates=N``): which copy of a condition, not which condition
GRID_REPLICATE = ("replicate", "replicates")


def condition_text(changed: str | None) -> str:
    """A branch's condition from its lineage's changed keys (JSON): ``key=value, ...``;
    a group chosen anew (``critic=strict`` changes every ``critic.*`` key) by its name."""
    if changed is None:
        return PARENT
    items = json.loads(changed)
    if any(key in items for key in GRID_REPLICATE):  # a fork grid's replicate: its seed is the replicate's
        items = {k: v for k, v in items.items() if k not in (*GRID_REPLICATE, "seed", "model.seed")}
    groups = {k.rsplit(".", 1)[0] for k in items if k.endswith(".name") and k.count(".") == 1}
    shown = {g: items[f"{g}.name"] for g in groups}
    shown.update({k: v for k, v in items.items() if k.split(".", 1)[0] not in groups})
    return ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) or "(nothing changed)"


def branches(runs: pd.DataFrame, run_dirs: Mapping[str, Path] | None = None) -> pd.DataFrame:
    """One row per branch: run_id, parent, at_round, condition, status. Every fork
    is one; a loaded parent is one for each k it was forked at. ``parent`` is the
    parent's run_id when it is loaded, else its folder as the lineage names it.
    A parent is found by its folder (``run_dirs``: run_id -> folder), else,
    for a tree moved since, by its run name when no other run has it. ``status``
    is the manifest's (a branch killed or failed is no ``completed``)."""
    columns = ["run_id", "parent", "at_round", "condition", "status", "seed"]
    if "lineage.parent" not in runs.columns:
        return pd.DataFrame(columns=columns)
    forks = runs[runs["lineage.parent"].notna()]
    status = dict(zip(runs.run_id, runs.status, strict=True)) if "status" in runs.columns else {}
    seed = dict(zip(runs.run_id, runs.seed, strict=True)) if "seed" in runs.columns else {}
    found = _loaded_parents(runs, forks, run_dirs or {})
    rows = [
        {
            "run_id": f.run_id,
            "parent": found.get(f["lineage.parent"], f["lineage.parent"]),
            "at_round": int(f["lineage.at_round"]),
            "condition": condition_text(f["lineage.changed"]),
            "status": status.get(f.run_id),
            "seed": seed.get(f.run_id),
        }
        for _, f in forks.iterrows()
    ]
    for folder, at_round in forks[["lineage.parent", "lineage.at_round"]].drop_duplicates().values:
        if folder in found:
            rows.append(
                {
                    "run_id": found[folder],
                    "parent": found[folder],
                    "at_round": int(at_round),
                    "condition": PARENT,
                    "status": status.get(found[folder]),
                    "seed": seed.get(found[folder]),
                }
            )
    return pd.DataFrame(rows, columns=columns)


def _loaded_parents(runs: pd.DataFrame, forks: pd.DataFrame, run_dirs: Mapping[str, Path]) -> dict[str, str]:
    """Each fork's parent folder -> the loaded parent's run_id, for the parents loaded."""
    by_folder = {str(Path(d).resolve()): run_id for run_id, d in run_dirs.items()}
    names = runs.run_name.value_counts()
    by_name = runs[runs.run_name.map(names) == 1].set_index("run_name").run_id
    found = {}
    for folder, name in forks[["lineage.parent", "lineage.parent_run_id"]].drop_duplicates().values:
        if (hit := by_folder.get(str(Path(folder).resolve()))) is not None:
            found[folder] = hit
        elif name in by_name.index:
            found[folder] = str(by_name[name])
    return found


def _order(condition: str) -> tuple[bool, str]:
    return (condition != PARENT, condition)  # the parent first, then by name


def find_pairs(runs: pd.DataFrame, run_dirs: Mapping[str, Path] | None = None) -> pd.DataFrame:
    """Every pair: contrast, at_round, parent, run_a, run_b, a, b. A condition
    forked several times from one parent at one k: each of its branches is paired
    once, so that parent counts once per branch (``matched``)."""
    rows = []
    for (parent, k), sibs in branches(runs, run_dirs).groupby(["parent", "at_round"]):
        conditions = sorted(set(sibs.condition), key=_order)
        runs_of = {c: sibs[sibs.condition == c] for c in conditions}
        for a, b in itertools.combinations(conditions, 2):
            rows += [
                {"contrast": f"k={k}: {b} - {a}", "at_round": int(k), "parent": parent}
                | {"run_a": run_a, "run_b": run_b, "a": a, "b": b}
                for run_a, run_b in matched(runs_of[a], runs_of[b])
            ]
    return pd.DataFrame(rows, columns=[*PAIR, "a", "b"])


def matched(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple[str, str]]:
    """The pairs of two conditions' branches of one parent: one branch against each of
    the other's, or replicates (a fork grid's ``replicates=N``) each with the other
    condition's at the same seed; else every combination (a branch in several pairs)."""
    if min(len(a), len(b)) == 1 or not (a.seed.is_unique and b.seed.is_unique and set(a.seed) == set(b.seed)):
        return list(itertools.product(a.run_id, b.run_id))
    by_seed = dict(zip(b.seed, b.run_id, strict=True))
    return [(run_a, by_seed[seed]) for run_a, seed in zip(a.run_id, a.seed, strict=True)]


def round_values(turn_signals: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Per run, team and round: every signal, dimension score and the drift
    index (the mean over the round's turns: a format may have several a seat)."""
    keys = ["run_id", "team", "round"]
    merged = turn_signals.merge(scores[[*keys, "order", *DIMENSIONS, "drift_index"]], on=[*keys, "order"])
    numeric = [c for c in merged.columns if c not in (*keys, "order")]
    merged[numeric] = merged[numeric].apply(pd.to_numeric, errors="coerce")
    return merged.groupby(keys)[numeric].mean().reset_index()


def divergence(values: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per pair, team (those both branches have) and round from k on, b - a
    of every value: contrast, at_round, parent, run_a, run_b, team,
    round, since_fork, signal, a, b, diff."""
    names = [c for c in values.columns if c not in ("run_id", "team", "round")]
    frames = []
    for pair in pairs.itertuples(index=False):
        a, b = (values[values.run_id == run].drop(columns="run_id") for run in (pair.run_a, pair.run_b))
        both = a.merge(b, on=["team", "round"], suffixes=("_a", "_b"))
        both = both[both["round"] >= pair.at_round]
        long = pd.DataFrame(
            {
                "team": np.repeat(both.team.to_numpy(), len(names)),
                "round": np.repeat(both["round"].to_numpy(), len(names)),
                "signal": np.tile(names, len(both)),
                "a": both[[f"{n}_a" for n in names]].to_numpy(dtype=float).ravel(),
                "b": both[[f"{n}_b" for n in names]].to_numpy(dtype=float).ravel(),
            }
        )
        for key in reversed(PAIR):
            long.insert(0, key, getattr(pair, key))
        frames.append(long)
    columns = [*PAIR, "team", "round", "since_fork", "signal", "a", "b", "diff"]
    if not frames:
        return pd.DataFrame(columns=columns)
    out = pd.concat(frames, ignore_index=True)
    out["since_fork"] = out["round"] - out["at_round"]
    out["diff"] = out.b - out.a
    return out[columns]


def pair_values(div: pd.DataFrame, value: str = "drift_index", final: bool = False) -> pd.DataFrame:
    """One row per pair: a, b and diff of ``value``, the mean over teams and
    rounds after k (``final``: the last round both branches reached)."""
    rows = div[(div.signal == value) & (div.since_fork > 0)]
    if final:
        last = rows.groupby(PAIR)["round"].transform("max")
        rows = rows[rows["round"] == last]
    return rows.groupby(PAIR)[["a", "b", "diff"]].mean().reset_index()


def paired_contrasts(values: pd.DataFrame, *, resamples: int = RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Per contrast: the paired summary of its pairs' differences, and ``holm_p``,
    the sign-flip p's adjusted across the contrasts (Holm)."""
    rows = [
        {"contrast": name, **paired_summary(group["diff"].dropna().to_numpy(dtype=float), resamples, seed)}
        for name, group in values.groupby("contrast")
    ]
    table = pd.DataFrame(rows)
    if not table.empty:
        table["holm_p"] = holm(table.perm_p)
    return table


def per_round_table(div: pd.DataFrame, value: str = "drift_index") -> pd.DataFrame:
    """Each pair's b - a of ``value`` (mean over teams) by rounds since the fork, wide."""
    rows = div[div.signal == value]
    table = rows.groupby([*PAIR, "since_fork"])["diff"].mean().unstack("since_fork")
    table.columns = [f"+{c}" for c in table.columns]
    return table.reset_index().drop(columns="at_round")


def format_pairs(pairs: pd.DataFrame, contrasts: pd.DataFrame, per_round: pd.DataFrame, value: str) -> str:
    """The pairs found, each contrast's paired tests, and each pair's divergence by round."""
    if pairs.empty:
        return "no forks with a sibling found (forks of one parent at one round, or a fork and its parent)"
    shown = contrasts.rename(columns={"perm_method": "permutation"})
    lines = [
        f"{len(pairs)} pairs in {len(contrasts)} contrasts, from {pairs.parent.nunique()} parents",
        f"{value}, b - a per pair (mean over teams and rounds after the fork); paired t and "
        "bootstrap 95% intervals, sign-flip permutation p, Holm across contrasts:",
        shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"),
        "",
        f"{value}, b - a per pair by rounds since the fork (+0: the fork round, shared):",
        per_round.to_string(index=False, float_format=lambda x: f"{x:.3f}"),
    ]
    shared = per_round["+0"].abs().max() if "+0" in per_round else 0.0
    if shared > SAME:  # the fork round's turns are the same text: only the normalisation can differ
        lines.append(
            f"note: at the fork round the pairs differ by up to {shared:.3g}: a signal missing in the first "
            f"round takes its opening ({BASELINE_TURNS} turns with a value) from after the fork; "
            f"fork at k >= {BASELINE_TURNS + 1} for an opening both branches share"
        )
    return "\n".join(lines)


def caveats(sibs: pd.DataFrame, pairs: pd.DataFrame, div: pd.DataFrame, shown: int = 5) -> list[str]:
    """Notes on the pairs the tests read short or leave out: those with a branch that
    did not complete (killed, failed: only the rounds both reached are compared), and
    those with no round after the fork in both branches (no difference to test)."""
    notes = []
    status = dict(zip(sibs.run_id, sibs.status, strict=True))
    short = [
        r for r in dict.fromkeys(pairs[["run_a", "run_b"]].to_numpy().ravel()) if status[r] != "completed"
    ]
    if short:
        listed = ", ".join(f"{r} ({status_text(status[r])})" for r in short[:shown]) + _more(
            len(short), shown
        )
        notes.append(
            f"note: {len(short)} branch(es) in these pairs did not complete: {listed}; their pairs compare "
            "only the rounds both branches reached (python -m harness.resume <run>, then pairs again)"
        )
    after = div.loc[div.since_fork > 0, PAIR].drop_duplicates()
    empty = pairs.merge(after, on=PAIR, how="left", indicator=True).query("_merge == 'left_only'")
    if len(empty):
        listed = "; ".join(f"{p.contrast} ({p.run_a}, {p.run_b})" for p in empty[:shown].itertuples())
        notes.append(
            f"note: {len(empty)} pair(s) have no round after the fork in both branches, and are left "
            f"out of the tests: {listed}{_more(len(empty), shown)}"
        )
    return notes


def _more(n: int, shown: int) -> str:
    return f" and {n - shown} more" if n > shown else ""


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m analysis pairs", description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=Path, help="a root holding forks (and their parents)")
    p.add_argument(
        "--value", default="drift_index", help="the signal or dimension tested (default drift_index)"
    )
    p.add_argument(
        "--final", action="store_true", help="test the last round's difference, not the mean after k"
    )
    p.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="as for python -m analysis")
    p.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap and Monte Carlo resamples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--out", type=Path, default=None, help="output folder (default: _analysis beside the runs)"
    )
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--no-cache", action="store_true")
    args = p.parse_args(argv)
    if args.resamples < 1:  # the bootstrap's percentiles of no resample: an IndexError
        p.error(f"--resamples {args.resamples}: at least 1")
    return args


def load_pairs(
    path: Path, embedder: str, cache: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The branches under ``path``, their pairs, and every run's ``round_values``."""
    from analysis.compute import compute_signals
    from analysis.load import load_runs
    from analysis.scoring import score

    tables = load_runs(path, cache=cache)
    if tables.runs.empty:
        raise FileNotFoundError(f"{path}: no run folders (no manifest.json found)")
    signals = compute_signals(tables, embedder=embedder, progress=False).turns
    sibs, pairs = branches(tables.runs, tables.run_dirs), find_pairs(tables.runs, tables.run_dirs)
    return sibs, pairs, round_values(signals, score(signals))


def main(argv: list[str]) -> int:
    """``python -m analysis pairs``: the contrasts' paired tests, each pair's divergence, the figure."""
    args = parse(argv)
    sibs, pairs, values = load_pairs(args.path, args.embedder, cache=not args.no_cache)
    if args.value not in values.columns or args.value in ("run_id", "team", "round"):
        raise ValueError(f"--value {args.value}: not a signal, dimension or drift_index")
    div = divergence(values, pairs)
    table = paired_contrasts(
        pair_values(div, args.value, args.final), resamples=args.resamples, seed=args.seed
    )
    print(format_pairs(pairs, table, per_round_table(div, args.value), args.value))
    for note in caveats(sibs, pairs, div):
        print(note)
    if pairs.empty:
        return 0
    out = args.out or analysis_dir(args.path)
    out.mkdir(parents=True, exist_ok=True)
    div.to_parquet(out / "pairs.parquet", index=False)
    print(out / "pairs.parquet")
    if not args.no_figures:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display needed
        from analysis.plots import branches as branches_figure
        from analysis.plots import save

        print(save(branches_figure(values, sibs, args.value), out, "branches")[0])
    return 0


def plan_table(values: pd.DataFrame, args: argparse.Namespace) -> pd.DataFrame:
    """Per contrast: the pilot's pairs, the d_z planned for and the pairs it needs
    (``args`` as ``analysis.power.parse`` gives them)."""
    rows = []
    for name, group in values.groupby("contrast"):
        pilot = paired_summary(group["diff"].dropna().to_numpy(dtype=float), resamples=200)
        dz, n, reached = plan_for(pilot["dz"], args, required_pairs)
        rows.append(
            {
                "contrast": name,
                "pairs": pilot["n"],
                "mean_diff": pilot["mean_diff"],
                "sd_diff": pilot["sd_diff"],
                "pilot_dz": pilot["dz"],
                "dz": dz,
                "pairs needed": n,
                "power at n": reached,
            }
        )
    return pd.DataFrame(rows)


def plan_main(args: argparse.Namespace) -> int:
    """``python -m analysis power --paired``: the pairs each contrast of a pilot's forks needs."""
    if args.metric not in PAIRED_METRICS:
        raise ValueError(f"--metric {args.metric}: with --paired, one of {', '.join(PAIRED_METRICS)}")
    if args.contrast:
        raise ValueError("--contrast: not with --paired (every contrast among the pilot's forks is planned)")
    sibs, pairs, values = load_pairs(args.pilot, args.embedder, cache=not args.no_cache)
    if pairs.empty:
        raise ValueError(f"{args.pilot}: no forks with a sibling to pair (python -m harness.fork)")
    div = divergence(values, pairs)
    diffs = pair_values(div, final=args.metric == "final_drift")
    sided = "one-sided (b > a)" if args.one_sided else "two-sided"
    planned = f"d_z = {args.d}" if args.d is not None else f"d_z = {args.shrink} × the pilot d_z"
    print(
        f"pilot {args.pilot}: {len(pairs)} pairs; metric {args.metric} ({PAIRED_METRICS[args.metric]}); "
        f"sign-flip test over pairs, {sided}, α = {args.alpha}; {planned}; target power {args.power} "
        f"({args.sims} simulated data sets each)"
    )
    upto = max(7, (first_reachable_pairs(args.alpha, args.one_sided, args.n_max) or 5) + 2)
    print("smallest attainable p per number of pairs:")
    for n in range(3, upto + 1):
        p = smallest_paired_p(n, args.one_sided)
        print(f"  {n} pairs: {p:.4f}" + (" > α: unreachable, power 0" if p > args.alpha else ""))
    print(plan_table(diffs, args).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    for note in caveats(sibs, pairs, div):
        print(note)
    return 0


PAIRED_METRICS = {
    "final_drift": "b - a of the drift index in the last round both branches reached",
    "run_mean_drift": "b - a of the mean drift index over the rounds after the fork",
}

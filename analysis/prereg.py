"""Write a preregistration (``docs/prereg.md``), check it, run its study.

    python -m analysis prereg --write docs/prereg.md --pilot research_runs/study --contrast A:B \\
        --metric run_mean_drift --shrink 0.5               # the block from pilot runs; refresh keeps the prose
    python -m analysis prereg --check docs/prereg.md     # the guard alone (analysis.confirm)
    python -m analysis prereg --run docs/prereg.md       # the guard, then the runs (make confirm)

``--write`` takes one contrast of the pilot (``cellA:cellB``, a: the
control, b: the debate; hash prefixes as ``python -m analysis compare``
prints them; by default the pilot's only control pair), plans for d = ``--d`` or ``--shrink`` times the pilot's d, finds
the runs per arm a one-sided permutation test needs for ``--power``
(``analysis.power``, simulated), copies the settings of the pilot's study
command that ran those cells (``study_commands.txt``) with a new ``--root`` and
``--seed``, and records the sha256 of ``analysis.confirm.frozen_files()``. An
existing file keeps its prose; only its yaml block is replaced. Commit the
file before ``--run``: runs that start earlier are refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from analysis.compare import MAX_EXACT
from analysis.confirm import (
    BLOCK,
    PACKAGE,
    added_by,
    check_frozen,
    checkout_root,
    file_hashes,
    frozen_files,
    read_prereg,
    same_model,
)
from analysis.embed import DEFAULT_EMBEDDER
from analysis.power import (
    METRICS,
    N_MAX,
    TARGET,
    arm_values,
    condition_of,
    contrasts,
    describe,
    load_pilot,
    parse_contrast,
    required_n,
)
from analysis.study import CONDITIONS, Plan, commands, run_plan
from analysis.study import parse as parse_study

STUDY = ["python", "-m", "analysis", "study"]


def draft(pilot: Path, contrast: str | None, args: argparse.Namespace) -> dict[str, Any]:
    """The yaml block for one contrast of the pilot runs: the arms, the runs per
    arm a one-sided test needs for ``args.power`` at d (``--d``, else ``--shrink``
    times the pilot's), the study command (the pilot's settings, a new root and
    seed) and the frozen files' sha256."""
    runs, scores = load_pilot(pilot, args.metric, args.embedder)
    cell_a, cell_b = one_contrast(runs, contrast)
    seen = describe(*arm_values(runs, args.metric, scores, cell_a, cell_b))
    d = args.d if args.d is not None else args.shrink * seen["pilot_d"]
    n, had = (None, 0.0) if math.isnan(d) else required_n(d, args.alpha, args.power, True, n_max=args.n_max)
    if n is None:
        raise ValueError(f"--contrast {contrast}: d = {d:.2f} needs more than {args.n_max} runs per arm")
    first = runs.drop_duplicates("cell").set_index("cell")
    model, temp = first.loc[cell_b, "cfg.model.spec"], float(first.loc[cell_b, "cfg.llm.temperature"])
    cond = condition_of(first)
    if (first.loc[cell_a, "cfg.model.spec"], float(first.loc[cell_a, "cfg.llm.temperature"])) != (
        model,
        temp,
    ):
        raise ValueError(
            f"--contrast {contrast}: the two cells differ in model or temperature, not in condition"
        )
    if args.seed in set(runs.get("cfg.seed", pd.Series(dtype=float)).dropna().astype(int)):
        raise ValueError(f"--seed {args.seed}: a pilot run has that seed; the confirmation needs new ones")
    plan = pilot_plan(pilot, model, temp, (cond[cell_a], cond[cell_b]))
    plan = dataclasses.replace(
        plan,
        root=args.root,
        models=tuple(m for m in plan.models if same_model(m, model)),
        conditions=tuple(c for c in CONDITIONS if c in (cond[cell_a], cond[cell_b])),
        temperatures=(temp,),
        replicates=n,
        seed=args.seed,
    )
    test = "exact" if math.comb(2 * n, n) <= MAX_EXACT else "Monte Carlo"
    return {
        "hypothesis": args.hypothesis
        or f"On {plan.models[0]} at T = {temp}, the {args.metric} of {cond[cell_b]} runs exceeds "
        f"that of {cond[cell_a]} runs.",
        "model": plan.models[0],
        "temperature": temp,
        "conditions": {"a": cond[cell_a], "b": cond[cell_b]},
        "metric": args.metric,
        "test": f"one-sided {test} permutation test of mean(b) - mean(a) over runs (b > a)",
        "alpha": args.alpha,
        "n_per_arm": n,
        "d": round(float(d), 3),
        "power": round(had, 3),
        "embedder": args.embedder,
        "root": str(args.root),
        "command": f"{plan.command()} --power-d {round(float(d), 3)} --power-one-sided --runs-only",
        "pilot": {"root": str(pilot), "cells": [cell_a, cell_b], **_rounded(seen)},
        "frozen": file_hashes(PACKAGE.parent, frozen_files()),
    }


def one_contrast(runs: pd.DataFrame, contrast: str | None) -> tuple[str, str]:
    """The contrast named, or the pilot's only control pair when none is."""
    if contrast:
        return parse_contrast(runs, contrast)
    pairs = contrasts(runs, [])
    if len(pairs) != 1:
        labels = runs.drop_duplicates("cell").set_index("cell").cell_label
        listed = "; ".join(f"{a[:6]}:{b[:6]} ({labels[a]} vs {labels[b]})" for a, b in pairs) or "none"
        raise ValueError(f"--contrast: the pilot has {len(pairs)} control pairs, name one: {listed}")
    return pairs[0]


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: round(float(v), 4) if isinstance(v, float) else v for k, v in values.items()}


def pilot_plan(pilot: Path, model: str, temp: float, conditions: tuple[str, str]) -> Plan:
    """The newest study command recorded under the pilot root that ran this model,
    temperature and both conditions: the confirmation copies its settings."""
    for line in reversed(commands(pilot)):
        plan, _ = parse_study(shlex.split(line)[len(STUDY) :])
        if (
            any(same_model(m, model) for m in plan.models)
            and temp in plan.temperatures
            and set(conditions) <= set(plan.conditions)
        ):
            return plan
    raise ValueError(
        f"{pilot}: no study command there ran {model} at T = {temp} with {' and '.join(conditions)}"
    )


def write_prereg(path: Path, block: dict[str, Any]) -> Path:
    """Write the block into ``path``: replace the block of an existing file (its
    prose stays), or start the file with a summary of the block."""
    fenced = "```yaml\n" + yaml.safe_dump(block, sort_keys=False, allow_unicode=True, width=100) + "```\n"
    text = path.read_text() if path.is_file() else ""
    if BLOCK.search(text):
        text = BLOCK.sub(lambda _: fenced, text, count=1)
    else:
        text = "\n".join(summary(block)) + "\n" + fenced
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def summary(b: dict[str, Any]) -> list[str]:
    """The prose a new preregistration starts with (the lead's to edit; the block is not)."""
    p = b["pilot"]
    return [
        "# Preregistration",
        "",
        f"Written by `python -m analysis prereg --write` from the pilot runs under `{p['root']}`. The yaml "
        "block is the preregistration: commit this file before `make confirm`. The report's Confirmatory "
        "section refuses runs that started before the commit that added it, a block that differs from that "
        "commit's, and any frozen analysis file whose sha256 differs from the block's.",
        "",
        f"- Hypothesis: {b['hypothesis']}",
        f"- Arms: a = {b['conditions']['a']}, b = {b['conditions']['b']}; {b['model']}, T = {b['temperature']}; "
        f"{b['n_per_arm']} runs per arm under `{b['root']}`.",
        f"- Metric `{b['metric']}`; test: {b['test']}, α = {b['alpha']}.",
        f"- Power {b['power']:.2f} at d = {b['d']:.2f}, simulated for this test (analysis/power.py).",
        f"- Pilot (exploratory): d = {p['pilot_d']:.2f} on {p['n_a']} vs {p['n_b']} runs, "
        f"SD a {p['sd_a']:.3f}, SD b {p['sd_b']:.3f}.",
        "",
    ]


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m analysis prereg", description=__doc__.split("\n\n")[0])
    todo = p.add_mutually_exclusive_group(required=True)
    todo.add_argument("--write", type=Path, help="write (or refresh) this preregistration from --pilot runs")
    todo.add_argument("--check", type=Path, help="only the guard: frozen files, commit, block")
    todo.add_argument("--run", type=Path, help="the guard, then the preregistered study command")
    p.add_argument("--pilot", type=Path, default=Path("research_runs/study"))
    p.add_argument(
        "--contrast", default=None, help="cellA:cellB (a: the control, b: the debate); default: the only pair"
    )
    p.add_argument("--metric", default="final_drift", help=f"{', '.join(METRICS)} or a runs-table column")
    p.add_argument(
        "--d", type=float, default=None, help="the effect to power for (default: --shrink x pilot d)"
    )
    p.add_argument("--shrink", type=float, default=0.5)
    p.add_argument("--power", type=float, default=TARGET)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--root", type=Path, default=Path("research_runs/confirm"))
    p.add_argument("--seed", type=int, default=1000, help="the confirmation's seed (not a pilot run's)")
    p.add_argument("--hypothesis", default=None)
    p.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    p.add_argument("--n-max", type=int, default=N_MAX)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """``python -m analysis prereg``: write, check, or run a preregistration."""
    args = parse(argv)
    if args.write:
        path = write_prereg(args.write, draft(args.pilot, args.contrast, args))
        block = read_prereg(path).block
        print(f"{path}: n = {block['n_per_arm']} per arm, power {block['power']} at d = {block['d']}")
        print(f"{len(block['frozen'])} frozen files; commit {path} before its runs: {block['command']}")
        return 0
    prereg = read_prereg(args.check or args.run)
    check_frozen(prereg)
    sha, when = added_by(prereg)
    print(f"{prereg.path}: added by {sha[:12]} ({when.isoformat()}); {len(prereg.frozen)} frozen files match")
    if args.check:
        return 0
    argv = shlex.split(prereg.command)
    if argv[: len(STUDY)] != STUDY or "--runs-only" not in argv:
        raise ValueError(f"{prereg.path}: command must be '{' '.join(STUDY)} ... --runs-only'")
    plan, study_args = parse_study(argv[len(STUDY) :])
    root = checkout_root(prereg.path) / plan.root  # where the Confirmatory section looks for the runs
    run_plan(dataclasses.replace(plan, root=root), study_args.power_d, study_args.power_one_sided)
    return 0

"""A preregistered confirmation: the guard and the report's Confirmatory section.

The exploratory study compares every debate cell with its controls over a
few runs; a contrast it singles out is then tested once more, on new runs,
by a test fixed before they start. ``docs/prereg.md`` holds prose and one
fenced yaml block, which is the preregistration (``analysis.prereg`` writes
it): the hypothesis, the model, temperature and the two arms' conditions
(a: the control, b: the debate), the metric (``analysis.power.METRICS`` or a
runs-table column), the test (one-sided permutation test of mean(b) - mean(a)
over runs, b > a), α, runs per arm, the d it was powered for and that power,
the embedder, the runs' root, the study command that makes them, and
``frozen``: the sha256 of every analysis file the metric and the test import
(``frozen_files``: this module and what it imports, directly or not).

The guard refuses, with one line naming what differs, when a frozen file's
sha256 is not the recorded one, when the file is not committed or its block
differs from the block the commit that added it holds, or when a run under
the root started no later than that commit. Then the test runs and
``section`` renders it, a null result as a null result.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import math
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from analysis.compare import permutation_p, welch
from analysis.power import (
    METRICS,
    TARGET,
    arm_values,
    condition_of,
    describe,
    load_pilot,
    power,
    smallest_p,
)

PACKAGE = Path(__file__).resolve().parent
BLOCK = re.compile(r"```yaml\n(.*?)```\n?", re.DOTALL)
KEYS = (
    *("hypothesis", "model", "temperature", "conditions", "metric", "test", "alpha", "n_per_arm"),
    *("d", "power", "embedder", "root", "command", "pilot", "frozen"),
)


@dataclasses.dataclass(frozen=True)
class Prereg:
    """The yaml block of a preregistration, and the file it came from."""

    path: Path
    block: dict[str, Any]

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["block"][key]
        except KeyError:
            raise AttributeError(key) from None


def read_prereg(path: Path) -> Prereg:
    """The preregistration in ``path``: its first fenced yaml block, every key present."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no preregistration there")
    return Prereg(path, parse_block(path.read_text(), path))


def parse_block(text: str, path: Path) -> dict[str, Any]:
    found = BLOCK.search(text)
    block = yaml.safe_load(found.group(1)) if found else None
    if not isinstance(block, dict):
        raise ValueError(f"{path}: no ```yaml block with the preregistration")
    missing = [k for k in KEYS if k not in block]
    if missing or set(block["conditions"]) != {"a", "b"}:
        raise ValueError(f"{path}: its yaml block lacks {', '.join(missing) or 'conditions a and b'}")
    return block


def frozen_files(roots: tuple[str, ...] = ("analysis.confirm",), package: Path = PACKAGE) -> list[str]:
    """The analysis modules ``roots`` import, directly or not (late imports too),
    as paths from the checkout: the code that computes the metric and the test."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        path = package / f"{name.split('.', 1)[1]}.py"
        if name in seen or not path.is_file():
            continue
        seen.add(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.startswith("analysis.")]
            elif isinstance(node, ast.ImportFrom) and node.module == "analysis":
                todo += [f"analysis.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("analysis."):
                todo.append(str(node.module))
    return sorted(f"{package.name}/{name.split('.', 1)[1]}.py" for name in seen)


def file_hashes(base: Path, files: list[str]) -> dict[str, str]:
    return {f: hashlib.sha256((base / f).read_bytes()).hexdigest() for f in files}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=False)
    if done.returncode:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ValueError(f"{cwd}: git {' '.join(args)} failed: {why}")
    return done.stdout.strip()


def checkout_root(path: Path) -> Path:
    """The git checkout the preregistration is in: frozen paths are relative to it."""
    return Path(git(path.resolve().parent, "rev-parse", "--show-toplevel")).resolve()


def check_frozen(prereg: Prereg) -> None:
    """Refuse when a frozen file is missing or its sha256 is not the recorded one."""
    base = checkout_root(prereg.path)
    for name, digest in prereg.frozen.items():
        path = base / name
        if not path.is_file():
            raise ValueError(f"{name}: frozen by {prereg.path} but missing")
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise ValueError(
                f"{name}: differs from its sha256 in {prereg.path} (frozen analysis code changed)"
            )


def added_by(prereg: Prereg) -> tuple[str, datetime]:
    """The commit that added the preregistration (the newest such), and its time."""
    path = prereg.path.resolve()
    found = git(path.parent, "log", "--diff-filter=A", "--format=%H %cI", "--", path.name).splitlines()
    if not found:
        raise ValueError(f"{prereg.path}: not committed; commit it before its runs start")
    sha, when = found[0].split()
    committed = parse_block(git(path.parent, "show", f"{sha}:./{path.name}"), prereg.path)
    if committed != prereg.block:
        raise ValueError(f"{prereg.path}: its yaml block differs from the one commit {sha[:12]} added")
    return sha, datetime.fromisoformat(when)


def check_started(runs: pd.DataFrame, prereg: Prereg, sha: str, when: datetime) -> None:
    """Refuse a run that started no later than the preregistration's commit."""
    started = pd.to_datetime(runs.started_at, utc=True, errors="coerce")
    early = runs[~(started > pd.Timestamp(when))]
    if len(early):
        row = early.iloc[0]
        raise ValueError(
            f"{row.run_id}: started {row.started_at}, not after {prereg.path} was committed "
            f"({sha[:12]}, {when.isoformat()})"
        )


def same_model(group: str, spec: Any) -> bool:
    """Whether a model group (``smollm2``, ``gemma3_270m``, ``scripted``) is the
    model a run's spec names (``local:smollm2``, ``local:gemma3-270m``, ``scripted:default``)."""

    def bare(text: str) -> str:
        return text.replace("-", "").replace("_", "").lower()

    return bare(group) in {bare(part) for part in str(spec).split(":")}


def arms(prereg: Prereg, runs: pd.DataFrame) -> tuple[str, str]:
    """The cells of arms a and b; refuse a run of any other cell, or an arm of several."""
    condition = condition_of(runs)
    same = runs["cfg.model.spec"].map(lambda spec: same_model(prereg.model, spec)) & np.isclose(
        runs["cfg.llm.temperature"].astype(float), float(prereg.temperature)
    )
    cells = []
    for arm in ("a", "b"):
        mine = runs[same & condition.eq(prereg.conditions[arm])].cell.unique()
        if len(mine) != 1:
            raise ValueError(
                f"{prereg.root}: {len(mine)} cells of arm {arm} ({prereg.conditions[arm]}); need 1"
            )
        cells.append(str(mine[0]))
    other = runs[~runs.cell.isin(cells)]
    if len(other):
        raise ValueError(f"{other.run_id.iloc[0]}: a run under {prereg.root} of no preregistered arm")
    return cells[0], cells[1]


def outcome(prereg: Prereg, runs: pd.DataFrame, scores: pd.DataFrame | None) -> dict[str, Any]:
    """The preregistered test on the runs: each arm's metric, b - a with a 95%
    Welch interval, the one-sided permutation p, the decision and the power."""
    a, b = arm_values(runs, prereg.metric, scores, *arms(prereg, runs))
    diff, low, high, _ = welch(a, b)
    p, method = permutation_p(a, b, alternative="greater")
    return {
        **describe(a, b),
        "diff": diff,
        "ci_low": low,
        "ci_high": high,
        "p": p,
        "method": method,
        "floor": smallest_p(len(a), len(b), one_sided=True),
        "reject": bool(p <= prereg.alpha),
        "power": power(len(a), len(b), float(prereg.d), float(prereg.alpha), one_sided=True),
    }


def render(prereg: Prereg, r: dict[str, Any], sha: str, when: datetime) -> list[str]:
    """The Confirmatory section's lines."""
    a, b = prereg.conditions["a"], prereg.conditions["b"]
    effect = f"d = {prereg.d:.2f} with {r['n_a']} vs {r['n_b']} runs"
    if r["reject"]:
        decision = (
            f"**H0 rejected** at α = {prereg.alpha}: the {b} runs' {prereg.metric} exceeds the {a} runs'."
        )
    else:
        other_way = " (the difference ran the other way)" if r["ci_high"] < 0 else ""
        strength = (
            "an effect that large would usually have shown; a smaller one is not ruled out"
            if r["power"] >= TARGET
            else "the design was underpowered, so this null says little"
        )
        decision = (
            f"**H0 not rejected** at α = {prereg.alpha}: a null result{other_way}. The runs do not show "
            f"the predicted difference; with power {r['power']:.2f} at {effect}, {strength}."
        )
    short = "" if min(r["n_a"], r["n_b"]) >= prereg.n_per_arm else " (fewer than planned)"
    arms_table = pd.DataFrame(
        [
            ["a", a, r["n_a"], r["mean_a"], r["sd_a"]],
            ["b", b, r["n_b"], r["mean_b"], r["sd_b"]],
        ],
        columns=["arm", "condition", "runs", f"mean {prereg.metric}", "SD"],
    )
    rows = [f"| {' | '.join(_cell(v) for v in row)} |" for row in arms_table.itertuples(index=False)]
    return [
        "## Confirmatory",
        "",
        f"Preregistered in `{prereg.path}`, added by commit `{sha[:12]}` ({when.isoformat()}); "
        f"its {len(prereg.frozen)} frozen analysis files match their sha256 and every run under "
        f"`{prereg.root}` started after that commit.",
        "",
        f"- Hypothesis: {prereg.hypothesis}",
        f"- Model {prereg.model}, T = {prereg.temperature}; metric `{prereg.metric}`"
        f"{' (' + METRICS[prereg.metric] + ')' if prereg.metric in METRICS else ''}; test: {prereg.test}.",
        f"- Runs per arm: planned {prereg.n_per_arm}, achieved {r['n_a']} (a) and {r['n_b']} (b){short}.",
        "",
        "| " + " | ".join(arms_table.columns) + " |",
        "|" + "---|" * len(arms_table.columns),
        *rows,
        "",
        f"- Difference b − a: {r['diff']:.3f} [95% Welch CI {r['ci_low']:.3f}, {r['ci_high']:.3f}].",
        f"- One-sided permutation p = {r['p']:.4f} ({r['method']}; the smallest attainable: {r['floor']:.4f}).",
        f"- Decision: {decision}",
        f"- Power the design had: {r['power']:.2f} to detect {effect} at α = {prereg.alpha} "
        f"(the test simulated, analysis/power.py); the pilot's d was {prereg.pilot['pilot_d']:.2f}.",
        "",
    ]


def _cell(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) and not math.isnan(v) else str(v)


def confirmatory(path: Path, runs: pd.DataFrame, scores: pd.DataFrame | None) -> list[str]:
    """The guard over ``runs`` (the runs under the preregistered root), then the test, rendered."""
    prereg = read_prereg(path)
    check_frozen(prereg)
    sha, when = added_by(prereg)
    check_started(runs, prereg, sha, when)
    return render(prereg, outcome(prereg, runs, scores), sha, when)


def section(path: Path) -> list[str]:
    """The report's Confirmatory section: none without a preregistration or its runs."""
    from analysis.records_io import find_runs

    if not path.is_file():
        return []
    prereg = read_prereg(path)
    check_frozen(prereg)  # before the frozen code loads anything
    root = checkout_root(path) / prereg.root
    if not root.is_dir() or not find_runs(root):
        return []
    runs, scores = load_pilot(root, prereg.metric, prereg.embedder)
    return confirmatory(path, runs, scores)

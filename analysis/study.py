"""python -m analysis study — a small real-model drift study anyone can rerun.

The plan: on each embedded model, the drift debate and its three controls
(``experiment=control_monologue | control_no_critic | control_cooperative``),
at two temperatures, three replicates each. Every (model, condition) is one
Hydra multirun on the joblib launcher into its own sweep folder under the
study root; a folder whose sweep already finished is skipped and one that
stopped part-way is resumed (``python -m harness.sweep resume``), so an
interrupted study picks up where it stopped. Then the whole root is analysed
(``analysis.pipeline.analyze``), every cell is compared with its controls
(``analysis.compare``) and ``docs/findings.md`` is written from the numbers
(``analysis.findings``).

    python -m analysis study                       # the default plan: both models, 8 rounds (not timed)
    python -m analysis study --rounds 4 --models smollm2   # a smaller study
    python -m analysis study --report-only         # re-analyse and rewrite the report
    python -m analysis study --runs-only ...       # only the runs (a preregistered confirmation's)
    make study                                     # the exploratory grid: docs/findings-exploratory-<date>.md

Measured (docs/findings.md), 96 tokens, critic.max_iterations=2, 2 workers
on 2 cores at load 2-6: SmolLM2, 5 rounds, full grammar: 84 min for the
debate and its three controls (31, 10, 17, 26). Gemma 3 270M, 3 rounds, lazy
grammar and prefix cache: 38 min (13, 6, 8, 12). Under full grammar Gemma
took about 5x SmolLM2's time per round in earlier grounded runs (350 s vs
73 s); a full mask checks its 262k-token vocabulary at every token.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from analysis.power import ALPHA, power, smallest_p

# condition -> the overrides that make it (the debate is the default drift format)
CONDITIONS: dict[str, tuple[str, ...]] = {
    "debate": (),
    "control_monologue": ("experiment=control_monologue",),
    "control_no_critic": ("experiment=control_no_critic",),
    "control_cooperative": ("experiment=control_cooperative",),
    "control_no_persona": ("experiment=control_no_persona",),
}
MODELS = ("smollm2", "gemma3_270m")
COMMANDS = "study_commands.txt"  # the plans run into a root, one command line each
WALLS = "study_walls.json"  # wall seconds per sweep
POWER_D = 1.0  # the effect (in SDs) at which the study states each contrast's power


@dataclass(frozen=True)
class Plan:
    """What the study runs; every field is a command-line flag."""

    root: Path = Path("research_runs/study")
    models: tuple[str, ...] = MODELS
    conditions: tuple[str, ...] = tuple(CONDITIONS)
    temperatures: tuple[float, ...] = (0.3, 1.0)
    replicates: int = 3
    rounds: int = 8
    max_tokens: int = 160  # the small models ramble; shorter replies keep the plan short
    workers: int = 2  # cells at once (joblib); llama.cpp threads = cores / workers
    seed: int = 0
    extra: tuple[str, ...] = field(default_factory=tuple)  # more Hydra overrides for every cell

    def runs(self) -> int:
        return len(self.models) * len(self.conditions) * len(self.temperatures) * self.replicates

    def sweep_dir(self, model: str, condition: str) -> Path:
        return self.root / f"{model}-{condition}"

    def overrides(self, model: str, condition: str) -> list[str]:
        return [
            f"model={model}",
            f"llm.temperature={','.join(map(str, self.temperatures))}",
            f"replicates={self.replicates}",
            f"rounds={self.rounds}",
            f"llm.max_tokens={self.max_tokens}",
            f"seed={self.seed}",
            "progress=false",
            f"runs_root={self.root}",
            "hydra/launcher=joblib",
            f"hydra.launcher.n_jobs={self.workers}",
            f"hydra.sweep.dir={self.sweep_dir(model, condition)}",
            *CONDITIONS[condition],
            *self.extra,
        ]

    def command(self) -> str:
        """The command line that reruns this plan."""
        flags = [
            f"--root {self.root}",
            f"--models {','.join(self.models)}",
            f"--conditions {','.join(self.conditions)}",
            f"--temperatures {','.join(map(str, self.temperatures))}",
            f"--replicates {self.replicates}",
            f"--rounds {self.rounds}",
            f"--max-tokens {self.max_tokens}",
            f"--workers {self.workers}",
            f"--seed {self.seed}",
            *(f"--set {o}" for o in self.extra),
        ]
        return "python -m analysis study " + " ".join(flags)


def sweep_state(sweep_dir: Path) -> str:
    """``new`` (no index yet), ``done`` (every cell completed) or ``partial``."""
    index = sweep_dir / "sweep.json"
    if not index.is_file():
        return "new"
    cells = json.loads(index.read_text()).get("cells", [])
    done = cells and all(c.get("status") == "completed" for c in cells)
    return "done" if done else "partial"


def launch(plan: Plan, model: str, condition: str) -> float:
    """Run (or resume) one (model, condition) sweep; its wall time in seconds."""
    sweep_dir = plan.sweep_dir(model, condition)
    state = sweep_state(sweep_dir)
    if state == "done":
        print(f"[study] {sweep_dir.name}: done, skipped", flush=True)
        return 0.0
    if state == "partial":
        command = [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)]
    else:
        command = [sys.executable, "-m", "harness.run", "-m", *plan.overrides(model, condition)]
    print(f"[study] {sweep_dir.name}: {'resume' if state == 'partial' else 'run'}", flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=False)  # a failed cell is recorded in the index; the report shows it
    return time.perf_counter() - started


def commands(root: Path) -> list[str]:
    """Every plan run into this root, oldest first (one root may hold several)."""
    path = root / COMMANDS
    return path.read_text().splitlines() if path.is_file() else []


def record_command(plan: Plan) -> None:
    if plan.command() not in commands(plan.root):
        with (plan.root / COMMANDS).open("a") as f:
            f.write(plan.command() + "\n")


def power_lines(plan: Plan, d: float = POWER_D, alpha: float = ALPHA, one_sided: bool = False) -> list[str]:
    """One line per planned contrast (the debate against each control, per model
    and temperature): the power of the permutation test (two-sided, as the
    report's grid; one-sided, as a preregistered confirmation) over the plan's
    replicates at effect d, simulated (analysis.power)."""
    controls = [c for c in plan.conditions if c != "debate"] if "debate" in plan.conditions else []
    if not controls:
        return ["[study] power: no planned contrast (the plan has no debate with a control)"]
    n = plan.replicates
    floor, sided = smallest_p(n, n, one_sided), "one-sided" if one_sided else "two-sided"
    why = f"; its smallest attainable p is {floor:.3f} > α: unreachable" if floor > alpha else ""
    at = f"{power(n, n, d, alpha, one_sided):.2f} at d = {d} ({sided} permutation test, α = {alpha}{why})"
    return [
        f"[study] power: {model} T={t} debate vs {c}, {n} vs {n} runs: {at}"
        for model in plan.models
        for t in plan.temperatures
        for c in controls
    ]


def run_plan(plan: Plan, power_d: float = POWER_D, one_sided: bool = False) -> dict[str, float]:
    """Every sweep of the plan, in order, after its contrasts' power; wall seconds per sweep."""
    plan.root.mkdir(parents=True, exist_ok=True)
    record_command(plan)
    print(*power_lines(plan, power_d, one_sided=one_sided), sep="\n", flush=True)
    print(f"[study] {plan.runs()} runs of {plan.rounds} rounds under {plan.root}", flush=True)
    walls = sweep_walls(plan.root)
    for model in plan.models:
        for condition in plan.conditions:
            name = plan.sweep_dir(model, condition).name
            walls[name] = walls.get(name, 0.0) + launch(plan, model, condition)
            (plan.root / WALLS).write_text(json.dumps(walls, indent=1))  # after each sweep: a kill keeps it
    return walls


def sweep_walls(root: Path) -> dict[str, float]:
    """Wall seconds each sweep under the root took, summed over launches."""
    path = root / WALLS
    return json.loads(path.read_text()) if path.is_file() else {}


def parse(argv: list[str]) -> tuple[Plan, argparse.Namespace]:
    p = parser(Plan())
    args = p.parse_args(argv)
    if args.long is not None and not args.long.is_dir():
        p.error(f"--long: no folder {args.long}")
    if args.report_only and args.runs_only:
        p.error("--report-only and --runs-only: give one of them")
    conditions = tuple(args.conditions.split(","))
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        p.error(f"--conditions: unknown {unknown}; choose from {list(CONDITIONS)}")
    if args.replicates < 2 or args.rounds < 3:
        p.error("--replicates must be >= 2 and --rounds >= 3: fewer cannot show a trajectory or a spread")
    plan = Plan(
        root=args.root,
        models=tuple(args.models.split(",")),
        conditions=conditions,
        temperatures=tuple(float(t) for t in args.temperatures.split(",")),
        replicates=args.replicates,
        rounds=args.rounds,
        max_tokens=args.max_tokens,
        workers=args.workers,
        seed=args.seed,
        extra=tuple(args.set),
    )
    return plan, args


def parser(default: Plan) -> argparse.ArgumentParser:
    """The study command's options, each defaulting to ``default``'s value."""
    p = argparse.ArgumentParser(prog="python -m analysis study", description=__doc__.split("\n\n")[0])
    p.add_argument("--root", type=Path, default=default.root)
    p.add_argument("--models", default=",".join(default.models), help="model group names, comma-separated")
    p.add_argument("--conditions", default=",".join(default.conditions), help=f"from {', '.join(CONDITIONS)}")
    p.add_argument("--temperatures", default=",".join(map(str, default.temperatures)))
    p.add_argument("--replicates", type=int, default=default.replicates)
    p.add_argument("--rounds", type=int, default=default.rounds)
    p.add_argument("--max-tokens", type=int, default=default.max_tokens)
    p.add_argument("--workers", type=int, default=default.workers)
    p.add_argument("--seed", type=int, default=default.seed)
    p.add_argument("--set", action="append", default=[], help="one more Hydra override for every cell")
    p.add_argument("--report", type=Path, default=Path("docs/findings.md"))
    p.add_argument(
        "--detector",
        type=Path,
        default=Path("docs/detector_validity.json"),
        help="benchmarks/detector_validity.py --json output, quoted in the report",
    )
    p.add_argument("--embedder", default=None, help="as for python -m analysis")
    p.add_argument("--report-only", action="store_true", help="skip the runs; re-analyse and rewrite")
    p.add_argument("--runs-only", action="store_true", help="only the runs; write no report")
    p.add_argument("--power-d", type=float, default=POWER_D, help="the effect each contrast's power is at")
    p.add_argument("--power-one-sided", action="store_true", help="state one-sided power (a confirmation's)")
    p.add_argument(
        "--prereg",
        type=Path,
        default=None,
        help="the preregistration of the report's Confirmatory section (default: prereg.md beside --report)",
    )
    p.add_argument(
        "--long",
        type=Path,
        default=None,
        help="a root of long runs (one per format) for the report's Long trajectories section",
    )
    return p

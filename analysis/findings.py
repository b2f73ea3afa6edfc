"""``docs/findings.md`` from a study's runs: a Confirmatory section when a
preregistration and its runs exist (``analysis.confirm``), then the
Exploratory study: what was run, with which versions, the tables the
analysis produced, the detector's error rates, and which claims the numbers
do and do not support (``analysis.exploratory``: Holm-adjusted over the grid;
a contrast whose power was below 0.8 is inconclusive, never "not supported").

Every sentence that states a result is built from a number computed here;
the fixed text says only what the method is and what it cannot show.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import re
import shutil
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import pandas as pd
from pydantic import BaseModel

import analysis.plots as plots
from analysis.baseline_splices import baseline_validity_section
from analysis.calibrate import calibration_section
from analysis.confirm import section as confirmatory_section
from analysis.echoes import echo_section
from analysis.embed import DEFAULT_EMBEDDER
from analysis.exploratory import (
    ALPHA,
    comparisons,
    detection_summary,
    detector_params,
    detector_section,
    md_table,
)
from analysis.long_runs import long_section
from analysis.pipeline import Analysis, analyze
from analysis.power import TARGET, condition_of
from analysis.power import smallest_p as smallest_p  # re-exported: the floor the report quotes
from analysis.scoring import t_interval
from analysis.splice import real_text_section
from analysis.study import POWER_D, Plan, commands, parse, run_plan, sweep_walls

PACKAGES = (
    "llama-cpp-python",
    "langgraph",
    "langchain-core",
    "pydantic",
    "pandas",
    "torch",
    "sentence-transformers",
    "ruptures",
    "scipy",
    "hydra-core",
)


def versions() -> dict[str, str]:
    """Python, the harness commit and the packages the numbers depend on."""
    out = {"python": platform.python_version(), "platform": platform.platform(), "cpus": str(os.cpu_count())}
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
        out["drift-harness commit"] = commit.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out["drift-harness commit"] = "unknown (not a git checkout)"
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


# A field label as the agents' prompts write it, "- argument: your argument, ..."
_PROMPT_LABEL = re.compile(r"- [a-z_]+: ([^\"\\\n]{15,})")


@functools.cache
def schema_descriptions() -> tuple[str, ...]:
    """The labels a reply's fields carry: every description in the reply
    schemas (nested ones too), and every "- field: label" line of the agents'
    prompts, read from their source, where the labels are written."""
    import harness.agents as agents
    from harness.models.structured import field_labels

    found: list[str] = []
    for name in agents.__all__:
        cls = getattr(agents, name)
        if isinstance(cls, type) and issubclass(cls, BaseModel):
            found += field_labels(cls)[1]
    for path in Path(agents.__file__).parent.glob("*.py"):
        found += _PROMPT_LABEL.findall(path.read_text())
    return tuple(sorted({text.strip().lower() for text in found if "{" not in text}))  # f-string holes vary


def echoes_schema(texts: pd.Series) -> pd.Series:
    """Whether each text contains a field label (``schema_descriptions``): a small
    model filling a field with its label, which validates but says little."""
    descriptions = schema_descriptions()
    return texts.fillna("").str.lower().map(lambda t: any(d in t for d in descriptions))


def cell_summary(result: Analysis) -> pd.DataFrame:
    """Per cell: runs, status, process counts and the final drift index (mean, 95% CI)."""
    runs = result.tables.runs.assign(condition=condition_of(result.tables.runs))
    final = result.final.set_index("run_id").drift_index
    runs = runs.assign(final_drift=runs.run_id.map(final))
    turns = result.tables.turns
    echoed = echoes_schema(turns.text).groupby(turns.run_id).mean() if len(turns) else pd.Series(dtype=float)
    rows = []
    keys = ["cfg.model.spec", "cfg.llm.temperature", "condition"]
    for (model, temp, condition), g in runs.groupby(keys, dropna=False):
        x = g.final_drift.dropna()
        low, high = t_interval(x)  # Student's t: with 3 runs, 1.96 would make the interval 2.2x too narrow
        rows.append(
            {
                "model": model,
                "T": temp,
                "condition": condition,
                "runs": len(g),
                "completed": int((g.status == "completed").sum()),
                "rounds": int(g["counts.rounds_completed"].max()),
                "rejections/run": g["counts.rejections"].mean(),
                "loop-locks/run": g["counts.loop_locks"].mean(),
                "schema failures/run": g["counts.schema_failures"].mean(),
                "turns echoing the schema": g.run_id.map(echoed).mean(),
                "final drift index": x.mean() if len(x) else math.nan,
                "± 95% (t)": (high - low) / 2,
            }
        )
    return pd.DataFrame(rows)


def figure(result: Analysis, docs: Path) -> str:
    """The drift index per round by condition, saved beside the report; its Markdown."""
    runs = result.tables.runs.assign(condition=condition_of(result.tables.runs))
    fig = plots.condition_trajectories(result.scores, runs)
    out = docs / "images"
    saved = plots.save(fig, out, "findings_trajectories")
    return f"![drift index per round by condition]({saved[0].relative_to(docs)})"


def design(result: Analysis) -> list[str]:
    """What the runs under the root are, read from their configs."""
    runs = result.tables.runs.assign(condition=condition_of(result.tables.runs))

    def values(column: str) -> str:
        return ", ".join(map(str, sorted(runs[column].dropna().unique())))

    per_cell = runs.groupby("cell").size()
    return [
        f"- {len(runs)} runs in {len(per_cell)} cells ({per_cell.min()}–{per_cell.max()} replicates each), "
        f"{len(result.tables.turns)} published turns;",
        f"- models: {values('cfg.model.spec')}; conditions: {values('condition')};",
        f"- temperatures: {values('cfg.llm.temperature')}; rounds: {values('cfg.rounds')}; "
        f"llm.max_tokens: {values('cfg.llm.max_tokens')};",
        *decoding(runs),
    ]


def decoding(runs: pd.DataFrame) -> list[str]:
    """How each local model decoded: grammar mode and prefix cache differ in what
    they sample above temperature 0 (docs/decoding.md), so the report names them."""
    keys = ["cfg.model.spec", "cfg.model.grammar_mode", "cfg.model.prefix_cache"]
    if not set(keys) <= set(runs.columns):
        return []
    rows = runs[keys].dropna().drop_duplicates().sort_values(keys[0])
    return [
        f"- {spec}: model.grammar_mode={mode}, model.prefix_cache={str(cache).lower()};"
        for spec, mode, cache in rows.itertuples(index=False)
    ]


def missing(plan: Plan, result: Analysis) -> list[str]:
    """Models and conditions the plan names that no run under the root has."""
    runs = result.tables.runs
    have = {str(s).split(":", 1)[-1].replace("-", "").replace("_", "") for s in runs["cfg.model.spec"]}
    models = [m for m in plan.models if m.replace("-", "").replace("_", "") not in have]
    conditions = sorted(set(plan.conditions) - set(condition_of(runs)))
    return (
        [
            f"- Not run yet, so not in any table here: {', '.join([*models, *conditions])}. "
            "Rerun the command above: finished sweeps are skipped."
        ]
        if models or conditions
        else []
    )


def rises(result: Analysis) -> list[str]:
    """How many cells end above where they began, and why that alone is not drift."""
    agg = result.trajectory[result.trajectory.value == "drift_index"]
    per_cell = agg.groupby(["cell", "round"])["mean"].mean().unstack("round")
    if per_cell.empty or per_cell.shape[1] < 2:
        return []
    up = int((per_cell.iloc[:, -1] > per_cell.iloc[:, 0]).sum())
    return [
        f"- The drift index ends above its first round in {up} of {len(per_cell)} cells, controls "
        "included. It rises in stable scripted runs too (docs/signals.md, Detector validation), "
        "because some signals accumulate history: a rise alone is not drift; "
        "compare against a control."
    ]


def echoes(result: Analysis) -> list[str]:
    """Per model, how many published turns contain a field label."""
    turns = result.tables.turns.merge(result.tables.runs[["run_id", "cfg.model.spec"]], on="run_id")
    if turns.empty:
        return []
    share = echoes_schema(turns.text).groupby(turns["cfg.model.spec"]).agg(["sum", "count"])
    return [
        f"- {int(k)} of {int(n)} published turns of {model} contain a field label from the prompts or "
        "the reply schemas (a small model filling a field with its label): they validate, count as turns "
        "and move the signals, but carry little or no argument. Read this model's drift figures with "
        "that in mind."
        for model, (k, n) in share.iterrows()
        if k
    ]


def limits(plan: Plan, result: Analysis) -> list[str]:
    """What this design cannot show, whatever the numbers."""
    n = result.tables.runs.groupby("cell").size()
    return [
        f"- {int(n.min()) if len(n) else 0}–{int(n.max()) if len(n) else 0} replicate runs per cell: "
        "only large effects could show, and no null result here rules out a small one.",
        f"- {result.tables.runs['cfg.rounds'].max()} rounds per run at most: a short trajectory. Drift that starts later, as in 50-round "
        "debates, is outside this study.",
        "- The models are small (SmolLM2 has 135M parameters, Gemma 3 270M 270M and is a base model, not "
        "instruction-tuned). Nothing here says how larger models drift.",
        *missing(plan, result),
        *echoes(result),
        "- The drift index is a z-scored mean of lexical, embedding and process signals against each "
        "agent's opening turns (docs/signals.md). Its detectors were validated on the scripted model, "
        "where the truth is planted (the section above); on real models the truth is unknown.",
        "- The controls remove one source of pressure each; the cells differ in how many calls they make "
        "(no critic: fewer; monologue: one team), so a difference is attributable to the condition, "
        "not to a mechanism inside it.",
    ]


def write_findings(
    plan: Plan,
    report: Path,
    *,
    detector: Path,
    walls: dict[str, float],
    embedder: str = DEFAULT_EMBEDDER,
    power_d: float = POWER_D,
    prereg: Path | None = None,
    long: Path | None = None,
) -> Path:
    """Analyse the study root and write the report; returns its path. ``prereg``
    (default: prereg.md beside the report) adds the Confirmatory section when
    its runs exist; its guard refuses, with one line, before anything is written."""
    confirmed = confirmatory_section(prereg or report.parent / "prereg.md")
    result = analyze(plan.root, embedder=embedder, progress=False)
    report.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Findings: a small real-model drift study",
        "",
        f"Written by `python -m analysis study` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC from the run folders "
        f"under `{plan.root}` (kept out of git). Do not edit by hand: rerun the command below.",
        "",
        *confirmed,
        "## Exploratory",
        "",
        "Every debate cell against each of its controls, with no hypothesis fixed before the runs: "
        "the p's describe, they do not confirm. A contrast worth confirming goes through a "
        "preregistration (`python -m analysis prereg`, docs/analysis.md).",
        "",
        *what_was_run(plan, result, walls, embedder),
        *exploratory(plan, result, report.parent, detector, power_d),
        "## Echoes of the instructions",
        "",
        *echo_section(result),
        "",
        "## Detector validity on real text",
        "",
        *real_text_section(detector),
        "",
        "## Calibration: persona switches planted in SmolLM2's own debates",
        "",
        *calibration_section(detector),
        "",
        "## Persona loss against the no-persona baseline, on spliced real turns",
        "",
        *baseline_validity_section(detector),
        "",
        *(long_section(long, report.parent, detector, embedder) if long else []),
    ]
    report.write_text("\n".join(lines))
    shutil.copy2(report, plan.root / "findings.md")  # a copy beside the runs it describes
    return report


def what_was_run(plan: Plan, result: Analysis, walls: dict[str, float], embedder: str) -> list[str]:
    """The commands, the design read from the runs, wall times, versions and model files."""
    lines = [
        "### What was run",
        "",
        *(f"    {command}" for command in commands(plan.root) or [plan.command()]),
        "",
        *design(result),
        f"- embedder `{embedder}`; each plan ran {plan.workers} cells at once (joblib).",
    ]
    if walls:
        lines.append(
            f"- wall time: {sum(walls.values()) / 60:.1f} min ("
            + ", ".join(f"{k} {v / 60:.1f}" for k, v in walls.items())
            + ")."
        )
    lines += [
        "",
        "Versions:",
        "",
        md_table(pd.DataFrame(list(versions().items()), columns=["what", "version"])),
    ]
    files = sorted({f"{p} `{h[:12]}`" for p, h in _model_files(result).items()})
    return [*lines, "", "Model files (sha256 prefix): " + "; ".join(files) if files else "", ""]


def exploratory(plan: Plan, result: Analysis, docs: Path, detector: Path, power_d: float) -> list[str]:
    """The exploratory tables, the detector's error rates and what the data support."""
    table, verdicts = comparisons(result, power_d)
    lines = ["### Cells", "", md_table(cell_summary(result)), "", figure(result, docs), ""]
    lines += [
        "### The debate against its controls",
        "",
        "Control = a; debate = b. d > 0: the debate drifted more than the control "
        "(run-mean drift index; bootstrap CI over runs; exact permutation test over runs, two-sided). "
        f"Holm p: Holm's correction over the {len(table)} contrasts of this table, one family; "
        f"power: the permutation test's at d = {power_d:g} and α = {ALPHA}, simulated (analysis/power.py). "
        f"Power below {TARGET}: inconclusive.",
        "",
        md_table(table),
        "",
        *verdicts,
        "",
    ]
    params = detector_params(detector)
    source = (
        "the settings benchmarks/detector_validity.py chose on its tuning seeds"
        if params["validated"]
        else "the library defaults; no detector validation was found"
    )
    lines += [
        "### Change points and trends",
        "",
        f"Agents (run × team) with a PELT change point in `{params['pelt_column']}` (penalty "
        f"{params['penalty']}), and with a Mann-Kendall trend in `{params['trend_column']}` at "
        f"α = {params['alpha']} ({source}):",
        "",
        md_table(detection_summary(result, params)),
        "",
    ]
    if not result.probe_stability.empty:
        stab = result.probe_stability.groupby("round").agg(pass_rate=("pass_rate", "mean")).reset_index()
        lines += ["### Behavioural probes", "", md_table(stab), ""]
    lines += ["### Detector error rates", "", *detector_section(detector), ""]
    return [
        *lines,
        "### What the data do and do not support",
        "",
        *verdicts,
        *rises(result),
        *limits(plan, result),
        "",
    ]


def _model_files(result: Analysis) -> dict[str, str]:
    """Weight files and hashes from the run manifests (``model_files``)."""
    out: dict[str, str] = {}
    for run_dir in result.tables.run_dirs.values():
        manifest = run_dir / "manifest.json"
        if manifest.is_file():
            out.update(
                {Path(p).name: h for p, h in json.loads(manifest.read_text()).get("model_files", {}).items()}
            )
    return out


def main(argv: list[str]) -> int:
    """``python -m analysis study``: run the plan (or only re-analyse it) and write the report."""
    plan, args = parse(argv)
    walls = sweep_walls(plan.root) if args.report_only else run_plan(plan, args.power_d, args.power_one_sided)
    if args.runs_only:
        print(f"[study] runs under {plan.root}; no report (--runs-only)")
        return 0
    kwargs = {"embedder": args.embedder} if args.embedder else {}
    path = write_findings(
        plan,
        args.report,
        detector=args.detector,
        walls=walls,
        power_d=args.power_d,
        prereg=args.prereg,
        long=args.long,
        **kwargs,
    )
    print(f"[study] report: {path}")
    return 0

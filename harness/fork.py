"""python -m harness.fork <run> --at-round k [key=value ...] — fork a run.

    python -m harness.fork research_runs/memory-v1-temp-0.7-max-tokens-256 --at-round 2 critic=strict
    python -m harness.fork -m <run-or-sweep> --at-round 1,2 critic=lenient,strict

A new run folder starts from the parent's snapshot at round k: its rounds
1..k are the parent's, copied and never paid again, and it goes on from
round k+1 with the overrides applied to the parent's own config (docs/forks.md;
what may change: ``harness.store.fingerprint``, THE FORK CONTRACT). This is the
front door of ``python -m harness.run fork.parent=<run> fork.at_round=k ...``,
which it calls; with ``-m`` every run of a sweep (or one run) and every round
given is forked, as a sweep of its own, with its index, status and resume.
``fork`` makes and runs one fork in process (``analysis.calibrate`` forks
through it).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir

from harness.cli.errors import BAD_INPUT, fail, parent_keys_forced
from harness.engine import RunResult
from harness.engine.forking import fork_parent, fork_run
from harness.models.registry import build_model
from harness.paths import conf_dir
from harness.run import cli as run_cli
from harness.schema import ConfigError
from harness.store.reader import check_run_files, find_runs
from harness.store.rundir import RunFolderError

_PLAIN = re.compile(r"^[A-Za-z0-9_./:+-]+$")  # a path Hydra's override grammar reads unquoted


def hydra_value(path: Path) -> str:
    text = str(path.resolve())
    return text if _PLAIN.match(text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fork(parent: Path, at_round: int, overrides: list[str], *, build=build_model) -> RunResult:  # type: ignore[no-untyped-def]
    """One fork of ``parent`` after round ``at_round``, made and run in process."""
    given = parent_keys_forced(
        [f"fork.parent={hydra_value(parent)}", f"fork.at_round={at_round}", *overrides]
    )
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=given)
    return fork_run(cfg, given, build=build)


def parents(path: Path, multirun: bool) -> list[Path]:
    """The runs to fork: ``path`` itself, or with ``-m`` every run under it (a sweep)."""
    runs = find_runs(path) if path.is_dir() else []
    if not runs:
        fail(f"{path}: no run folder there (no manifest.json)", BAD_INPUT)
    if len(runs) > 1 and not multirun:
        fail(f"{path}: holds {len(runs)} runs; fork them all with -m, or name one", BAD_INPUT)
    for run in runs:
        try:
            check_run_files(run, ("manifest.json", "config.yaml"))  # the parent's files a fork reads whole
        except RunFolderError as exc:
            fail(f"fork.parent: {exc}", BAD_INPUT)
    return runs


def run_argv(args: argparse.Namespace) -> list[str]:
    """``harness.run``'s command line for this fork (or grid of forks)."""
    if "," in args.at_round and not args.multirun:
        fail(f"--at-round {args.at_round}: several rounds make a grid; add -m", BAD_INPUT)
    for k in args.at_round.split(","):  # the range (k >= 1, a snapshot of the parent's) is checked later
        if not re.fullmatch(r"\s*-?\d+\s*", k):
            fail(
                f"--at-round {args.at_round}: {k!r} is not a round number (k: a whole number >= 1)", BAD_INPUT
            )
    try:
        parent = fork_parent(args.run)  # not Path("") for the empty path: the current folder
    except ConfigError as exc:
        fail(str(exc), BAD_INPUT)
    runs = parents(parent, args.multirun)
    argv = ["-m"] if args.multirun else []
    argv += [f"fork.parent={','.join(hydra_value(r) for r in runs)}", f"fork.at_round={args.at_round}"]
    return argv + args.overrides


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.fork", description=__doc__.split("\n")[0])
    parser.add_argument("run", help="the parent run folder (with -m: a run or a sweep folder)")
    parser.add_argument("--at-round", required=True, help="k: the fork's rounds 1..k are the parent's")
    parser.add_argument("-m", "--multirun", action="store_true", help="a grid of forks, run as a sweep")
    parser.add_argument(
        "--plan", action="store_true", help="print its cost (python -m harness.plan), run nothing"
    )
    parser.add_argument("--pilot", action="append", default=[], help="with --plan: calibrate from these runs")
    parser.add_argument("--call-s", help="with --plan: seconds one remote call takes")
    parser.add_argument("overrides", nargs="*", help="key=value changes, e.g. critic=strict seed=7")
    args = parser.parse_intermixed_args(sys.argv[1:] if argv is None else argv)
    if (args.pilot or args.call_s) and not args.plan:
        fail("--pilot and --call-s are --plan's options", BAD_INPUT)
    sys.argv[1:] = run_argv(args)
    if args.plan:  # its own process: harness.plan and harness.fork import neither the other
        options = [f"--pilot={p}" for p in args.pilot] + ([f"--call-s={args.call_s}"] if args.call_s else [])
        sys.exit(subprocess.run([sys.executable, "-m", "harness.plan", *options, *sys.argv[1:]]).returncode)
    run_cli()


if __name__ == "__main__":
    main()

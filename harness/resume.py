"""python -m harness.resume <run_dir> [--force] [key=value ...] — continue a run.

The run continues from its own ``config.yaml``, from the newest snapshot its
memory files agree with (``harness.engine.resuming``), with the decoding modes
it was made with even where a default changed since. ``--force`` resumes
despite a fingerprint mismatch, and is recorded; ``rounds=100`` extends.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.console import guarded, say
from harness.cli.errors import exit_code
from harness.cli.report import report
from harness.engine.fork_config import is_group
from harness.engine.resuming import ResumeError, resume_run
from harness.models.base import ModelConfigError
from harness.runtime.context import ModelCallError
from harness.schema import ConfigError
from harness.store.memory import CorruptLogError
from harness.store.reader import RUN_FILES, check_run_files, read_config
from harness.store.rundir import DiskFullError, RunInUseError

# What a resume may end in that the command says, with its exit status (``exit_code``).
# ConfigError covers a run folder's unreadable manifest, config or fingerprint (RunFolderError).
RESUME_ERRORS = (
    ConfigError,
    CorruptLogError,
    ModelConfigError,
    ResumeError,
    RunInUseError,
    ModelCallError,
    DiskFullError,
    KeyboardInterrupt,
)


def resume_error(exc: BaseException, run_dir: Path) -> list[str]:
    """The lines a resume's ``RESUME_ERRORS`` end in."""
    if isinstance(exc, KeyboardInterrupt):
        return [f"interrupted; resume with: python -m harness.resume {run_dir}"]
    if isinstance(exc, ModelCallError):  # one line, as harness.run's (a sweep's cell keeps it as its note)
        return [f"error: {exc}; resume it with: python -m harness.resume {run_dir}"]
    return [f"error: {exc}"]


def check_groups(overrides: list[str]) -> None:
    """A group choice (``format=panel``, ``critic=strict``) would swap a whole
    section of the run's config: refused in one line, as a fork refuses its own."""
    for override in overrides:
        key, _, value = override.partition("=")
        key = key.lstrip("+~")
        if is_group(key):
            raise ConfigError(
                f"{key}={value}: a config group may not change on resume; a resume keeps the run's "
                f"own {key} (the resume contract, docs/run-folders.md)"
            )


def check_replicates(run_dir: Path, overrides: list[str]) -> None:
    """``replicates=N`` makes N cells of a sweep: for one run it means nothing, so a
    value other than the run's own is refused in one line, as ``harness.run`` refuses
    it without ``-m``, not taken for a fingerprint change that ``--force`` would pass."""
    given = [o.partition("=")[2] for o in overrides if o.partition("=")[0].lstrip("+~") == "replicates"]
    if not given or not run_dir.is_dir():
        return
    own = read_config(run_dir).get("replicates", 1)
    if given[-1].strip() != str(own):
        raise ConfigError(
            f"replicates={given[-1]}: makes cells of a sweep, one run each; a resume continues this "
            f"one run (its replicates={own}), and a sweep of more is python -m harness.run -m ..."
        )


def check_no_fork(run_dir: Path, overrides: list[str]) -> None:
    """``fork.*`` says where a run forks from: a resume continues the run where it is,
    so a change there was accepted unsaid (the run went on as it was made). A fork
    elsewhere is a new run: refused in one line naming it, before anything is written."""
    given = [o for o in overrides if o.partition("=")[0].lstrip("+~").partition(".")[0] == "fork"]
    if not given:
        return
    parent = (read_config(run_dir).get("fork") or {}).get("parent") if run_dir.is_dir() else None
    fork = (  # a run that is no fork is the parent of one
        f"a fork at another round is a new run: python -m harness.fork {parent}"
        if parent
        else f"a fork of it is a new run: python -m harness.fork {run_dir}"
    )
    raise ConfigError(f"{given[0]}: a resume continues {run_dir} as it was made; {fork} --at-round K")


def run_files(run_dir: Path) -> list[str]:
    """The run's files to check first: a missing ``fingerprint.json`` is left to the
    engine, which says what to do (``--force`` rewrites it); an unreadable one is not."""
    return [name for name in RUN_FILES if name != "fingerprint.json" or (run_dir / name).exists()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.resume", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--force", action="store_true", help="resume despite a fingerprint mismatch")
    # default=[]: else argparse names them as required when none is given
    parser.add_argument("overrides", nargs="*", default=[], help="key=value changes, e.g. rounds=100")
    args = parser.parse_intermixed_args(argv)  # --force before, between or after the overrides
    sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)  # a closed pipe ends no run
    try:
        check_groups(args.overrides)
        if args.run_dir.is_dir():  # else the engine names the config.yaml it cannot find
            # each in one line, before the engine reads them
            check_run_files(args.run_dir, run_files(args.run_dir))
        check_replicates(args.run_dir, args.overrides)
        check_no_fork(args.run_dir, args.overrides)
        result = resume_run(args.run_dir, force=args.force, overrides=args.overrides)
    except RESUME_ERRORS as exc:
        for line in resume_error(exc, args.run_dir):
            say(line, sys.stderr)
        return exit_code(exc)
    return report(result)


if __name__ == "__main__":
    sys.exit(main())

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
from harness.cli.report import report
from harness.config import ConfigError
from harness.engine.context import ModelCallError
from harness.engine.resuming import ResumeError, resume_run
from harness.models.base import ModelConfigError
from harness.store.rundir import DiskFullError, RunInUseError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.resume", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--force", action="store_true", help="resume despite a fingerprint mismatch")
    parser.add_argument("overrides", nargs="*", help="key=value changes, e.g. rounds=100")
    args = parser.parse_args(argv)
    sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)  # a closed pipe ends no run
    try:
        result = resume_run(args.run_dir, force=args.force, overrides=args.overrides)
    except (ConfigError, ModelConfigError, ResumeError, RunInUseError) as exc:
        say(f"error: {exc}", sys.stderr)
        return 2
    except ModelCallError as exc:
        say(f"error: {exc}", sys.stderr)
        say(f"resume later with: python -m harness.resume {args.run_dir}", sys.stderr)
        return 1
    except DiskFullError as exc:
        say(f"error: {exc}", sys.stderr)
        return 1
    except KeyboardInterrupt:
        say(f"interrupted; resume with: python -m harness.resume {args.run_dir}", sys.stderr)
        return 130
    return report(result)


if __name__ == "__main__":
    sys.exit(main())

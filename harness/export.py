"""python -m harness.export <run_dir> [--as md|txt|json] [--out FILE] — a run's report.

Prints the report of any format's run (``harness.cli.export``) to stdout, or
writes it to ``--out``. The run folder is only read: a path inside it is
refused unless ``--force-into-run`` is given. A crashed run exports what it
holds, with a line saying it is incomplete.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.export import RENDERERS, export_run


def error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def first_line(exc: Exception) -> str:
    """The gist of an error whose text may run to many lines (pydantic's)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.export", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--as", dest="style", choices=list(RENDERERS), default="md", help="report format")
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--force-into-run", action="store_true", help="allow --out inside the run folder")
    args = parser.parse_args(argv)
    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        return error(f"{run_dir}: no such folder")
    if not (run_dir / "manifest.json").is_file():
        return error(f"{run_dir}: not a run folder (no manifest.json)")
    if (
        args.out is not None
        and not args.force_into_run
        and args.out.resolve().is_relative_to(run_dir.resolve())
    ):
        return error(f"{args.out}: inside the run folder {run_dir}; pass --force-into-run to write there")
    try:
        text = export_run(run_dir, args.style)
    except (OSError, ValueError) as exc:  # an unreadable manifest or config; ConfigError is a ValueError
        return error(f"{run_dir}: {first_line(exc)}")
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        return error(f"{args.out}: {exc.strerror or first_line(exc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

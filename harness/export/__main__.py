"""python -m harness.export <run_dir | sweep_dir> [--as STYLE] [--out FILE] — a run's report or transcript.

Prints the report of any format's run (``harness.export.styles``) to stdout, or
writes it to ``--out``. ``--as`` picks the style: a report (``md``, ``txt``,
``json``) or a transcript view (``str``, ``str-all-except-first``, ``dict``,
``list``, ``final``; each is defined in ``harness.export.views``). In short:
``str`` is the ``Name: message`` transcript, opening with the motion as a
``Topic:`` message; ``str-all-except-first`` is ``str`` without that opening
message; ``list`` is a JSON array of role/content messages; ``dict`` the same
messages with their round, seat and kind in one JSON object; ``final`` the
last synthesis only (a run with none is an error, exit 2). A transcript view
of a run that did not complete says so in a ``warning:`` line on stderr.

Given a sweep folder (one holding ``sweep.json``), ``--as final`` prints
every cell's final synthesis in input order (``topic.index``, then cell
name), each after a ``Topic: ...`` line; a cell with none gets a note in its
place and the exit status is 1. No other style reads a sweep.

The run folder is only read: a path inside it is refused unless
``--force-into-run`` is given. A crashed run exports what it holds, with a
line saying it is incomplete; a log line in the middle that does not parse,
or an unreadable ``manifest.json`` or ``config.yaml``, is refused in one line
naming the file (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.errors import BAD_INPUT, FAILED
from harness.export.styles import STYLES, UnreadableLog, export_noted, export_sweep
from harness.store.reader import check_run_files
from harness.store.rundir import RunFolderError

SWEEP_INDEX = "sweep.json"


def error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return BAD_INPUT


def first_line(exc: Exception) -> str:
    """The gist of an error whose text may run to many lines (pydantic's)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def render(folder: Path, style: str) -> tuple[str, int]:
    """The text to print and the exit status; raises what the reader raises."""
    if (folder / "manifest.json").is_file():
        text, incomplete = export_noted(folder, style)
        if incomplete:  # on stderr: stdout is the transcript a script reads
            print(f"warning: {folder}: {incomplete}", file=sys.stderr)
        return text, 0
    if style != "final":
        raise ValueError(f"a sweep folder exports only --as final, not --as {style}")
    text, missing = export_sweep(folder)
    for name in missing:
        print(f"error: {folder / name}: no final synthesis", file=sys.stderr)
    return text, FAILED if missing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.export", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="a run folder, or a sweep folder (with --as final)")
    parser.add_argument("--as", dest="style", choices=STYLES, default="md", help="report or transcript style")
    parser.add_argument("--out", type=Path, help="write the report here instead of stdout")
    parser.add_argument("--force-into-run", action="store_true", help="allow --out inside the run folder")
    args = parser.parse_args(argv)
    run_dir: Path = args.run_dir
    if not run_dir.is_dir():
        return error(f"{run_dir}: no such folder")
    if not (run_dir / "manifest.json").is_file() and not (run_dir / SWEEP_INDEX).is_file():
        return error(f"{run_dir}: not a run folder (no manifest.json) nor a sweep folder (no {SWEEP_INDEX})")
    if (
        args.out is not None
        and not args.force_into_run
        and args.out.resolve().is_relative_to(run_dir.resolve())
    ):
        return error(f"{args.out}: inside the run folder {run_dir}; pass --force-into-run to write there")
    try:
        if (run_dir / "manifest.json").is_file():
            check_run_files(run_dir, ("manifest.json", "config.yaml"))  # the files the export reads whole
        text, code = render(run_dir, args.style)
    except (RunFolderError, UnreadableLog) as exc:  # one line naming the file already
        return error(str(exc))
    except (OSError, ValueError) as exc:  # no synthesis, a bad style for a sweep (ConfigError too)
        return error(f"{run_dir}: {first_line(exc)}")
    if args.out is None:
        sys.stdout.write(text)
        return code
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        return error(f"{args.out}: {exc.strerror or first_line(exc)}")
    return code


if __name__ == "__main__":
    sys.exit(main())

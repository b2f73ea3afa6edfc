"""python -m harness.view <runs_root | run_dir> [--port N] [--static OUT] [--stall-s N] — look at runs.

Serves a read-only viewer on 127.0.0.1 (the address is printed), or with
``--static OUT`` writes the same pages as self-contained HTML files. It
never writes into a run folder (a search updates ``<root>/_store.sqlite``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.errors import BAD_INPUT, exit_code
from harness.view.server import serve
from harness.view.static import export_static
from harness.view.watch import STALL_S


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.view", description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="a runs root (sweeps included) or one run folder")
    parser.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument(
        "--static", type=Path, metavar="OUT", help="write the pages as HTML files here instead"
    )
    parser.add_argument(
        "--stall-s",
        type=float,
        default=STALL_S,
        metavar="N",
        help=f"mark a running sweep cell stalled after N seconds with nothing written (default {STALL_S:g})",
    )
    args = parser.parse_args(argv)
    if args.stall_s <= 0:
        print(f"error: --stall-s: seconds above 0, got {args.stall_s:g}", file=sys.stderr)
        return BAD_INPUT
    if not args.root.is_dir():
        print(f"error: {args.root}: no such folder", file=sys.stderr)
        return BAD_INPUT
    if args.static is not None:
        try:
            files = export_static(args.root, args.static)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exit_code(exc)
        print(f"wrote {len(files)} pages to {args.static}")
        return 0
    try:
        serve(args.root, args.port, lambda line: print(line, flush=True), args.stall_s)
    except OSError as exc:
        print(f"error: port {args.port}: {exc.strerror or exc}", file=sys.stderr)
        return exit_code(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""python -m harness.store <runs_root> [--db PATH] [--rebuild] — build or
update the SQL store of every run under a root (``harness.store.sql``).

Prints one summary line, then the store's path as the last line; a run that
could not be read is named on stderr. Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from harness.store.sql import DEFAULT_DB_NAME, StoreError, build_store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.store", description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a folder of run folders (searched recursively)")
    parser.add_argument("--db", type=Path, help=f"the SQLite file (default: <root>/{DEFAULT_DB_NAME})")
    parser.add_argument("--rebuild", action="store_true", help="recreate the store from scratch")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        print(f"error: {args.root} is not a folder", file=sys.stderr)
        return 2
    try:
        report = build_store(args.root, args.db, rebuild=args.rebuild)
    except (StoreError, sqlite3.DatabaseError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for run_id, why in report.failed.items():
        print(f"warning: {run_id}: not indexed ({why})", file=sys.stderr)
    print(report.summary())
    print(report.db)
    return 0


if __name__ == "__main__":
    sys.exit(main())

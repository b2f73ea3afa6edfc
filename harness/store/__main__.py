"""python -m harness.store <runs_root> [--db PATH] [--rebuild] — build or
update the SQL store of every run under a root (``harness.store.sql``).

Prints one summary line, then the store's path as the last line; a run that
could not be read is named on stderr. Exit 2 on bad input.

python -m harness.store search "<query>" [--root DIR] [--kind KIND] — update
the store, then print the passages matching the query (``harness.store.fts``):
one line each with run, seat, round, kind and a snippet, the matches marked.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from harness.store.fts import KINDS, Hit, SearchError, search
from harness.store.sql import DEFAULT_DB_NAME, StoreError, StoreReport, build_store

DEFAULT_ROOT = Path("research_runs")  # conf/config.yaml's runs_root
BOLD = ("\x1b[1m", "\x1b[0m")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["search"]:  # a runs root named "search" is passed as ./search
        return search_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m harness.store", description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="a folder of run folders (searched recursively)")
    parser.add_argument("--db", type=Path, help=f"the SQLite file (default: <root>/{DEFAULT_DB_NAME})")
    parser.add_argument("--rebuild", action="store_true", help="recreate the store from scratch")
    parser.epilog = 'python -m harness.store search "<query>" --help: search every transcript'
    args = parser.parse_args(argv)
    report = update(args.root, args.db, args.rebuild)
    if report is None:
        return 2
    print(report.summary())
    print(report.db)
    return 0


def update(root: Path, db: Path | None, rebuild: bool = False) -> StoreReport | None:
    """Build or update the store; its report, or None after a one-line error on stderr."""
    if not root.is_dir():
        print(f"error: {root} is not a folder", file=sys.stderr)
        return None
    try:
        report = build_store(root, db, rebuild=rebuild)
    except (StoreError, sqlite3.DatabaseError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    for run_id, why in report.failed.items():
        print(f"warning: {run_id}: not indexed ({why})", file=sys.stderr)
    return report


def search_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.store search",
        description="Search the turns, drafts, critiques and personas of every run under a root.",
        epilog='FTS5 syntax: "as an AI" (a phrase), persona* (a prefix), AND / OR / NOT, NEAR(a b, 5).',
    )
    parser.add_argument("query", help="an FTS5 query; quote a phrase inside the shell's quotes")
    parser.add_argument(
        "--root", type=Path, default=DEFAULT_ROOT, help="a folder of runs (default: %(default)s)"
    )
    parser.add_argument("--db", type=Path, help=f"the SQLite file (default: <root>/{DEFAULT_DB_NAME})")
    parser.add_argument("--kind", choices=KINDS, help="only this kind of text")
    parser.add_argument("--limit", type=int, default=20, help="at most this many hits (default: %(default)s)")
    args = parser.parse_args(argv)
    report = update(args.root, args.db)
    if report is None:
        return 2
    marks = BOLD if sys.stdout.isatty() else ("**", "**")
    try:
        found = search(report.db, args.query, kind=args.kind, limit=args.limit, marks=marks)
    except (SearchError, sqlite3.DatabaseError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for hit in found.hits:
        print(hit_line(hit))
    shown = f"first {len(found.hits)} of " if found.total > len(found.hits) else ""
    print(f"{shown}{found.total} hit{'' if found.total == 1 else 's'} in {report.db}", file=sys.stderr)
    return 0


def hit_line(hit: Hit) -> str:
    """run  seat  round  kind  snippet, on one line."""
    snippet = " ".join(hit.snippet.split())
    return f"{hit.run_id}  {hit.who}  round {hit.round}  {hit.kind}  {snippet}"


if __name__ == "__main__":
    sys.exit(main())

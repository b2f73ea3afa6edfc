"""``python -m harness.search serve|index|query``: the MCP server, and two
commands for people: build an index ahead of a sweep, try a query.

Errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from harness.search.collections import CollectionError, load_collection


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.search", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the MCP server over stdio")
    serve.add_argument("--collection", default="kjv", help="default collection: kjv or a folder")
    serve.add_argument("--tag", help=argparse.SUPPRESS)  # lets a SearchSession find its server's pid
    index = commands.add_parser("index", help="build (or load) and cache a collection's index")
    index.add_argument("collection", help="kjv or a folder of .txt, .md, .jsonl files")
    index.add_argument("--rebuild", action="store_true", help="drop the cached index first")
    query = commands.add_parser("query", help="print the best passages for a query")
    query.add_argument("collection", help="kjv or a folder of .txt, .md, .jsonl files")
    query.add_argument("query")
    query.add_argument("-k", type=int, default=5, help="how many passages (default 5)")
    for command in (serve, index, query):
        command.add_argument(
            "--cache-dir", type=Path, help="index cache (default $DRIFT_HARNESS_CACHE/search)"
        )
    return parser


def _index(args: argparse.Namespace) -> None:
    from harness.search.index import cache_key, default_cache_dir

    collection = load_collection(args.collection, args.cache_dir)
    folder = (args.cache_dir or default_cache_dir()) / cache_key(collection.name, collection.sha)
    if args.rebuild:
        shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    _ = collection.index
    verb = "loaded from cache" if collection.index_origin == "cache" else "built"
    print(
        f"{collection.name}: {len(collection):,} passages; index {verb} in "
        f"{time.perf_counter() - start:.2f} s; {folder}"
    )


def _query(args: argparse.Namespace) -> None:
    hits = load_collection(args.collection, args.cache_dir).search(args.query, args.k)
    if not hits:
        print("no passage matches")
    for rank, hit in enumerate(hits, 1):
        print(f"{rank}. {hit.id}  score {hit.score:.3f}  ({hit.source})")
        print(f"   {' '.join(hit.text.split())}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            from harness.search.server import serve

            serve(args.collection, args.cache_dir)
        elif args.command == "index":
            _index(args)
        else:
            _query(args)
    except (CollectionError, ValueError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

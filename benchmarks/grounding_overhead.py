"""Per-turn overhead of grounding, on the zero-latency scripted model.

Runs the same grounded debate three ways, side by side in one process, and
times each turn (wall time of the run divided by its published turns):

- ``no search``: ``format.max_searches=0``, the arguer writes at once;
- ``local``: searches against the in-process BM25 index;
- ``mcp``: searches through the MCP server over stdio, one session per run
  (its start, about 3.6 s on 2 cores, is paid once per run and printed apart).

The model costs nothing here, so what is left is the harness's own work: the
extra search-step calls' prompts and records, the searches, the citation
check. Each figure is the median of ``--repeats`` runs.

    .venv/bin/python benchmarks/grounding_overhead.py [--rounds 10] [--repeats 3]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import run_debate
from harness.search import load_collection

CONF = Path(__file__).resolve().parents[1] / "conf"
WAYS = {
    "no search": ["format.max_searches=0", "search.transport=local"],
    "local": ["search.transport=local"],
    "mcp": ["search.transport=mcp"],
}


def one_run(extra: list[str], rounds: int, root: Path, cache: Path) -> tuple[float, int]:
    """(wall seconds, published turns) of one run."""
    overrides = [
        "model=scripted",
        "format=grounded",
        "progress=false",
        f"rounds={rounds}",
        f"runs_root={root}",
        f"search.cache_dir={cache}",
        "memory.log_prompts=true",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    raw: Any = OmegaConf.to_container(cfg, resolve=True)
    started = time.perf_counter()
    result = run_debate(resolve(cfg), raw)
    return time.perf_counter() - started, result.manifest.counts.published


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        load_collection("kjv", cache_dir=cache)  # the index is built once, before any timing
        per_turn: dict[str, float] = {}
        for name, extra in WAYS.items():
            walls = []
            for i in range(args.repeats):
                wall, turns = one_run(extra, args.rounds, Path(tmp) / f"{name}-{i}", cache)
                walls.append(wall / max(turns, 1))
            per_turn[name] = statistics.median(walls)
        base = per_turn["no search"]
        print(f"grounded debate, {args.rounds} rounds ({2 * args.rounds} turns), zero-latency scripted model")
        print(f"{'way':<10} {'ms/turn':>9} {'÷ no search':>12}")
        for name, value in per_turn.items():
            print(f"{name:<10} {1000 * value:>9.1f} {value / base:>12.2f}")
        print(
            f"grounding costs {1000 * (per_turn['local'] - base):.1f} ms/turn in-process, "
            f"{1000 * (per_turn['mcp'] - base):.1f} ms/turn over MCP (server start included, once per run)"
        )


if __name__ == "__main__":
    main()

"""Gemma 3 270M (a base model), one drift round per seed, prompted as a chat and as a document.

For each prompt style (``model.prompt_style``: chat, the model's chat
template; completion, the messages as a document with a worked example
reply, harness.models.completion_frame) and each seed, runs
``model=gemma3_270m rounds=1 seed=S`` in-process and prints which teams
published, the model calls, the schema failures, and how many replies hold a
run of ``NEAR`` words of a worked example (near copies, which the echo check's
8 words let pass); then each style's totals.

    .venv/bin/python benchmarks/gemma_base_prompt.py [--seeds 0 1 ...] [--styles completion] [overrides]

One run at a time (a round takes 30-90 s on a free core). Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from pydantic import BaseModel

from harness.config import resolve
from harness.engine import run_debate
from harness.formats import FORMATS
from harness.models.echo import example_texts, ngrams, words
from harness.models.structured import json_schema
from harness.store.records import parse_record

CONF = Path(__file__).resolve().parents[1] / "conf"
TEAMS = ("pros", "cons")
NEAR = 4  # words in a row shared with a worked example


@dataclass
class Round:
    seed: int
    published: set[str]
    calls: int
    failures: int
    seconds: float
    replies: int
    near: int  # replies holding a run of NEAR words of a worked example


def one_round(style: str, seed: int, runs_root: str, extra: list[str]) -> Round:
    overrides = [
        "model=gemma3_270m",
        f"model.prompt_style={style}",
        "rounds=1",
        f"seed={seed}",
        f"runs_root={runs_root}",
        "progress=false",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        composed = compose("config", overrides=overrides)
    raw: Any = OmegaConf.to_container(composed, resolve=True)
    started = time.perf_counter()
    result = run_debate(resolve(composed), raw)
    seconds = time.perf_counter() - started
    lines = (result.run_dir / "shared_memory.jsonl").read_text().splitlines()
    published = {parse_record(line).team for line in lines if line.strip()}
    counts = result.manifest.counts
    replies, near = near_copies(result.run_dir)
    return Round(seed, published, counts.model_calls, counts.schema_failures, seconds, replies, near)


def example_grams(fmt: str) -> set[str]:
    """The NEAR-word runs of the worked examples of every reply of ``fmt``."""
    grams: set[str] = set()
    for name in FORMATS[fmt].prompt_modules:
        for obj in vars(importlib.import_module(name)).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__name__.endswith("Output"):
                grams |= {g for text in example_texts(json_schema(obj)) for g in ngrams(words(text), NEAR)}
    return grams


def near_copies(run_dir: Path, fmt: str = "drift") -> tuple[int, int]:
    """Every reply the run kept (all attempts), and those sharing a NEAR-word run with an example."""
    grams = example_grams(fmt)
    texts = [json.loads(line)["text"] for path in run_dir.glob("*/replies.jsonl") for line in path.open()]
    return len(texts), sum(bool(ngrams(words(text), NEAR) & grams) for text in texts)


def report(style: str, rounds: list[Round]) -> None:
    both = sum(1 for r in rounds if set(TEAMS) <= r.published)
    calls = sum(r.calls for r in rounds)
    failures = sum(r.failures for r in rounds)
    print(
        f"{style:<10} total: both teams published on {both}/{len(rounds)} seeds, "
        f"{failures}/{calls} calls failed the schema ({failures / max(calls, 1):.0%}), "
        f"{sum(r.near for r in rounds)}/{sum(r.replies for r in rounds)} replies near-copied an example, "
        f"{sum(r.seconds for r in rounds):.0f} s"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--styles", nargs="+", choices=("chat", "completion"), default=["chat", "completion"])
    parser.add_argument("--runs-root", help="keep the run folders here (default: a temporary folder)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. model.n_threads=1")
    args = parser.parse_args(argv)
    print(
        f"{'style':<10} {'seed':>4}  {'published':<10} {'calls':>5} {'schema failures':>15} {'near':>9} {'s':>5}"
    )
    results: dict[str, list[Round]] = {}
    with tempfile.TemporaryDirectory(prefix="gemma-bench-") as tmp:
        tmp = args.runs_root or tmp
        for style in args.styles:
            for seed in args.seeds:
                r = one_round(style, seed, tmp, args.overrides)
                results.setdefault(style, []).append(r)
                teams = ",".join(t for t in TEAMS if t in r.published) or "-"
                near = f"{r.near}/{r.replies}"
                print(
                    f"{style:<10} {seed:>4}  {teams:<10} {r.calls:>5} {r.failures:>15} {near:>9} {r.seconds:>5.0f}"
                )
    for style, rounds in results.items():
        report(style, rounds)


if __name__ == "__main__":
    main()

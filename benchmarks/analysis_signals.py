"""Signals per second on synthetic 200-word turns (default 1,000).

Builds synthetic runs (``--rounds`` rounds x 2 teams each) through the
harness record types, then times each stage side by side: the single-text
signals alone, the full ``compute_signals`` with the hash embedder, and, on
the first ``--minilm-turns`` turns only (all-MiniLM-L6-v2 runs at a few
200-word texts per second on a 2-core CPU):

- the MiniLM embeddings alone, one encode call per run against one call for all;
- the full signals the old way (one encode call per run, no embedding cache)
  against ``compute_signals`` (every run's texts embedded together first);
- ``compute_signals`` with the bfloat16 spec, and how far its pairwise
  cosines are from float32's (``--quick`` skips this on a CPU without AMX or
  AVX512-BF16, where torch emulates bfloat16 several times slower).

The model loads (and runs once) before any timing. Prints measured figures;
asserts nothing. ``--quick`` is a short version (under a minute on 2 cores).

    .venv/bin/python benchmarks/analysis_signals.py [--quick] [--turns 1000] [--minilm-turns 160]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from analysis import (
    DEFAULT_EMBEDDER,
    Tables,
    compute_signals,
    get_embedder,
    load_runs,
    native_bf16,
    signal_names,
    text_signals,
)
from analysis.signals import run_signals, team_rank

# the run-folder writer is a test fixture, in tests/
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic import write_run  # noqa: E402

# function words, lexicon words and topic words, so every signal has something to count
VOCAB = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "that",
    "is",
    "for",
    "it",
    "as",
    "with",
    "on",
    "by",
    "this",
    "we",
    "you",
    "i",
    "our",
    "they",
    "not",
    "never",
    "always",
    "because",
    "therefore",
    "however",
    "perhaps",
    "clearly",
    "must",
    "may",
    "evidence",
    "benefit",
    "risk",
    "cost",
    "harm",
    "trust",
    "growth",
    "people",
    "work",
    "remote",
    "office",
    "study",
    "data",
    "show",
    "suggest",
    "argue",
    "believe",
    "think",
    "know",
    "policy",
    "society",
]


def synthetic_text(rng: random.Random, words: int = 200) -> str:
    out, sentence = [], []
    for _ in range(words):
        sentence.append(rng.choice(VOCAB))
        if len(sentence) >= rng.randint(8, 20):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    return " ".join([*out, " ".join(sentence) + "."] if sentence else out)


def timed(label: str, n: int, fn) -> float:  # type: ignore[no-untyped-def]
    """Wall seconds; CPU seconds (all threads) too, since a busy machine inflates wall time."""
    start, cpu = time.perf_counter(), time.process_time()
    fn()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        f"{label:<44} {seconds:7.1f} s {n / seconds:7.1f} turns/s   cpu {cpu:6.1f} s {n / cpu:7.1f} turns/cpu-s"
    )
    return seconds


def per_run_signals(tables: Tables, spec: str) -> None:
    """The path before the embedding cache: each run encodes its own texts."""
    model = get_embedder(spec)
    ranks = {row["run_id"]: team_rank(row) for row in tables.runs.to_dict("records")}
    by_run = {n: dict(iter(tables.table(n).groupby("run_id"))) for n in ("turns", "drafts", "personas")}
    for run_id, rank in ranks.items():
        run_signals(*(by_run[n][run_id] for n in ("turns", "drafts", "personas")), rank, model)


def subset(root: Path, n_runs: int) -> Tables:
    tables = load_runs(root, cache=False)
    keep = set(tables.runs.run_id[:n_runs])
    for name in ("runs", "turns", "drafts", "personas", "events"):
        setattr(tables, name, tables.table(name)[tables.table(name).run_id.isin(keep)])
    return tables


def minilm(root: Path, texts: list[str], n_runs: int, rounds: int, bf16: bool) -> None:
    warm = load_runs(
        write_run(root.parent / f"{root.name}-warm" / "run", [(1, "pros", texts[0])]), cache=False
    )
    sample = subset(root, n_runs)
    m = len(sample.turns)
    texts = texts[:m]
    print(
        f"-- all-MiniLM-L6-v2 on the first {m} turns ({n_runs} runs of {2 * rounds} turns), "
        f"torch threads {torch.get_num_threads()}:"
    )
    specs = [DEFAULT_EMBEDDER, *([DEFAULT_EMBEDDER + "+bf16"] if bf16 else [])]
    model = get_embedder()
    for spec in specs:  # load, warm up, embed the IPIP items
        per_run_signals(warm, spec), compute_signals(warm, embedder=spec, progress=False)
    per_run = [texts[i : i + 2 * rounds] for i in range(0, m, 2 * rounds)]
    timed("MiniLM embeddings, one encode call per run", m, lambda: [model.encode(c) for c in per_run])
    timed("MiniLM embeddings, one call for all", m, lambda: model.encode(texts))
    t_old = timed("signals, per-run encode (before)", m, lambda: per_run_signals(sample, DEFAULT_EMBEDDER))
    t_new = timed("compute_signals, MiniLM (now)", m, lambda: compute_signals(sample, progress=False))
    print(f"now / before: {t_old / t_new:.2f}x")
    if not bf16:
        print(
            "bf16 not measured: this CPU has no AMX or AVX512-BF16, so torch emulates it "
            "(0.21x float32 measured on an AVX2 EPYC); the full run measures it anyway"
        )
        return
    t_bf16 = timed(
        "compute_signals, MiniLM+bf16",
        m,
        lambda: compute_signals(sample, embedder=DEFAULT_EMBEDDER + "+bf16", progress=False),
    )
    a, b = model.encode(texts), get_embedder(DEFAULT_EMBEDDER + "+bf16").encode(texts)
    upper = np.triu_indices(m, 1)
    err = np.abs((a @ a.T) - (b @ b.T))[upper]
    print(
        f"bf16 / now: {t_new / t_bf16:.2f}x; bf16 pairwise cosine error "
        f"mean {err.mean():.5f}, max {err.max():.5f} (float32 cosines: sd {(a @ a.T)[upper].std():.4f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=10, help="rounds per synthetic run (2 turns each)")
    parser.add_argument("--minilm-turns", type=int, default=160, help="MiniLM sample size (0: all turns)")
    parser.add_argument("--quick", action="store_true", help="400 turns, 40 with MiniLM")
    args = parser.parse_args()
    if args.quick:
        args.turns, args.minilm_turns = 400, 40
    rng = random.Random(0)
    rounds = args.rounds
    n_runs = max(1, args.turns // (2 * rounds))
    root = Path(tempfile.mkdtemp(prefix="bench-signals-"))
    texts = []
    for r in range(n_runs):
        turns = [(k, t, synthetic_text(rng)) for k in range(1, rounds + 1) for t in ("pros", "cons")]
        texts += [x[2] for x in turns]
        write_run(root / f"run{r:04d}", turns)
    n = len(texts)
    per_turn = len(
        [
            s
            for s in signal_names()
            if not s.startswith(("critique", "rejection", "loop", "schema", "tokens", "latency"))
        ]
    )
    print(
        f"{n} turns of 200 words in {n_runs} runs; {per_turn} text signals per turn (plus 6 process signals)"
    )
    tables = load_runs(root, cache=False)
    timed("single-text signals (lexicons, structure)", n, lambda: [text_signals(t) for t in texts])
    timed(
        "compute_signals, hash embedder", n, lambda: compute_signals(tables, embedder="hash", progress=False)
    )
    # quick skips bf16 where it is emulated: slow, and no researcher should pick it there
    bf16 = not (args.quick and native_bf16() is False)
    minilm(root, texts, max(1, (args.minilm_turns or n) // (2 * rounds)), rounds, bf16)
    print("(each turn here also has one draft with the same text: embeddings are shared, relations are not)")


if __name__ == "__main__":
    main()

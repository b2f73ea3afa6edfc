"""Signals per second on synthetic 200-word turns (default 10,000).

Builds synthetic runs (50 rounds x 2 teams each) through the harness record
types, then times each stage side by side: the single-text signals alone,
the full ``compute_signals`` with the hash embedder, and, on the first
``--minilm-turns`` turns only (all-MiniLM-L6-v2 runs at a few 200-word texts
per second on a 2-core CPU), the MiniLM embeddings alone and the full
``compute_signals`` with MiniLM. Prints measured figures; asserts nothing.

    .venv/bin/python benchmarks/analysis_signals.py [--turns 10000] [--minilm-turns 400]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from analysis import compute_signals, get_embedder, load_runs, signal_names, text_signals
from analysis.synthetic import write_run

# function words, lexicon words and topic words, so every signal has something to count
VOCAB = [
    "the", "a", "of", "to", "and", "in", "that", "is", "for", "it", "as", "with", "on", "by", "this",
    "we", "you", "i", "our", "they", "not", "never", "always", "because", "therefore", "however",
    "perhaps", "clearly", "must", "may", "evidence", "benefit", "risk", "cost", "harm", "trust",
    "growth", "people", "work", "remote", "office", "study", "data", "show", "suggest", "argue",
    "believe", "think", "know", "policy", "society",
]  # fmt: skip


def synthetic_text(rng: random.Random, words: int = 200) -> str:
    out, sentence = [], []
    for _ in range(words):
        sentence.append(rng.choice(VOCAB))
        if len(sentence) >= rng.randint(8, 20):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    return " ".join([*out, " ".join(sentence) + "."] if sentence else out)


def timed(label: str, n: int, fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    print(f"{label:<44} {seconds:8.1f} s  {n / seconds:9.1f} turns/s")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--minilm-turns", type=int, default=400, help="MiniLM sample size (0: all turns)")
    args = parser.parse_args()
    rng = random.Random(0)
    rounds = 50
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
    t_hash = timed(
        "compute_signals, hash embedder", n, lambda: compute_signals(tables, embedder="hash", progress=False)
    )
    sample_runs = max(1, (args.minilm_turns or n) // (2 * rounds))
    sample = load_runs(root, cache=False)
    keep = set(sample.runs.run_id[:sample_runs])
    for name in ("runs", "turns", "drafts", "personas", "events"):
        setattr(sample, name, sample.table(name)[sample.table(name).run_id.isin(keep)])
    m = len(sample.turns)
    print(f"-- all-MiniLM-L6-v2 on the first {m} turns ({sample_runs} runs):")
    model = get_embedder()
    model.encode(texts[:2])  # load and warm up outside the timing
    timed("MiniLM embeddings only", m, lambda: model.encode(texts[:m]))
    t_full = timed("compute_signals, all-MiniLM-L6-v2", m, lambda: compute_signals(sample, progress=False))
    print(
        f"signal values per second: {m * per_turn / t_full:,.0f} (MiniLM), {n * per_turn / t_hash:,.0f} (hash)"
    )
    print("(each turn here also has one draft with the same text: embeddings are shared, relations are not)")


if __name__ == "__main__":
    main()

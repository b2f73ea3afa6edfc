"""llama.cpp threads for SmolLM2, by measurement: 1 against 2 threads, on an
idle machine and beside a concurrent worker (a second process decoding the
same model with 1 thread, as a 2-worker sweep would run it).

Each cell decodes the same prompt under the same JSON-schema grammar, seed
and temperature, ``--tokens`` tokens, ``--repeats`` times, and prints the
median tokens/s; the load average is printed beside it. The figures behind
the default (``harness.models.local.default_threads``) are in docs/threads.md.

    .venv/bin/python benchmarks/llama_threads.py [--tokens 96] [--repeats 3]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import harness.models.local as local
from harness.agents import ThinkingOutput

PROMPT = [
    {"role": "system", "content": "You argue FOR the motion. Reply with one JSON object only."},
    {
        "role": "user",
        "content": "Motion: Remote work is better for society than office work. Write scratchpad and draft.",
    },
]


def decode(threads: int, tokens: int) -> float:
    """Tokens/s of one grammar-constrained decode (prompt evaluation included)."""
    from llama_cpp import LlamaGrammar

    llama = local.load_llama(local.locate("smollm2"), 2048, threads, 0)
    grammar = LlamaGrammar.from_json_schema(
        __import__("json").dumps(ThinkingOutput.model_json_schema()), verbose=False
    )
    llama.reset()
    started = time.perf_counter()
    out = llama.create_chat_completion(
        messages=PROMPT, grammar=grammar, max_tokens=tokens, temperature=0.0, seed=1
    )
    return out["usage"]["completion_tokens"] / (time.perf_counter() - started)


def load_worker() -> subprocess.Popen[bytes]:
    """A second process decoding with 1 thread until killed: a concurrent sweep's worker."""
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); import llama_threads as b\nwhile True: b.decode(1, 64)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    decode(1, 8)  # load the weights once before timing
    print(
        f"SmolLM2, {args.tokens} tokens under a JSON-schema grammar, median of {args.repeats}; cores: {os.cpu_count()}"
    )
    print(f"{'setting':<34} {'tok/s':>7} {'load avg (1 min)':>17}")
    for busy in (False, True):
        worker = load_worker() if busy else None
        try:
            if worker is not None:
                time.sleep(8)  # let the worker load its weights and start decoding
            for threads in (1, 2):
                rates = [decode(threads, args.tokens) for _ in range(args.repeats)]
                label = f"{threads} thread(s), {'beside a 1-thread worker' if busy else 'idle'}"
                print(f"{label:<34} {statistics.median(rates):>7.1f} {os.getloadavg()[0]:>17.2f}")
        finally:
            if worker is not None:
                worker.kill()
                worker.wait()


if __name__ == "__main__":
    main()

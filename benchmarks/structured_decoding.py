"""Structured decoding on llama.cpp: full grammar masking vs lazy grammar + prefix reuse.

In one process, one after the other, on one loaded model:

a. Raw decode tokens/s on one persona prompt: unconstrained (no grammar),
   ``model.grammar_mode=full`` (llama-cpp-python masks the whole vocabulary
   each token) and ``lazy`` (the sampled token checked, masking only on
   rejection). Decode time is wall time minus llama.cpp's prompt-eval time;
   the modes are interleaved ``--reps`` times so load drifts hit all alike.
b. A drift debate (``harness.run`` defaults, tmp runs_root) on today's path
   (full, no prefix cache) and with both items on (lazy, ``model.prefix_cache``),
   at temperature 0 and at the default 0.7 (``--quick``: 0 only, where they must
   match): wall time, output tokens/s, and
   whether the transcripts match (shared memory and every team log's texts).

    .venv/bin/python benchmarks/structured_decoding.py            # 1 round (about 2 minutes idle)
    .venv/bin/python benchmarks/structured_decoding.py --full     # 3 rounds, the default experiment
    .venv/bin/python benchmarks/structured_decoding.py --model gemma3_270m --temps 0

Prints figures and the load average; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import harness.models.local as local
from harness.agents import PersonaOutput
from harness.config import validate
from harness.engine import run_debate
from harness.models.base import ModelRequest
from harness.models.structured import fit_schema

CONF = Path(__file__).resolve().parents[1] / "conf"
TODAY = ["model.grammar_mode=full", "model.prefix_cache=false"]
BOTH = ["model.grammar_mode=lazy", "model.prefix_cache=true"]
PROMPT = [
    {"role": "system", "content": "You shape the identity of the PROS debate team. "
     "Reply with one JSON object only, no prose around it."},
    {"role": "user", "content": "Motion: Remote work is better for society than office work.\n"
     "Your team argues FOR the motion. Round 1.\nCurrent persona: A careful debater who argues FOR "
     "the motion with concrete reasons.\nRecent debate:\n(no arguments published yet)\n"
     "Decide whether to keep the current persona or evolve it into a new one.\nWrite JSON with:\n"
     '- decision: "keep" or "evolve"\n- persona: one sentence saying who your team is and how it '
     "argues\n- rationale: one sentence explaining your decision"},
]  # fmt: skip


# what differs between two identical runs: clock times and the hash chain over them
VOLATILE = {"ts", "prev_hash", "latency_s"}


def transcript(run_dir: Path) -> list[str]:
    """Every record of shared memory and of each team log (replies and prompts
    included), in file order, without clock times."""
    out = []
    for path in [run_dir / "shared_memory.jsonl", *sorted(run_dir.glob("*/*.jsonl"))]:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            record = {k: v for k, v in record.items() if k not in VOLATILE}
            record["usage"] = {k: v for k, v in record.get("usage", {}).items() if k not in VOLATILE}
            out.append(f"{path.relative_to(run_dir)} {json.dumps(record, sort_keys=True)}")
    return out


def decode_rates(model_spec: str, n_threads: int | None, reps: int, max_tokens: int) -> dict[str, float]:
    """Output tokens per second of decode (prompt eval excluded) for each grammar mode."""
    import llama_cpp.llama_cpp as lib

    schema = fit_schema(PersonaOutput.model_json_schema(), max_tokens)
    models = {
        "unconstrained": (local.LlamaCppModel(model_spec, n_threads=n_threads), None),
        "full": (local.LlamaCppModel(model_spec, n_threads=n_threads), schema),
        "lazy": (local.LlamaCppModel(model_spec, n_threads=n_threads, grammar_mode="lazy"), schema),
    }
    tokens = dict.fromkeys(models, 0)
    seconds = dict.fromkeys(models, 0.0)
    for rep in range(reps):
        for name, (model, fitted) in models.items():
            ctx = model.llama._ctx.ctx
            lib.llama_perf_context_reset(ctx)
            request = ModelRequest(messages=PROMPT, schema=fitted, temperature=0.0,
                                   max_tokens=max_tokens, seed=rep)  # fmt: skip
            out = model.complete(request)
            prompt_s = lib.llama_perf_context(ctx).t_p_eval_ms / 1e3
            tokens[name] += out.output_tokens
            seconds[name] += out.latency_s - prompt_s
    return {name: tokens[name] / seconds[name] for name in models}


def debate(overrides: list[str]) -> tuple[float, int, list[str]]:
    with tempfile.TemporaryDirectory(prefix="structured-bench-") as tmp:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            composed = compose("config", overrides=[*overrides, f"runs_root={tmp}", "progress=false"])
        raw: Any = OmegaConf.to_container(composed, resolve=True)
        started = time.perf_counter()
        result = run_debate(validate(composed), raw)
        wall = time.perf_counter() - started
        return wall, result.manifest.counts.output_tokens, transcript(result.run_dir)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="3 rounds (the default experiment) and 3 reps")
    parser.add_argument(
        "--quick", action="store_true", help="1 round, 1 rep, temperature 0 only (the default is 1 round)"
    )
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--model", default="smollm2", help="model group: smollm2 or gemma3_270m")
    parser.add_argument("--temps", help="debate temperatures, comma separated (default 0,0.7; quick 0)")
    parser.add_argument(
        "--n-threads", type=int, default=None, help="llama.cpp threads (default: the harness's)"
    )
    parser.add_argument("--reps", type=int, default=None, help="decode repetitions per mode")
    parser.add_argument("--skip-decode", action="store_true")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.full else 1)
    reps = args.reps or (3 if args.full else 1 if args.quick else 2)
    temps = args.temps or ("0" if args.quick else "0,0.7")
    spec = {"smollm2": "local:smollm2", "gemma3_270m": "local:gemma3-270m"}[args.model]
    base = [f"model={args.model}", f"rounds={rounds}"]
    if args.n_threads:
        base.append(f"model.n_threads={args.n_threads}")

    print(f"{spec}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, "
          f"llama.cpp threads={args.n_threads or local.default_threads()}")  # fmt: skip
    if not args.skip_decode:
        rates = decode_rates(spec, args.n_threads, reps, 256)
        print(f"a. decode tok/s ({reps} rep(s), persona schema, temperature 0): "
              + ", ".join(f"{k} {v:.1f}" for k, v in rates.items())
              + f"; lazy/full {rates['lazy'] / rates['full']:.2f}x, "
              f"lazy/unconstrained {rates['lazy'] / rates['unconstrained']:.2f}")  # fmt: skip
        (llama,) = {id(m): m for m in local._LOADED.values()}.values()
        stats = llama.lazy_stats
        print(f"   lazy grammar rejections: {stats['rejections']} of {stats['tokens']} tokens")
    for temp in [float(t) for t in temps.split(",")]:
        temp_arg = [f"llm.temperature={temp}"]
        wall_a, out_a, text_a = debate([*base, *temp_arg, *TODAY])
        wall_b, out_b, text_b = debate([*base, *temp_arg, *BOTH])
        print(f"b. debate, {rounds} round(s), temperature {temp}: "
              f"today {wall_a:.1f} s ({out_a / wall_a:.1f} tok/s), "
              f"lazy+prefix {wall_b:.1f} s ({out_b / wall_b:.1f} tok/s), "
              f"speed-up {wall_a / wall_b:.2f}x, transcripts "
              f"{'match' if text_a == text_b else 'differ'} ({len(text_a)} vs {len(text_b)} records), "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    caches = [m.prefix_cache for m in local._LOADED.values()]
    print(f"   prefix cache: {sum(c.hits for c in caches)} hits, {sum(c.misses for c in caches)} misses")


if __name__ == "__main__":
    main()

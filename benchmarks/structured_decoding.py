"""Structured decoding on llama.cpp: full grammar masking vs lazy grammar + prefix reuse.

In one process, one after the other, on one loaded model:

a. Raw decode tokens/s on one persona prompt: unconstrained (no grammar),
   ``model.grammar_mode=full`` (llama-cpp-python masks the whole vocabulary
   each token) and ``lazy`` (the sampled token checked, masking only on
   rejection). Decode time is wall time minus llama.cpp's prompt-eval time;
   the modes are interleaved ``--reps`` times so load drifts hit all alike.
b. A drift debate (``harness.run`` defaults, tmp runs_root) on the former
   defaults (full, no prefix cache) and on today's (lazy, ``model.prefix_cache``),
   at temperature 0 and at the default 0.7 (``--quick``: 0 only, where they must
   match): wall time, output tokens/s, and
   whether the transcripts match (shared memory and every team log's texts).
c. ``--first-run`` instead: ``make run`` as a newcomer meets it, old defaults
   against new. ``python -m harness.run`` in a fresh process each (imports and
   model load included), the default experiment at its temperature 0.7, once per
   ``--seeds`` value, old and new in turn: wall and CPU time (steadier on
   shared cores), their ratios, calls, output tokens and schema failures.

    .venv/bin/python benchmarks/structured_decoding.py            # 1 round (about 2 minutes idle)
    .venv/bin/python benchmarks/structured_decoding.py --full     # 3 rounds, the default experiment
    .venv/bin/python benchmarks/structured_decoding.py --model gemma3_270m --temps 0
    .venv/bin/python benchmarks/structured_decoding.py --first-run --seeds 0,1  # 4 make runs, ~3 min each idle

Prints figures and the load average; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import harness.models.local as local
from harness.agents import PersonaOutput
from harness.config import resolve
from harness.engine import run_debate
from harness.models.base import ModelRequest
from harness.models.structured import fit_schema

CONF = Path(__file__).resolve().parents[1] / "conf"
# the local decoding defaults before issue 27, and since
OLD_DEFAULTS = ["model.grammar_mode=full", "model.prefix_cache=false"]
NEW_DEFAULTS = ["model.grammar_mode=lazy", "model.prefix_cache=true"]
PROMPT = [
    {
        "role": "system",
        "content": "You shape the identity of the PROS debate team. "
        "Reply with one JSON object only, no prose around it.",
    },
    {
        "role": "user",
        "content": "Motion: Remote work is better for society than office work.\n"
        "Your team argues FOR the motion. Round 1.\nCurrent persona: A careful debater who argues FOR "
        "the motion with concrete reasons.\nRecent debate:\n(no arguments published yet)\n"
        "Decide whether to keep the current persona or evolve it into a new one.\nWrite JSON with:\n"
        '- decision: "keep" or "evolve"\n- persona: one sentence saying who your team is and how it '
        "argues\n- rationale: one sentence explaining your decision",
    },
]


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
            request = ModelRequest(
                messages=PROMPT, schema=fitted, temperature=0.0, max_tokens=max_tokens, seed=rep
            )
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
        result = run_debate(resolve(composed), raw)
        wall = time.perf_counter() - started
        return wall, result.manifest.counts.output_tokens, transcript(result.run_dir)


def make_run(overrides: list[str], root: Path) -> dict[str, Any]:
    """``python -m harness.run`` in a fresh process, as ``make run`` starts it:
    wall time and the run's counts (``manifest.json``)."""
    started, cpu = time.perf_counter(), children_cpu()
    argv = [sys.executable, "-m", "harness.run", f"runs_root={root}", "progress=false", *overrides]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu
    if out.returncode:
        raise SystemExit(f"{' '.join(overrides)}: exit {out.returncode}: {out.stderr.strip()[-400:]}")
    (run_dir,) = root.iterdir()
    return {"wall": wall, "cpu": cpu, **json.loads((run_dir / "manifest.json").read_text())["counts"]}


def children_cpu() -> float:
    """CPU seconds of every finished child: on shared cores, steadier than wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def loads() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def first_run(model: str, seeds: list[int], rounds: int | None, n_threads: int | None) -> None:
    """c. Old defaults against new, one fresh process each, in turns (the order
    alternates by seed, so a load drift does not always favour one side)."""
    sides = {"old": OLD_DEFAULTS, "new": []}  # new: no override at all, as make run
    results: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    extra = [f"model={model}", *([f"rounds={rounds}"] if rounds else [])]
    extra += [f"model.n_threads={n_threads}"] if n_threads else []
    with tempfile.TemporaryDirectory(prefix="first-run-bench-") as tmp:
        for i, seed in enumerate(seeds):
            for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
                load = loads()
                got = make_run([*extra, f"seed={seed}", *sides[side]], Path(tmp) / f"{side}-{seed}")
                results[side].append(got)
                modes = " ".join(sides[side]) or "lazy, prefix cache"
                print(
                    f"c. make run, {side} defaults ({modes}), seed {seed}: {got['wall']:.1f} s "
                    f"({got['cpu']:.1f} s CPU), "
                    f"{got['schema_failures']} schema failures, {got['model_calls']} calls, "
                    f"{got['output_tokens']} output tokens ({got['output_tokens'] / got['wall']:.1f} tok/s); "
                    f"load average {load} before, {loads()} after"
                )
    total = {
        key: {side: sum(r[key] for r in runs) for side, runs in results.items()} for key in ("wall", "cpu")
    }
    fails = {side: [r["schema_failures"] for r in runs] for side, runs in results.items()}
    wall, cpu = total["wall"], total["cpu"]
    print(
        f"   old/new wall {wall['old'] / wall['new']:.2f}x ({wall['old']:.1f} s against "
        f"{wall['new']:.1f} s), CPU {cpu['old'] / cpu['new']:.2f}x, over {len(seeds)} seed(s); "
        f"schema failures old {fails['old']}, new {fails['new']}"
    )


def parse(argv: list[str] | None) -> argparse.Namespace:
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
    parser.add_argument(
        "--first-run", action="store_true", help="c. only: make run, old defaults against new"
    )
    parser.add_argument(
        "--seeds", default="0", help="--first-run: one pair of runs per seed, comma separated"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.first_run:
        print(f"{args.model}, load average {loads()} on {os.cpu_count()} cores")
        first_run(args.model, [int(s) for s in args.seeds.split(",")], args.rounds, args.n_threads)
        return
    rounds = args.rounds or (3 if args.full else 1)
    reps = args.reps or (3 if args.full else 1 if args.quick else 2)
    temps = args.temps or ("0" if args.quick else "0,0.7")
    spec = {"smollm2": "local:smollm2", "gemma3_270m": "local:gemma3-270m"}[args.model]
    base = [f"model={args.model}", f"rounds={rounds}"]
    if args.n_threads:
        base.append(f"model.n_threads={args.n_threads}")

    print(
        f"{spec}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores, "
        f"llama.cpp threads={args.n_threads or local.default_threads()}"
    )
    if not args.skip_decode:
        rates = decode_rates(spec, args.n_threads, reps, 256)
        print(
            f"a. decode tok/s ({reps} rep(s), persona schema, temperature 0): "
            + ", ".join(f"{k} {v:.1f}" for k, v in rates.items())
            + f"; lazy/full {rates['lazy'] / rates['full']:.2f}x, "
            f"lazy/unconstrained {rates['lazy'] / rates['unconstrained']:.2f}"
        )
        (llama,) = {id(m): m for m in local._LOADED.values()}.values()
        stats = llama.lazy_stats
        print(f"   lazy grammar rejections: {stats['rejections']} of {stats['tokens']} tokens")
    for temp in [float(t) for t in temps.split(",")]:
        temp_arg = [f"llm.temperature={temp}"]
        wall_a, out_a, text_a = debate([*base, *temp_arg, *OLD_DEFAULTS])
        wall_b, out_b, text_b = debate([*base, *temp_arg, *NEW_DEFAULTS])
        print(
            f"b. debate, {rounds} round(s), temperature {temp}: "
            f"full {wall_a:.1f} s ({out_a / wall_a:.1f} tok/s), "
            f"lazy+prefix {wall_b:.1f} s ({out_b / wall_b:.1f} tok/s), "
            f"speed-up {wall_a / wall_b:.2f}x, transcripts "
            f"{'match' if text_a == text_b else 'differ'} ({len(text_a)} vs {len(text_b)} records), "
            f"load {os.getloadavg()[0]:.1f}"
        )
    caches = [m.prefix_cache for m in local._LOADED.values()]
    print(f"   prefix cache: {sum(c.hits for c in caches)} hits, {sum(c.misses for c in caches)} misses")


if __name__ == "__main__":
    main()

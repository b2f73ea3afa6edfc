"""The default experiment on SmolLM2 (drift, 3 rounds), beside raw llama_cpp.

1. Runs the default config (``model=smollm2``, 3 rounds) in-process and times it.
2. Replays every first-attempt prompt the run logged (``<team>/prompts.jsonl``)
   on the same loaded ``llama_cpp.Llama``, in the same process, with the same
   JSON-schema grammar, temperature, max_tokens and seed the harness used, and
   no harness around it.

Harness tokens/s is output tokens over the run's wall time; "in model" is over
the time spent inside llama.cpp calls only. The difference between the harness
run and the raw replay is what the harness costs (prompt logging, validation,
repairs, memory, the graph); repair calls have no logged prompt of their own,
so the raw side makes only the first attempts.

    .venv/bin/python benchmarks/smollm2_throughput.py [--rounds 3] [--n-threads N] [extra overrides]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from pydantic import BaseModel

import harness.models.local as local
from harness.agents import CritiqueOutput, PersonaOutput, ThinkingOutput, TopicOutput
from harness.config import Resolved, resolve
from harness.engine import run_debate
from harness.runtime.context import call_seed
from harness.schema import Config
from harness.store.records import PromptRecord, parse_record

CONF = Path(__file__).resolve().parents[1] / "conf"
SCHEMAS: dict[str, type[BaseModel]] = {
    "persona": PersonaOutput,
    "thinking": ThinkingOutput,
    "critique": CritiqueOutput,
    "topic": TopicOutput,
}


def logged_prompts(run_dir: Path) -> list[PromptRecord]:
    prompts = []
    for path in sorted(run_dir.glob("*/prompts.jsonl")):
        for line in path.read_text().splitlines():
            record = parse_record(line)
            # failed replies are kept in the same log; they are not prompts
            if isinstance(record, PromptRecord) and record.id.endswith(".prompt"):
                prompts.append(record)
    return sorted(prompts, key=lambda p: p.ts)


def replay(llama: Any, prompts: list[PromptRecord], cfg: Config) -> tuple[int, int, float]:
    """Each logged prompt decoded again on ``llama`` as the harness decoded it:
    output tokens, input tokens and wall seconds."""
    raw_tokens = raw_in = 0
    started = time.perf_counter()
    for p in prompts:
        role = "critic" if p.role == "critique" else (p.team or "topic")
        _, temperature, max_tokens = cfg.role_model(role)
        llama.reset()  # as the harness does: each prompt evaluated from scratch
        out = llama.create_chat_completion(
            messages=p.messages,
            response_format={"type": "json_object", "schema": SCHEMAS[p.role].model_json_schema()},
            temperature=temperature,
            max_tokens=max_tokens,
            seed=call_seed(cfg.seed, p.round, p.team, p.role, p.iteration),
        )
        raw_tokens += out["usage"]["completion_tokens"]
        raw_in += out["usage"]["prompt_tokens"]
    return raw_tokens, raw_in, time.perf_counter() - started


def compose_run(args: argparse.Namespace, runs_root: str) -> tuple[Resolved, Any]:
    """The validated config and its raw form for the run, its folder under ``runs_root``."""
    # full grammar, no prefix cache: the replay decodes that way, so the two compare like for like
    overrides = [
        "model=smollm2",
        "model.grammar_mode=full",
        "model.prefix_cache=false",
        f"rounds={args.rounds}",
        f"runs_root={runs_root}",
        "progress=false",
    ]
    if args.n_threads:
        overrides.append(f"model.n_threads={args.n_threads}")
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        composed = compose("config", overrides=[*overrides, *args.overrides])
    return resolve(composed), OmegaConf.to_container(composed, resolve=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--n-threads", type=int, default=None, help="llama.cpp threads (default: the harness's)"
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides, e.g. llm.max_tokens=128")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="smollm2-bench-") as tmp:
        run, raw_cfg = compose_run(args, tmp)
        cfg = run.cfg
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        result = run_debate(run, raw_cfg)
        wall = time.perf_counter() - started
        counts = result.manifest.counts
        # once per call: a call's usage is also on the events and reply logs that mention it
        in_model = sum(usage.latency_s for usage in counts.usage_by_role.values())

        # the very Llama object the run used (loaded once per process)
        (llama,) = local._LOADED.values()
        prompts = logged_prompts(result.run_dir)
        raw_tokens, raw_in, raw_wall = replay(llama, prompts, cfg)
        load_after = os.getloadavg()[0]

    threads = next(iter(local._LOADED))[2]
    print(
        f"SmolLM2 ({cfg.model.spec}), drift, {args.rounds} rounds, llm.max_tokens={cfg.llm.max_tokens}, "
        f"llama.cpp threads={threads}, load average {load_before:.1f} -> {load_after:.1f} "
        f"on {os.cpu_count()} cores"
    )
    print(
        f"  harness run : {wall:7.1f} s wall, {counts.model_calls:3d} calls, "
        f"{counts.input_tokens:6d} tokens in / {counts.output_tokens:5d} out, "
        f"{counts.output_tokens / wall:5.1f} tok/s (wall), "
        f"{counts.output_tokens / in_model:5.1f} tok/s (in model)"
    )
    print(
        f"  harness time outside the model: {wall - in_model:5.1f} s "
        f"({1e3 * (wall - in_model) / max(counts.model_calls, 1):.0f} ms per call, model load included)"
    )
    print(
        f"  raw llama_cpp: {raw_wall:7.1f} s wall, {len(prompts):3d} calls, "
        f"{raw_in:6d} tokens in / {raw_tokens:5d} out, {raw_tokens / raw_wall:5.1f} tok/s "
        f"(same prompts, grammar, sampling, seeds; first attempts only)"
    )
    print(
        f"  outcome: {result.manifest.status}, rounds {counts.rounds_completed}, approvals "
        f"{counts.approvals}, rejections {counts.rejections}, schema failures {counts.schema_failures}"
    )


if __name__ == "__main__":
    main()

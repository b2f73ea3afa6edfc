"""A 4-analyst panel on a simulated API: the analysts one after another
(``format.fan_out=false``) against asked together (the default).

A ``ProviderSim`` (tests/provider_sim.py: OpenAI's wire format, the scripted
model's words) answers each call after ``--latency`` seconds (0.5), through
the real ``langchain-openai`` client (``model=openai model.spec=openai:sim``
pointed at the simulator). Each mode runs the same panel in this process
(``format.judge=false``, ``--rounds`` rounds), sequential first, then fanned
out, ``--repeats`` times each, alternating, after one uncounted 1-round run
(the first run pays the client's imports and connections). Printed per
mode, medians over the repeats:

- a round's analyst step: from its first analyst prompt to its last
  analyst's notes (the records' own timestamps), median over the rounds;
  the issue's goal is sequential / fanned out >= 3 (4 calls become ~1);
- the whole run's wall time, which also holds the calls that cannot go out
  together (role cards, each round's summary, the synthesis);
- whether the two modes wrote the same transcript.

    .venv/bin/python benchmarks/panel_fanout.py              # 3 rounds, 2 repeats (~60 s)
    .venv/bin/python benchmarks/panel_fanout.py --quick      # 1 round, 1 repeat (~25 s)

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from provider_sim import ProviderSim  # noqa: E402

from harness.config import resolve  # noqa: E402
from harness.engine import run_debate  # noqa: E402
from harness.store.records import PromptRecord, ThinkingRecord, parse_record  # noqa: E402

ANALYSTS = 4
MODES = {"sequential": "format.fan_out=false", "fanned out": "format.fan_out=true"}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_panel(sim: ProviderSim, root: Path, name: str, rounds: int, mode: str) -> Path:
    overrides = [
        "model=openai",
        "model.spec=openai:sim",
        f"model.kwargs.base_url={sim.base_url}",
        "format=panel",
        f"format.analysts={ANALYSTS}",
        "format.judge=false",
        f"rounds={rounds}",
        f"runs_root={root}",
        f"run_name={name}",
        "progress=false",
        MODES[mode],
    ]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    raw: Any = OmegaConf.to_container(cfg, resolve=True)
    return run_debate(resolve(cfg), raw).run_dir


def records(path: Path) -> list[Any]:
    return [parse_record(line) for line in path.read_text().splitlines()]


def analyst_steps(run_dir: Path, rounds: int) -> list[float]:
    """Each round's analyst step, s: first analyst prompt to last analyst notes."""
    seats = [f"analyst_{chr(ord('a') + i)}" for i in range(ANALYSTS)]
    starts: dict[int, list[datetime]] = {}
    ends: dict[int, list[datetime]] = {}
    for seat in seats:
        for r in records(run_dir / seat / "prompts.jsonl"):
            if isinstance(r, PromptRecord):
                starts.setdefault(r.round, []).append(r.ts)
        for r in records(run_dir / seat / "thinking.jsonl"):
            if isinstance(r, ThinkingRecord):
                ends.setdefault(r.round, []).append(r.ts)
    return [(max(ends[n]) - min(starts[n])).total_seconds() for n in range(1, rounds + 1)]


def transcript(run_dir: Path) -> list[tuple[str, str]]:
    return [(r.id, r.text) for r in records(run_dir / "shared_memory.jsonl")]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 round, 1 repeat")
    parser.add_argument("--rounds", type=int, default=3, help="panel rounds per run (3)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per mode (2)")
    parser.add_argument("--latency", type=float, default=0.5, help="simulator seconds per call (0.5)")
    args = parser.parse_args(argv)
    rounds, repeats = (1, 1) if args.quick else (args.rounds, args.repeats)
    # loopback only, and a key of the simulator's: nothing leaves the machine
    for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(proxy, None)
    os.environ.update({"OPENAI_API_KEY": "sk-panel-fanout", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
    print(
        f"{ANALYSTS}-analyst panel, {rounds} round(s), {repeats} repeat(s), latency {args.latency:g} s, "
        f"{os.cpu_count()} cores, load {load()}",
        flush=True,
    )
    steps: dict[str, list[float]] = {m: [] for m in MODES}
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    said: dict[str, list[tuple[str, str]]] = {}
    with ProviderSim(latency_s=args.latency) as sim, tempfile.TemporaryDirectory() as tmp:
        run_panel(sim, Path(tmp), "warm-up", 1, "fanned out")
        for n in range(repeats):
            for mode in MODES:
                began = time.perf_counter()
                run_dir = run_panel(sim, Path(tmp), f"{mode.replace(' ', '-')}-{n}", rounds, mode)
                walls[mode].append(time.perf_counter() - began)
                steps[mode].append(statistics.median(analyst_steps(run_dir, rounds)))
                said[mode] = transcript(run_dir)
    for mode in MODES:
        print(
            f"{mode:>10}: analyst step {statistics.median(steps[mode]):6.2f} s a round, "
            f"run {statistics.median(walls[mode]):6.2f} s"
        )
    step_ratio = statistics.median(steps["sequential"]) / statistics.median(steps["fanned out"])
    wall_ratio = statistics.median(walls["sequential"]) / statistics.median(walls["fanned out"])
    print(f"sequential / fanned out: analyst step {step_ratio:.2f}x (goal >= 3), whole run {wall_ratio:.2f}x")
    same = "yes" if said["sequential"] == said["fanned out"] else "NO"
    print(f"same transcript: {same} ({len(said['sequential'])} statements); load {load()}")


if __name__ == "__main__":
    main()

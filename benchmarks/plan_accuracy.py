"""How close ``harness.plan`` comes to the bill, per format, on the provider simulator.

For each format, a sweep of ``--replicates`` cells (``-m replicates=N``; four
times as many for the formats whose length the model draws: the plan
estimates their mean, and a few cells are one draw of it) on
``model=openai model.spec=openai:sim-model`` priced at $2 / $8 per 1M input /
output tokens (``prices.models``) is planned with ``harness.plan`` (tokens
counted as the simulator counts them, words: ``--count words``), then every
planned cell is run in-process, one after another, against a
``ProviderSim`` (tests/provider_sim.py: OpenAI's wire format through the
real langchain-openai client, the scripted model's words), each format under
its own API key so the simulator bills it apart.

Printed per format: calls, tokens (input + output) and dollars, estimate
against actual (tokens as the simulator billed them, dollars at the same
prices), their ratio, and whether the actual falls inside the plan's
interval; the harness's own ledger against the simulator's bill; the plan's
wall time at ``--call-s`` (the simulator's latency) against the cells'
summed ``wall_s``; and, for scale, what the plan says when it counts ~4
characters a token (its default for a hosted model) instead of words.
Goal: tokens and dollars within +-15% (ratio 0.85-1.15), actual inside the
interval. Nothing is asserted.

    python benchmarks/plan_accuracy.py                  # make bench's short size: 1 cell a format (4 random)
    python benchmarks/plan_accuracy.py --replicates 4   # the figures in docs/costs.md
    python benchmarks/plan_accuracy.py --formats drift,panel
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf, open_dict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from provider_sim import ProviderSim  # noqa: E402

from harness.config import resolve  # noqa: E402
from harness.engine import run_debate  # noqa: E402
from harness.plan import build_plan, parse  # noqa: E402
from harness.plan.cells import PlannedCell  # noqa: E402
from harness.plan.cli import Options  # noqa: E402
from harness.plan.totals import Plan  # noqa: E402
from harness.store.reader import ledger  # noqa: E402

PRICE_IN, PRICE_OUT = 2.0, 8.0  # dollars per 1M tokens
PRICES = f"prices.models={{openai\\:sim-model:{{input:{PRICE_IN},output:{PRICE_OUT}}}}}"
# each format long enough that the plan extrapolates past its dry passes where it can
FORMATS = {
    "drift": ["rounds=8"],
    "moderated": ["format=moderated", "format.exchanges=6"],
    "judge_refine": ["format=judge_refine", "rounds=8"],
    "panel": ["format=panel", "format.judge=false", "rounds=8"],
    "panel_judged": ["format=panel"],  # the judge stops it at even odds from round 2
    "grounded": ["format=grounded", "rounds=6", "search.transport=local", "search.collection=kjv"],
}


# formats whose length is drawn by the model (a disqualification, a judge's stop): the plan
# estimates the mean, so they run RANDOM_TIMES as many cells, to measure it and not one draw
RANDOM = {"moderated", "panel_judged"}
RANDOM_TIMES = 4


@dataclass
class Actual:
    calls: int = 0
    input: int = 0
    output: int = 0
    ledger_tokens: int = 0
    wall_s: float = 0.0
    cell_calls: list[int] = field(default_factory=list)

    @property
    def usd(self) -> float:
        return (self.input * PRICE_IN + self.output * PRICE_OUT) / 1e6


def overrides(sim: ProviderSim, name: str, replicates: int) -> list[str]:
    return [
        "-m",
        "model=openai",
        "model.spec=openai:sim-model",
        f"model.kwargs.base_url={sim.base_url}",
        PRICES,
        f"replicates={replicates}",
        *FORMATS[name],
    ]


def run_cell(cell: PlannedCell, root: Path) -> tuple[Path, float]:
    """One planned cell run in-process under ``root``: its run folder, and the seconds it took."""
    cfg = copy.deepcopy(cell.cfg)
    with open_dict(cfg):
        cfg.runs_root, cfg.progress = str(root), False
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    started = time.perf_counter()
    result = run_debate(resolve(cfg), {str(k): v for k, v in raw.items()})
    return result.run_dir, time.perf_counter() - started


def run_cells(plan: Plan, sim: ProviderSim, key: str) -> Actual:
    """Every planned cell, in-process, in a temporary folder; what the simulator billed ``key``."""
    os.environ["OPENAI_API_KEY"] = key
    tmp = Path(tempfile.mkdtemp(prefix="plan-accuracy-"))
    actual = Actual()
    try:
        for row in plan.rows:
            run_dir, seconds = run_cell(row.estimate.cell, tmp)
            actual.wall_s += seconds
            paid = ledger(run_dir)
            actual.ledger_tokens += paid.input_tokens + paid.output_tokens
            actual.cell_calls.append(paid.calls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sim.settle()
    bill = sim.billing(key)
    actual.calls, actual.input = bill.billed_requests, bill.prompt_tokens
    actual.output = bill.completion_tokens
    return actual


def inside(low: float, got: float, high: float) -> str:
    return "inside" if low <= got <= high else "OUTSIDE"


def report(name: str, plan: Plan, chars_plan: Plan, actual: Actual, plan_s: float) -> None:
    point, low, high = plan.point(), plan.low(), plan.high()
    usd = plan.dollars()
    est_tokens, got_tokens = point.input + point.output, actual.input + actual.output
    chars = chars_plan.point()
    assert usd.point is not None and usd.low is not None and usd.high is not None
    print(
        f"{name:<13} calls {point.calls:7.1f}/{actual.calls:<5} = {point.calls / actual.calls:5.2f}  "
        f"tokens {est_tokens:9.0f}/{got_tokens:<7} = {est_tokens / got_tokens:5.2f} "
        f"{inside(low.input + low.output, got_tokens, high.input + high.output)}  "
        f"dollars {usd.point:.5f}/{actual.usd:.5f} = {usd.point / actual.usd:5.2f} "
        f"{inside(usd.low, actual.usd, usd.high)} [{usd.low:.5f}, {usd.high:.5f}]"
    )
    ledger_ok = "equal" if actual.ledger_tokens == got_tokens else f"differ ({actual.ledger_tokens})"
    spread = f"{min(actual.cell_calls)}-{max(actual.cell_calls)}"
    print(
        f"{'':<13} {len(actual.cell_calls)} cells of {spread} calls; input {point.input / actual.input:5.2f}, "
        f"output {point.output / actual.output:5.2f}; "
        f"ledger vs bill: {ledger_ok}; wall plan {plan.wall_s:6.1f} s / cells {actual.wall_s:6.1f} s; "
        f"~4 chars a token would say {(chars.input + chars.output) / got_tokens:4.2f}x; planned in {plan_s:.1f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=1, help="cells a format (x4 for the random ones)")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--latency", type=float, default=0.02, help="the simulator's seconds a reply")
    args = ap.parse_args()
    os.environ.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(var, None)
    load = os.getloadavg()[0]
    print(f"load average {load:.2f}; {args.replicates} cells a format; goal: ratios 0.85-1.15, inside")
    with ProviderSim(latency_s=args.latency) as sim:
        for name in args.formats.split(","):
            argv = overrides(sim, name, args.replicates * (RANDOM_TIMES if name in RANDOM else 1))
            started = time.perf_counter()
            plan, _ = build_plan(parse(["--count", "words", "--call-s", str(args.latency), *argv]))
            plan_s = time.perf_counter() - started
            chars_plan, _ = build_plan(Options(args.latency, False, tuple(argv)))
            report(name, plan, chars_plan, run_cells(plan, sim, f"sk-plan-{name}"), plan_s)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

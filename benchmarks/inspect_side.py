"""inspect_ai on the shape of work ``benchmarks/api_sweep.py`` times: ``--samples``
samples, each ``--calls`` model calls in a row, on a ``ModelAPI`` that sleeps
``--latency`` seconds a call (no network, no tokens), ``max_connections`` =
samples. Run in a process of its own, once for one sample and once for all,
by api_sweep.py, which times the whole process; this script only runs the eval.

    python benchmarks/inspect_side.py --samples 64 --calls 18 --latency 0.5

Needs inspect_ai (``pip install -e '.[compare]'``); without it, exits 3.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile

try:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, get_model, modelapi
    from inspect_ai.solver import Generate, TaskState, solver
except ImportError:
    print("inspect_ai is not installed (pip install -e '.[compare]')", file=sys.stderr)
    sys.exit(3)

LATENCY_S = 0.5


@modelapi(name="sleepy")
class Sleepy(ModelAPI):
    """A provider that answers after ``LATENCY_S`` with a fixed reply."""

    async def generate(self, input, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        await asyncio.sleep(LATENCY_S)
        return ModelOutput.from_content(model="sleepy", content="a reply")


@solver
def calls(n: int):  # type: ignore[no-untyped-def]
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        for _ in range(n):
            state = await generate(state)
        return state

    return solve


def main() -> None:
    global LATENCY_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--calls", type=int, default=18, help="model calls a sample")
    parser.add_argument("--latency", type=float, default=0.5)
    args = parser.parse_args()
    LATENCY_S = args.latency
    task = Task(
        dataset=[Sample(input=f"question {i}", target="a reply") for i in range(args.samples)],
        solver=calls(args.calls),
    )
    model = get_model("sleepy/x", config=GenerateConfig(max_connections=args.samples))
    with tempfile.TemporaryDirectory(prefix="inspect-side-") as logs:
        [log] = eval(task, model=model, max_samples=args.samples, display="none", log_dir=logs)
    if log.status != "success":
        sys.exit(f"inspect_ai eval ended {log.status}")


if __name__ == "__main__":
    main()

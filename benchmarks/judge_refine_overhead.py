"""Harness overhead per model call at round 10 vs round 200, judge-refined debate.

The same measurement as ``overhead.py`` (whose probe and timing this reuses):
a judge-refined debate on the zero-latency scripted model runs for
LATE+HALF+1 rounds, every model call is timed, and a round's overhead per
call is the round's time minus the time inside the model, over its calls
(three per round: Pro, Con, the judge). Each figure is the median over a
window of rounds centred on EARLY or LATE, so both come from one run. The
judge reads only the round's two turns and Pro only the last evaluation,
so a call's cost should not grow with the round: the goal is late/early
<= 1.2. ``--briefings`` turns the briefings on (each prompt then carries one).

    .venv/bin/python benchmarks/judge_refine_overhead.py [--early 10] [--late 200] [--repeats 3] [--briefings]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: overhead.py is a sibling

import overhead  # noqa: E402

FORMAT = "judge_refine"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--early", type=int, default=10)
    parser.add_argument("--late", type=int, default=200)
    parser.add_argument("--half", type=int, default=5, help="window = round +- half")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--briefings", action="store_true", help="brief every role before round 1")
    args = parser.parse_args(argv)
    if args.early - args.half < 1 or args.late <= args.early:
        parser.error("need 1 <= early - half and early < late")
    overhead.FORMATS[FORMAT] = ["format=judge_refine", f"format.briefings={str(args.briefings).lower()}"]
    overhead.measure(args, FORMAT, report)


def report(runs: list[dict[str, float]], args: argparse.Namespace, label: str, name: str = FORMAT) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    e, l_ = args.early, args.late
    briefings = f", briefings {'on' if args.briefings else 'off'}" if hasattr(args, "briefings") else ""
    print(
        f"{label}: {name}{briefings}, scripted model, latency 0, "
        f"{runs[0]['rounds']:.0f} rounds x {args.repeats} runs (median), windows {e}+-{args.half} and "
        f"{l_}+-{args.half}; {med('calls_per_round'):.1f} model calls per round"
    )
    for what, early, late in (("wall", "early_us", "late_us"), ("CPU ", "early_cpu_us", "late_cpu_us")):
        print(
            f"  overhead per model call, {what}  round {e}: {med(early):7.0f} us   round {l_}: "
            f"{med(late):7.0f} us   ratio {l_}/{e}: {med(late) / med(early):.2f}x (goal <= 1.2x)"
        )
    print(
        "    per-run ratios: " + ", ".join(f"{r['ratio']:.2f} wall / {r['cpu_ratio']:.2f} CPU" for r in runs)
    )
    print(
        f"  run-folder bytes added by the round   round {e}: {med('early_round_bytes'):8.0f} B    "
        f"round {l_}: {med('late_round_bytes'):8.0f} B"
    )
    print(f"  whole run: {med('total_s'):.1f} s wall")


if __name__ == "__main__":
    main()

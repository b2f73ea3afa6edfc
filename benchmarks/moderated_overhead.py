"""Harness overhead per model call at speech 20 vs speech 200, moderated debate.

The same measurement as ``overhead.py`` (whose probe and timing this reuses):
a moderated debate with ``format.exchanges`` large enough for LATE+HALF+1
speeches runs on the zero-latency scripted model, every model call is
timed, and a speech's overhead per call is the speech's time minus the time
inside the model, over its calls (the draft and its fact-check, more when a
check fails; ``model.factcheck_fail_rate`` 0.1 and no disqualification). Each
figure is the median over a window of speeches centred on EARLY or LATE, so
both come from one run. A speaker reads the last ``memory.window_rounds``
speeches only, so the goal is late/early <= 1.2.

    .venv/bin/python benchmarks/moderated_overhead.py [--early 20] [--late 200] [--repeats 3]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: siblings import

import judge_refine_overhead  # noqa: E402
import overhead  # noqa: E402

FORMAT = "moderated"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--early", type=int, default=20)
    parser.add_argument("--late", type=int, default=200)
    parser.add_argument("--half", type=int, default=5, help="window = speech +- half")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.early - args.half < 1 or args.late <= args.early:
        parser.error("need 1 <= early - half and early < late")
    exchanges = math.ceil((args.late + args.half) / 2)  # 2 + 2 * exchanges speeches
    overhead.FORMATS[FORMAT] = [
        "format=moderated",
        f"format.exchanges={exchanges}",
        "format.max_strikes=100000",
        "format.max_speech_retries=1",
        "model.factcheck_fail_rate=0.1",
    ]
    print(f"moderated, exchanges={exchanges} ({2 + 2 * exchanges} speeches); a round is one speech")
    overhead.measure(
        args, FORMAT, lambda runs, a, label: judge_refine_overhead.report(runs, a, label, FORMAT)
    )


if __name__ == "__main__":
    main()

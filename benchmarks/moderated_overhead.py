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
import os
import sys
import tempfile
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
        "format=moderated", f"format.exchanges={exchanges}", "format.max_strikes=100000",
        "format.max_speech_retries=1", "model.factcheck_fail_rate=0.1",
    ]  # fmt: skip
    load_before = os.getloadavg()[0]
    for fsync in (True, False):
        with tempfile.TemporaryDirectory(prefix="moderated-overhead-") as tmp:
            runs = [
                overhead.one_run(args.early, args.late, args.half, Path(tmp) / f"runs-{i}", fsync, FORMAT)
                for i in range(args.repeats)
            ]
        label = "fsync on (as run)" if fsync else "fsync off (disk latency removed)"
        print(f"moderated, exchanges={exchanges} ({2 + 2 * exchanges} speeches); a round is one speech")
        judge_refine_overhead.report(runs, args, label, FORMAT)
    print(f"  load average {load_before:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

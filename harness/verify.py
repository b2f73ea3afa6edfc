"""python -m harness.verify <run_dir> — check a run folder's integrity.

Prints a note per quarantined torn line, one line per violation, and exits 1
if there is any (the checks: ``harness.store.integrity``, with each format's
own, ``harness.formats.checks``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.errors import BAD_INPUT, FAILED
from harness.formats.checks import verify

USAGE = "usage: python -m harness.verify <run_dir>"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print(USAGE, file=sys.stderr)
        return BAD_INPUT
    return check(args[0])


def check(run_dir: str) -> int:
    problems, notes = verify(Path(run_dir))
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(line)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} violation(s) in {run_dir}")
    return FAILED if problems else 0


if __name__ == "__main__":
    sys.exit(main())

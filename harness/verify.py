"""python -m harness.verify <run_dir> — check a run folder's integrity.

Prints a note per quarantined torn line, one line per violation, and exits 1
if there is any (the checks: ``harness.store.integrity``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.store.integrity import verify


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python -m harness.verify <run_dir>", file=sys.stderr)
        return 2
    problems, notes = verify(Path(args[0]))
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(line)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} violation(s) in {args[0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

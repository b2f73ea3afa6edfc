"""python -m harness.verify <run_dir> — check a run folder's integrity.

Prints a note per quarantined torn line, one line per violation, and exits 1
if there is any (the checks: ``harness.store.integrity``, with each format's
own, ``harness.formats.checks``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.errors import BAD_INPUT, FAILED, fail
from harness.formats.checks import verify
from harness.store.reader import run_file_problems

USAGE = "usage: python -m harness.verify <run_dir>"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):  # else it is looked for as a folder
        print(USAGE)
        return 0
    if len(args) != 1:
        print(USAGE, file=sys.stderr)
        return BAD_INPUT
    if not Path(args[0]).is_dir():
        fail(f"{args[0]}: no such folder", BAD_INPUT)
    return check(args[0])


def check(run_dir: str) -> int:
    problems, notes = verify(Path(run_dir))
    # the store's checks read the manifest and the logs; the config a resume
    # continues from and the fingerprint it must match are read here
    problems += run_file_problems(Path(run_dir), ("config.yaml", "fingerprint.json"))
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(line)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} violation(s) in {run_dir}")
    return FAILED if problems else 0


if __name__ == "__main__":
    sys.exit(main())

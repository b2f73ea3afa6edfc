"""python -m harness.verify <run_dir> — check a run folder's integrity.

Prints a note per quarantined torn line, one line per violation, and exits 1
if there is any (the checks: ``harness.store.integrity``, with each format's
own, ``harness.formats.checks``).

python -m harness.verify --record-layout <run_dir or tree> — record the
layout (with each seat's side) in the manifest.json of every run beneath
that was made before manifests kept it, so the store and the analysis can
read it without the formats.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.errors import BAD_INPUT, FAILED
from harness.formats.checks import record_layout, verify
from harness.store.reader import find_runs

USAGE = (
    "usage: python -m harness.verify <run_dir>  |  python -m harness.verify --record-layout <run_dir or tree>"
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    record = args[:1] == ["--record-layout"]
    paths = args[1:] if record else args
    if len(paths) != 1 or not Path(paths[0]).is_dir():
        print(USAGE, file=sys.stderr)
        return BAD_INPUT
    return record_layouts(Path(paths[0])) if record else check(paths[0])


def check(run_dir: str) -> int:
    problems, notes = verify(Path(run_dir))
    for line in notes:
        print(f"note: {line}")
    for line in problems:
        print(line)
    print(f"{'FAILED' if problems else 'OK'}: {len(problems)} violation(s) in {run_dir}")
    return FAILED if problems else 0


def record_layouts(root: Path) -> int:
    runs = find_runs(root)
    if not runs:
        print(f"error: {root}: no run folder (no manifest.json) here or beneath", file=sys.stderr)
        return FAILED
    failed = 0
    for run_dir in runs:
        try:
            print(record_layout(run_dir))
        except (OSError, ValueError, RuntimeError) as exc:  # ConfigError, RunInUseError, a bad manifest
            gist = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # pydantic's run to many lines
            print(f"error: {run_dir}: {gist}", file=sys.stderr)
            failed += 1
    return FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m harness.sweep`` (``drift-sweep``): ``resume`` and ``status``
(``harness.sweep.index``), ``ctl`` (``harness.sweep.control``)."""

from __future__ import annotations

import sys

from harness.streams import guarded
from harness.sweep.control import ctl_main
from harness.sweep.index import main as index_main


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command line: a closed pipe (``| head``) ends it quietly
        sys.stdout, sys.stderr = guarded(sys.stdout), guarded(sys.stderr)
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["ctl"]:  # steering a running in-process sweep
        return ctl_main(args[1:])
    return index_main(args)

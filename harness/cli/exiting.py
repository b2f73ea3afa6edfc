"""A command's exit without the interpreter's teardown.

At exit CPython collects and frees every object and module it holds: a
debate's driver holds a thousand modules and, after a sweep, every cell's
leftovers, and freeing them took 0.2 to 0.4 s of CPU that nothing needs. A
command's ``script`` (its console entry point and ``python -m``) runs the
command, then does what the teardown would that matters (waits for its
threads, runs the ``atexit`` hooks, flushes the console) and ends the process
with ``os._exit``. Nothing is lost: every run-folder and sweep file is written
through ``os.write`` or ``with open(...)`` and is closed before this runs.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable


def exit_status(code: object) -> int:
    """``SystemExit.code`` as the status Python would exit with (a message: printed, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def quick_exit(code: int) -> None:
    """End the process as a normal exit would, without freeing what it holds."""
    # threading's own shutdown first: it stops idle pool workers, then joins every non-daemon thread
    shutdown: Callable[[], None] | None = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    atexit._run_exitfuncs()  # tracing's exporters, logging, a local model's close
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or console: nothing left to say there
            pass
    os._exit(code)


def run_then_exit(command: Callable[[], object]) -> None:
    """Run ``command`` (a ``main`` or ``cli``), then ``quick_exit`` with its status.
    An exception other than ``SystemExit`` goes on as Python would report it."""
    try:
        result = command()
    except SystemExit as exc:
        quick_exit(exit_status(exc.code))
    quick_exit(exit_status(result))

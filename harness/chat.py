"""python -m harness.chat [side=for|against] [key=value ...] — play one side yourself.

    python -m harness.chat topic.text="Job's suffering is deserved" side=against

A grounded debate (or ``format=drift``) in which you write one seat's turns
at the terminal: you see the other side's turns, ``/search`` the same
collection with the same tool, ``/note`` an argument for the synthesiser,
and ``/quit`` at any time. In the drift format you are a whole team: the
team's hostile critic reviews each of your drafts, and you see its feedback. The run folder is an ordinary one:
after ``/quit`` it is ``interrupted``, and ``python -m harness.resume <dir>``
continues it, waiting for you again. Same as ``python -m harness.run chat=<side>``.
"""

from __future__ import annotations

import runpy
import sys


def overrides(argv: list[str]) -> list[str]:
    """``harness.run`` overrides for a chat: the side becomes ``chat=<side>``, no progress bar."""
    side = "against"
    rest = []
    for arg in argv:
        if arg.startswith("side="):
            side = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    if not any(a.startswith("format=") for a in rest):
        rest.insert(0, "format=grounded")
    return [*rest, f"chat={side}", "progress=false"]


def main(argv: list[str] | None = None) -> None:
    sys.argv = [sys.argv[0], *overrides(sys.argv[1:] if argv is None else argv)]
    # exactly as `python -m harness.run` runs
    runpy.run_module("harness.run", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

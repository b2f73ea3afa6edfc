"""Console output that can never fail a run.

The run folder is the product; the console is a courtesy. A pipe closed
early (``| head``) or a terminal that went away turns the next write into
``BrokenPipeError`` or ``EIO``, which used to end a healthy run as ``failed``.
A guarded stream swallows that error, sends the rest of its output to
``/dev/null`` (so the interpreter's last flush does not fail either), and
lets the run finish.

A leaf module: the engine's progress bar and the commands' console
(``harness.cli.console``) both write through it.
"""

from __future__ import annotations

import os
import threading
from typing import Any, TextIO


class GuardedStream:
    """``stream`` with every write and flush made harmless once it breaks."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):  # ValueError: the stream was closed under us
                self._give_up()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._give_up()

    def _give_up(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError):  # UnsupportedOperation is both
            pass  # no descriptor of its own (a test's capture): nothing left to flush there

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guarded(stream: TextIO) -> TextIO:
    """``stream`` guarded (once: guarding a guarded stream returns it). A routed
    stream stays as it is: a command run as a sweep cell must not wrap the
    stream every cell thread shares (each route leads to a guarded console or a log)."""
    if isinstance(stream, (GuardedStream, RoutedStream)):
        return stream  # type: ignore[return-value]
    return GuardedStream(stream)  # type: ignore[return-value]


def say(text: str, stream: TextIO) -> None:
    """One line to the console, never an error."""
    print(text, file=guarded(stream))


class RoutedStream:
    """One of the process's standard streams, shared by threads that each write
    somewhere else: a thread that called ``route`` writes to its own target (a
    sweep cell's log), every other thread to ``default``. ``redirect_stdout``
    swaps the stream for the whole process, so many cells in one process need this."""

    def __init__(self, default: TextIO) -> None:
        self.default = default
        self._local = threading.local()

    def route(self, target: TextIO | None) -> None:
        """Send this thread's writes to ``target`` (None: back to the default)."""
        self._local.target = target

    def _target(self) -> TextIO:
        return getattr(self._local, "target", None) or self.default

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

"""What a ``SearchSession`` runs on, below the MCP protocol: a private asyncio
loop on a daemon thread (the session is async, the harness is not), and the
server subprocess: the environment and collection path it starts with, and,
since mcp's stdio client does not say the pid it spawned, finding it in
/proc, telling whether it still runs, and killing it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import signal
import threading
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from harness.search.collections import BUILT_IN

T = TypeVar("T")

GRACE_S = 3.0  # a closing server's time to exit on its own (mcp's stdio client waits 2 s, then terminates)
_PASSED_ENV = ("PATH", "PYTHONPATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")


class LoopThread:
    """An asyncio loop running forever on a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="drift-search-mcp", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self, timeout: float = GRACE_S) -> None:
        """Cancel what is left, stop the loop, join the thread."""

        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            if rest:
                await asyncio.wait(rest, timeout=timeout)

        with contextlib.suppress(Exception):  # the loop is going away either way
            self.submit(cancel_rest()).result(timeout + 1)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()


# -- starting the server -------------------------------------------------------------------------


def server_spec(collection: str) -> str:
    """A folder as an absolute path, so the server finds it whatever its cwd."""
    if collection in BUILT_IN:
        return collection
    path = Path(collection).expanduser()
    return str(path.resolve()) if path.exists() else collection


def server_env(extra: Mapping[str, str]) -> dict[str, str]:
    """mcp's safe default environment, plus PATH, PYTHONPATH, HOME, the DRIFT_*
    settings, the checkout this package is imported from, and ``extra``."""
    from mcp.client.stdio import get_default_environment

    env = get_default_environment()
    env.update({k: v for k, v in os.environ.items() if k in _PASSED_ENV or k.startswith("DRIFT_")})
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in paths if p != root)])
    env.update(extra)
    return env


# -- finding and killing the server process ------------------------------------------------------


def find_child(tag: str) -> int | None:
    """The pid of our child process whose command line holds ``tag``. The
    adapters spawn the server deep inside mcp's stdio client, which does not
    say its pid, so /proc is read (None where there is no /proc)."""
    me, marker = os.getpid(), tag.encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if _stat(int(entry.name))[1] == me and marker in (entry / "cmdline").read_bytes():
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _stat(pid: int) -> tuple[str, int]:
    """(state, parent pid) from /proc/<pid>/stat; the name in parentheses may hold spaces."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        return _stat(pid)[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True


def sigkill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)

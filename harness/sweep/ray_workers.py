"""The shares of ``sweep.processes=P`` as Ray actors: ``sweep.engine=ray`` (issue 37).

With ``sweep.engine=ray`` the P shares of an in-process sweep
(``harness.sweep.processes``) run as P Ray actors, not as P-1 local
subprocesses beside the driver, and the driver runs no cell itself: it plans
the sweep, keeps its index and ``limits.jsonl``, and passes its stop on. Each
actor is one Ray worker process that runs the sweep's own command line
(``relaunch_command``) in process, as ``python -m harness.run`` would, with
``DRIFT_SWEEP_SHARE=k/P`` set: the same launcher runs the same cells, split
and limited as the subprocess workers' are (the model's limits ÷ P).

- ``hydra.launcher.ray.address`` (or ``RAY_ADDRESS``) joins a cluster; with
  neither, a local cluster of P × ``num_cpus`` CPUs is started and stopped here.
- Each actor asks ``hydra.launcher.ray.num_cpus`` CPUs. It runs in the
  driver's folder, so the sweep folder must be at the same path on every node
  (a shared file system) and the harness importable there; the driver's
  ``DRIFT_*`` and ``*_API_KEY`` variables are passed to each actor.
- The driver's first SIGINT or SIGTERM reaches every actor (``stop``): cells
  in flight are left interrupted. Ray ends a job's actors when its driver dies;
  their cells are left to ``python -m harness.sweep resume``, which waits on
  ``processes.lock`` as for local workers.
"""

from __future__ import annotations

import math
import os
import re
import runpy
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.cli.errors import FAILED, INTERRUPTED
from harness.runtime.interrupt import request_stop

MAX_RAY_WORKERS = 1024  # a cluster's size is not known before ray.init; past this, ask why
_STOPPED = threading.Event()  # in an actor's process: its driver asked it to stop


def need_ray(key: str = "sweep.engine") -> None:
    """A one-line error naming the extra when Ray is not importable here."""
    from harness.schema import ConfigError

    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError(f"{key}=ray: Ray is not installed here; pip install '.[ray]'") from None


def check_ray(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``hydra.launcher.ray``'s values (``address``, ``num_cpus``), or a one-line error."""
    from harness.schema import ConfigError

    given = dict(options or {})
    for key in set(given) - {"address", "num_cpus"}:
        raise ConfigError(f"hydra.launcher.ray.{key}: not a key here (address, num_cpus)")
    address, cpus = given.get("address"), given.get("num_cpus", 1)
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise ConfigError(f"hydra.launcher.ray.address: a Ray address (ray://host:10001), got {address!r}")
    try:
        cpus = float(cpus)
    except (TypeError, ValueError):
        cpus = math.nan
    if not 0 < cpus <= 1024:
        raise ConfigError(f"hydra.launcher.ray.num_cpus: a number of CPUs above 0, got {given['num_cpus']!r}")
    return {"address": address, "num_cpus": cpus}


def stop_with_driver(stopped: threading.Event) -> None:
    """In an actor: the driver's stop, when it comes, is this process's, as a signal
    is a local worker's (the launcher's ``stopped``, and every run's stop)."""

    def wait() -> None:
        _STOPPED.wait()
        stopped.set()
        request_stop("SIGTERM")

    threading.Thread(target=wait, name="sweep-ray-stop", daemon=True).start()


class ShareWorker:
    """One share of the sweep, in one Ray worker process (a threaded actor, so that
    ``stop`` is answered while ``run`` runs)."""

    def run(self, argv: list[str], cwd: str, env: dict[str, str], log: str) -> int:
        """The sweep's command line in this process, as ``python -m harness.run``; its exit code."""
        os.chdir(cwd)
        os.environ.update(env)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)  # this process is the share's alone: its console is workers/<k>.log
        os.dup2(fd, 2)
        os.close(fd)
        sys.argv = ["harness.run", *argv]
        try:
            runpy.run_module("harness.run", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        return 0

    def stop(self) -> None:
        _STOPPED.set()


def passed_env() -> dict[str, str]:
    """What an actor needs of the driver's environment (Ray passes none of it to a cluster)."""
    return {k: v for k, v in os.environ.items() if k.startswith("DRIFT_") or k.endswith("_API_KEY")}


def connect(ray: Any, options: dict[str, Any], processes: int, sweep_dir: Path) -> None:
    """Join the configured (or ``RAY_ADDRESS``'s) cluster, else start a local one that
    fits; if neither can be done, one line and exit, the cells left to resume."""
    address = options["address"] or os.environ.get("RAY_ADDRESS")
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            cpus = math.ceil(processes * options["num_cpus"])
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    except Exception as exc:  # ConnectionError, or Ray's own (an auth token missing...)
        where = f"join Ray at {address}" if address else "start a local Ray cluster"
        print(f"error: sweep.engine=ray: could not {where}: {gist(exc)}", file=sys.stderr)
        print(f"[sweep] its cells wait: python -m harness.sweep resume {sweep_dir}", file=sys.stderr)
        raise SystemExit(FAILED) from None


def gist(exc: BaseException) -> str:
    """The first line of the innermost cause, and the outermost error's last line if
    it differs (Ray puts the worker's own traceback inside its errors)."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(inner).splitlines()]
    lines = [ln for ln in lines if ln] or [type(inner).__name__]
    return lines[0][:240] + (f" ... {lines[-1][:240]}" if len(lines) > 1 else "")


@contextmanager
def ray_workers(
    sweep_dir: Path,
    argv: list[str],
    shares: list[dict[str, str]],
    stopped: threading.Event,
    given: Mapping[str, Any] | None,
) -> Iterator[None]:
    """An actor a share, running the sweep's command line ``argv`` with the share's
    variables set (``DRIFT_SWEEP_SHARE``); the driver's stop is theirs."""
    import ray

    options = check_ray(given)
    connect(ray, options, len(shares), sweep_dir)
    try:
        # Any: ray's stubs type the decorated class as its method, with no .remote (mypy with [ray])
        actor: Any = ray.remote(ShareWorker).options(num_cpus=options["num_cpus"], max_concurrency=2)
        actors = [actor.remote() for _ in shares]
        logs = [sweep_dir / "workers" / f"{k}.log" for k in range(len(shares))]
        runs = {
            a.run.remote(argv, os.getcwd(), {**passed_env(), **shares[k]}, str(logs[k])): k
            for k, a in enumerate(actors)
        }
        yield  # the driver's own share: none
        wait_for(ray, runs, actors, logs, stopped)
    finally:
        ray.shutdown()


def wait_for(
    ray: Any, runs: dict[Any, int], actors: list[Any], logs: list[Path], stopped: threading.Event
) -> None:
    """Every actor's end, passing the driver's stop on once; a failed one's cells are left to resume."""
    pending, asked = list(runs), False
    while pending:
        done, pending = ray.wait(pending, timeout=0.2)
        for ref in done:
            k = runs[ref]
            try:
                code = ray.get(ref)
            except ray.exceptions.RayError as exc:
                print(f"[sweep] ray worker {k} died: {gist(exc)}", file=sys.stderr)
                continue
            if code not in (0, INTERRUPTED):
                print(f"[sweep] ray worker {k} exited {code}; see {logs[k]}", file=sys.stderr)
        if stopped.is_set() and not asked:
            asked = True
            for a in actors:
                a.stop.remote()

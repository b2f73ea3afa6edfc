"""One sweep in several driver processes (``sweep.processes=P``, issue 37).

Against the provider simulator with the real client: both processes run
cells, every cell runs once and completes, the harness's ledger equals the
simulator's bill, and the division of the model's limits is in the sweep's
``limits.jsonl``. A driver SIGKILLed mid-sweep takes its worker with it
(cells left resumable), and ``python -m harness.sweep resume`` completes the
sweep with no call made twice. Bad values are one line before anything starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_sweep_inprocess import ARGS, api_sweep, ledger, resume_to_the_end, sweep

from harness.schema import ConfigError
from harness.sweep import ready
from harness.sweep.cell_status import read_cell_record
from harness.sweep.control import ControlError, reachable
from harness.sweep.index import current_index, read_index
from harness.sweep.launcher import launcher_overrides
from harness.sweep.processes import MAX_PROCESSES, Processes, divisions
from harness.sweep.ready import PREFORK_ENV, ReadyWorker, processes_asked


def cell_pids(run_dir: Path) -> list[str]:
    return re.findall(r"^=== cell .* \(pid (\d+),", (run_dir / "cell.log").read_text(), re.M)


def worker_running(sweep_dir: Path) -> bool:
    """Whether the worker (cells of odd number) has a cell running."""
    if not (sweep_dir / "cells.jsonl").is_file():
        return False
    return any(c.status == "running" and c.num % 2 for c in current_index(sweep_dir).cells)


def worker_stops(lock_path: Path, within_s: float) -> bool:
    """Whether every worker let go of the sweep's ``processes.lock`` in time."""
    deadline = time.monotonic() + within_s
    with open(lock_path) as lock:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                time.sleep(0.05)
    return False


def two_shares_on_the_simulator(sweep_dir: Path, *args: str) -> list[str]:
    """Four cells in two shares against the provider simulator: each cell runs once, round-robin,
    the ledger equals the bill, the limits are divided, and ctl refuses the sweep in one line.
    Returns the two shares' pids."""
    from provider_sim import ProviderSim

    with ProviderSim(rpm=600, window_s=1.0) as sim:
        out = api_sweep(
            sweep_dir, sim.base_url, "replicates=4", "sweep.concurrency=2", "model.rpm=6000", *args
        )
        billed = sim.billing("sk-sweep")
    assert out.returncode == 0, out.stderr[-2000:]
    cells = read_index(sweep_dir).cells
    assert [c.status for c in cells] == ["completed"] * 4
    pids = [cell_pids(sweep_dir / c.name) for c in cells]
    assert all(len(p) == 1 for p in pids)  # each cell ran once
    assert pids[0] == pids[2] != pids[1] == pids[3]  # round-robin over two processes
    assert billed.rate_limited == 0 and ledger(sweep_dir) == (billed.billed_requests, billed.total_tokens)
    divided = {d["key"]: (d["old"], d["new"]) for d in divisions(sweep_dir)}
    if "sweep.engine=ray" in args:  # Ray actors may run on other machines: the rate is divided
        assert divided["model.rpm per process"] == (6000, 3000)
    else:  # one machine: both processes pace through one pacer in the sweep folder
        assert divided["model.rpm"] == (6000, 6000) and (sweep_dir / "pacing").is_dir()
    assert divided["model.max_concurrency per process"] == (64, 32)
    # sweep.concurrency=2 is the sweep's cells in flight, not each process's (it ran all 4 at once)
    assert divided["sweep.concurrency per process"] == (2, 1)
    records = [read_cell_record(sweep_dir, c.name) for c in cells]
    spans = [(r.started_at, r.ended_at) for r in records if r is not None]
    assert max(sum(s <= at < e for s, e in spans if e) for at, _ in spans) <= 2, spans
    with pytest.raises(ControlError, match="several driver processes"):
        reachable(sweep_dir)  # ctl: refused in one line, not steering one process of two
    return [pids[0][0], pids[1][0]]


@pytest.mark.network_loopback
@pytest.mark.parametrize("fork", ["1", "0"])
def test_two_processes_split_the_cells_and_divide_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: str
) -> None:
    """The worker forked as its driver started, or (DRIFT_SWEEP_PREFORK=0) a new interpreter: the same sweep."""
    monkeypatch.setenv(PREFORK_ENV, fork)
    two_shares_on_the_simulator(tmp_path / "sweep", "sweep.processes=2")
    said = (tmp_path / "sweep" / "workers" / "1.log").read_text()
    assert ("forked as its driver started" in said) == (fork == "1")


def copies_of(cmdline: list[str]) -> list[int]:
    """Processes running exactly ``cmdline`` (Linux's /proc)."""
    wanted, found = "\0".join(cmdline) + "\0", []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "cmdline").read_text() == wanted:
                found.append(int(proc.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_a_driver_that_fails_its_config_check_leaves_no_forked_worker(tmp_path: Path) -> None:
    """Its worker is forked before Hydra checks the config; the failed driver's exit ends it."""
    cmd = [sys.executable, "-m", "harness.run", "-m", *ARGS, "sweep.concurrency=2", "sweep.processes=2"]
    cmd += ["nosuch.key=1", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    with open(tmp_path / "err.txt", "w") as err:  # not a pipe: a copy left holding it would hide here
        driver = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err)
        assert driver.wait(timeout=120) == 2
    assert "nosuch.key" in (tmp_path / "err.txt").read_text()
    deadline = time.monotonic() + 10
    while copies_of(cmd) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert copies_of(cmd) == []


def test_a_copy_gone_before_its_command_gives_way_to_a_new_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a copy killed before the driver sent its command
        os._exit(0)
    os.close(read)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # gone, not yet reaped: its pipe has no reader
    monkeypatch.setattr(ready, "_READY", {1: ReadyWorker(pid, write)})
    (tmp_path / "workers").mkdir()
    share = Processes(tmp_path, 2, threading.Event())
    proc = share._start([sys.executable, "-c", "print('a new interpreter')", "-m"], 1)
    assert isinstance(proc, subprocess.Popen) and proc.wait() == 0
    assert (tmp_path / "workers" / "1.log").read_text() == "a new interpreter\n"
    assert ready._READY == {}


def test_a_worker_ended_by_the_stop_relayed_to_it_is_no_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C early in a ``sweep.processes=2`` run (or its resume) said ``[sweep] worker 1
    exited -15``: the SIGTERM the driver passed on ended the worker before its handler was
    set. That is the interruption, said by the driver; a worker ended so without a stop is not."""
    from harness.sweep.index import SweepIndex, write_index

    write_index(tmp_path, SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=[]))
    started: list[subprocess.Popen[bytes]] = []
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setattr(
        Processes, "_start", lambda self, command, k: started.append(subprocess.Popen(sleeper)) or started[-1]
    )
    stopped = threading.Event()
    with Processes(tmp_path, 2, stopped).workers():
        stopped.set()  # the driver's stop: relayed to the worker as SIGTERM
    assert started[0].returncode == -signal.SIGTERM and "exited" not in capsys.readouterr().err

    with Processes(tmp_path, 2, threading.Event()).workers():
        started[1].terminate()  # killed by hand, no stop: said
    assert "[sweep] worker 1 exited -15" in capsys.readouterr().err


def test_a_forked_worker_leaves_ctrl_c_to_its_driver_until_it_launches(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the worker copies too: one with its command took it as a
    KeyboardInterrupt (a traceback in its log, exit 1: read as a crash); the driver passes it on."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: never back into pytest
        try:
            os.close(write)  # or its pipe would never end
            ready._await_command(read, os.getppid())
            os._exit(0 if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 1)
        finally:
            os._exit(2)
    os.close(read)
    copy = ReadyWorker(pid, write)
    copy.start(["-m"], dict(os.environ), tmp_path / "1.log")
    assert copy.wait() == 0


def test_processes_asked_reads_either_key() -> None:
    assert processes_asked(["-m", "sweep.processes=3"]) == 3
    assert processes_asked(["-m", "hydra.launcher.processes=2", "x=1"]) == 2  # a resume's command
    assert processes_asked(["-m", "sweep.processes=two"]) == 1  # the config check says why
    assert processes_asked(["-m", "rounds=2"]) == 1


def test_a_killed_driver_stops_its_worker_and_the_sweep_resumes(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    driver = sweep(sweep_dir, "sweep.concurrency=2", "sweep.processes=2", args=ARGS)
    deadline = time.monotonic() + 120
    while not worker_running(sweep_dir) and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(driver.pid, signal.SIGKILL)  # the driver only: its worker must notice by itself
    driver.communicate(timeout=60)
    assert worker_stops(sweep_dir / "processes.lock", within_s=30)
    theirs = [c.status for c in current_index(sweep_dir).cells if c.num % 2 == 1]
    assert "interrupted" in theirs  # it stopped its cells in flight, as on Ctrl-C, not ran on
    resume_to_the_end(sweep_dir, cells=6, rounds=3)  # waits for the worker to let go first


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["-m", "sweep.concurrency=4", "sweep.processes=0"],
            f"sweep.processes: must be a whole number from 1 to {MAX_PROCESSES}",
        ),
        (["-m", "sweep.processes=2"], "sweep.processes: runs the in-process launcher's cells in P processes"),
        (
            ["-m", "sweep.concurrency=4", "sweep.processes=2", "budget.sweep_usd=1"],
            "budget.sweep_usd: a sweep budget",
        ),
    ],
)
def test_a_bad_processes_value_is_one_line(argv: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)) as err:
        launcher_overrides(argv)
    assert "\n" not in str(err.value)


def test_sweep_concurrency_is_split_across_processes_as_the_cells_are(tmp_path: Path) -> None:
    """N cells in flight over P processes: N // P each, one more for the first N % P, at least 1."""
    share = Processes(tmp_path, 2, threading.Event())
    parts = {}
    for n in (1, 2, 5, 8):
        parts[n] = []
        for k in range(2):
            share.k = k
            parts[n].append(share.in_flight(n))
    assert parts == {1: [1, 1], 2: [1, 1], 5: [3, 2], 8: [4, 4]}
    assert Processes(tmp_path, 1, threading.Event()).in_flight(5) == 5

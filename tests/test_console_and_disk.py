"""What happens around a run must not end it badly: a console that goes away
(a pipe closed by ``head``, a lost terminal and its SIGHUP), or a disk that
fills. The run finishes, or stops resumable, and says so in one line."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_durable_faults import Outcome, assert_same_outcome, count_lines

from harness.cli.console import guarded
from harness.engine import resume_run
from harness.formats.checks import verify
from harness.store import memory
from harness.store.rundir import DiskFullError, read_manifest

SLOW_RUN = ("model=scripted", "rounds=3", "model.latency_s=0.05", "progress=true")


def start(tmp_path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "harness.run", *args, f"runs_root={tmp_path / 'runs'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )


def wait_for_drafts(tmp_path: Path, n: int) -> Path:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for thinking in (tmp_path / "runs").glob("memory-*/pros/thinking.jsonl"):
            if count_lines(thinking) >= n:
                return thinking.parents[1]
        time.sleep(0.01)
    raise AssertionError("the run never started drafting")


def test_a_closed_stdout_and_stderr_do_not_fail_the_run(tmp_path):
    proc = start(tmp_path, *SLOW_RUN)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # as `| head -0` does, and a terminal that went away
    proc.stderr.close()
    assert proc.wait(timeout=120) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert read_manifest(run_dir).status == "completed"
    assert verify(run_dir) == ([], [])


def test_sighup_stops_the_run_resumably(tmp_path):
    proc = start(tmp_path, *SLOW_RUN)
    run_dir = wait_for_drafts(tmp_path, 1)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert read_manifest(run_dir).status == "interrupted"
    assert f"python -m harness.resume {run_dir}" in err.decode()
    assert resume_run(run_dir).manifest.status == "completed"
    assert verify(run_dir) == ([], [])


def test_a_guarded_stream_swallows_a_broken_pipe():
    class Broken:
        def write(self, text: str) -> int:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    stream = guarded(Broken())  # type: ignore[arg-type]
    assert stream.write("progress") == len("progress")
    stream.flush()
    assert guarded(stream) is stream


def test_a_full_disk_is_one_line_and_a_failed_status_and_resume_completes(run, runs_root, monkeypatch):
    reference = run("rounds=3", "model.reject_first=1", "run_name=reference")
    real_write, writes = os.write, [0]

    def filling(fd: int, data: bytes) -> int:
        writes[0] += 1
        if writes[0] > 25:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(memory.os, "write", filling)
    with pytest.raises(DiskFullError) as caught:
        run("rounds=3", "model.reject_first=1", "run_name=full")
    monkeypatch.setattr(memory.os, "write", real_write)
    run_dir = runs_root / "full"
    message = str(caught.value)
    assert "\n" not in message and "no space left on device" in message
    assert message.startswith(str(run_dir))  # names the file it could not write
    assert f"python -m harness.resume {run_dir}" in message
    manifest = read_manifest(run_dir)  # the manifest still fit: it says what happened
    assert manifest.status == "failed" and manifest.error is not None and "No space" in manifest.error.message
    # after space is freed, resume completes and the run equals an uninterrupted one
    assert resume_run(run_dir).manifest.status == "completed"
    assert_same_outcome(run_dir, Outcome.of(reference.run_dir))


def test_a_full_disk_through_the_cli_is_one_line(tmp_path):
    # sitecustomize fills the disk for the child: every log append after the 20th fails
    (tmp_path / "sitecustomize.py").write_text(
        "import errno, os\n"
        "import harness.store.memory as m\n"
        "real, n = os.write, [0]\n"
        "def full(fd, data):\n"
        "    n[0] += 1\n"
        "    if n[0] > 20: raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "    return real(fd, data)\n"
        "m.os = type('os', (), {**{k: getattr(os, k) for k in dir(os) if not k.startswith('__')}, 'write': full})\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.run",
            "model=scripted",
            "rounds=3",
            "progress=false",
            f"runs_root={tmp_path / 'runs'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: ") and "no space left on device" in line and "harness.resume" in line


QUICK_EXIT = """
import atexit, sys, threading, time
from pathlib import Path
from harness.cli.exiting import run_then_exit

out = Path(sys.argv[1])
atexit.register(lambda: (out / "hook").write_text("ran"))

def command():
    threading.Thread(target=lambda: (time.sleep(0.3), (out / "thread").write_text("joined"))).start()
    print("said before the exit", end="")  # still in stdout's buffer
    raise SystemExit(3)

run_then_exit(command)
"""


def test_the_quick_exit_keeps_the_status_the_output_the_threads_and_the_exit_hooks(tmp_path):
    """``python -m harness.run`` ends by ``os._exit`` (harness.cli.exiting): what a normal
    exit does that matters is still done."""
    done = subprocess.run([sys.executable, "-c", QUICK_EXIT, str(tmp_path)], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, "said before the exit"), done.stderr
    assert (tmp_path / "thread").read_text() == "joined" and (tmp_path / "hook").read_text() == "ran"

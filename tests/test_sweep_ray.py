"""The shares of ``sweep.processes=P`` as Ray actors (``sweep.engine=ray``, issue 37).

On a local Ray cluster (the ``full`` tier; skipped without Ray), against the
provider simulator with the real client: two Ray workers run every cell once,
in their own processes (not the driver's), the harness's ledger equals the
simulator's bill, and the model's limits are divided between them in
``limits.jsonl``. A driver SIGKILLed mid-sweep takes the cluster it started
with it, and ``python -m harness.sweep resume`` completes every cell with no
call asked twice. Bad values are one line before anything starts (in-process).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import types
from contextlib import suppress
from pathlib import Path

import pytest
from test_sweep_inprocess import ARGS, resume_to_the_end, sweep
from test_sweep_processes import two_shares_on_the_simulator, worker_running, worker_stops

from harness.schema import ConfigError
from harness.sweep.index import current_index
from harness.sweep.launcher import launcher_overrides

RAY = ["sweep.processes=2", "sweep.engine=ray", "hydra.launcher.ray.num_cpus=1"]


@pytest.mark.full
@pytest.mark.network_loopback
def test_two_ray_workers_run_every_cell_once_and_divide_the_limit(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    sweep_dir = tmp_path / "sweep"
    shares = two_shares_on_the_simulator(sweep_dir, *RAY)
    driver = json.loads((sweep_dir / "driver.lock").read_text())["pid"]
    assert str(driver) not in shares  # the driver ran none of the cells


@pytest.mark.full
def test_a_killed_ray_driver_leaves_every_cell_to_resume_once(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    sweep_dir = tmp_path / "sweep"
    # slower calls than ARGS's: a fast driver could finish every cell before the kill lands
    slower = [a if not a.startswith("model.latency_s=") else "model.latency_s=0.2" for a in ARGS]
    driver = sweep(sweep_dir, "sweep.concurrency=2", *RAY, args=slower)
    try:
        deadline = time.monotonic() + 180
        while not worker_running(sweep_dir) and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(driver.pid, signal.SIGKILL)  # the driver only: the cluster it started goes with it
        driver.communicate(timeout=60)
        assert worker_stops(sweep_dir / "processes.lock", within_s=60)
        assert {c.status for c in current_index(sweep_dir).cells} != {"completed"}  # killed mid-sweep
    finally:
        with suppress(ProcessLookupError):  # what Ray left of that cluster (its agents)
            os.killpg(driver.pid, signal.SIGKILL)
    resume_to_the_end(sweep_dir, cells=6, rounds=3)  # a new local cluster, the same two shares


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["-m", "sweep.concurrency=4", "sweep.engine=dask"], "sweep.engine: must be one of local, ray"),
        (["-m", "sweep.engine=local"], "sweep.engine: runs the in-process launcher's shares"),
        (["-m", "sweep.concurrency=4", "sweep.engine=ray", "hydra.launcher.ray.num_cpus=0"], "num_cpus"),
        (["-m", "sweep.concurrency=4", "sweep.engine=ray", "hydra.launcher.ray.cpus=2"], "ray.cpus: not a"),
        (["-m", "sweep.concurrency=4", "sweep.processes=2000", "sweep.engine=ray"], "1 to 1024 (Ray"),
    ],
)
def test_a_bad_engine_value_is_one_line(argv: list[str], says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))  # whether Ray is installed or not
    with pytest.raises(ConfigError, match=re.escape(says)) as err:
        launcher_overrides(argv)
    assert "\n" not in str(err.value)


def test_ray_missing_is_one_line_naming_the_extra_before_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.run import cli

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as when it is not installed
    argv = [
        "-m",
        "model=scripted",
        "sweep.concurrency=2",
        "sweep.engine=ray",
        f"hydra.sweep.dir={tmp_path / 's'}",
    ]
    monkeypatch.setattr(sys, "argv", ["harness.run", *argv])
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back what the command guards
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    with pytest.raises(SystemExit) as exit_:
        cli()
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: sweep.engine=ray: Ray is not installed here; pip install '.[ray]'"
    ]
    assert not (tmp_path / "s").exists()

"""Sweeps: ``python -m harness.run -m ...`` on the scripted model, end to end.

Each test runs the real command line in a subprocess (launchers fork, pickle
and exit, which only a real process shows), with every folder under tmp_path.
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import DictConfig, OmegaConf

from harness.config import replicate_seed
from harness.schema import ConfigError
from harness.store.records import parse_record
from harness.sweep.callback import check_sweep_folder, concurrent_workers, replicate_override, start_index
from harness.sweep.commands import main as sweep_main
from harness.sweep.control import driver_lock
from harness.sweep.grid import Cell, plan_cells
from harness.sweep.index import (
    SweepIndex,
    current_index,
    progress_line,
    read_index,
    resume_changes,
    write_index,
    write_parquet,
)

REPO = Path(__file__).resolve().parents[1]
BASE = ["model=scripted", "progress=false"]


def command(runs_root: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "harness.run", "-m", f"runs_root={runs_root}", *BASE, *overrides]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRIFT_WORKERS", "OPENAI_API_KEY")}
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))}


def sweep(runs_root: Path, *overrides: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(runs_root, *overrides),
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sweep_dir_of(runs_root: Path) -> Path:
    (found,) = runs_root.glob("sweep-*")
    return found


def arguments(run_dir: Path) -> list[str]:
    lines = (run_dir / "shared_memory.jsonl").read_text().splitlines()
    return [parse_record(line).text for line in lines]  # type: ignore[union-attr]


def test_two_by_two_sweep_gives_each_cell_its_own_folder_and_an_index(tmp_path):
    out = sweep(tmp_path, "llm.temperature=0.2,1.0", "critic=lenient,strict", "rounds=2")
    assert out.returncode == 0, out.stderr
    sweep_dir = sweep_dir_of(tmp_path)
    names = {"temp-0.2_critic-lenient", "temp-0.2_critic-strict", "temp-1.0_critic-lenient"}
    names.add("temp-1.0_critic-strict")
    run_dirs = {p.name for p in sweep_dir.iterdir() if (p / "manifest.json").is_file()}
    assert run_dirs == names
    for name in names:
        manifest = json.loads((sweep_dir / name / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["counts"]["rounds_completed"] == 2
        assert "completed: rounds 2/2" in (sweep_dir / name / "cell.log").read_text()
        assert not (sweep_dir / name / ".hydra").exists()
    # each cell's own output went to its log, not the console; the console has the table
    assert "completed: rounds" not in out.stdout
    assert "4 cells: 4 completed" in out.stdout and "[sweep] 4/4 done" in out.stderr
    index = read_index(sweep_dir)
    assert [c.status for c in index.cells] == ["completed"] * 4
    assert {c.name for c in index.cells} == names
    assert all(c.rounds_done == 2 and c.input_tokens > 0 and c.wall_s > 0 for c in index.cells)
    assert index.cells[0].params == {"llm.temperature": "0.2", "critic": "lenient"}
    # the cell log: each cell's running then completed record, which replay to the walked index
    events = [json.loads(line) for line in (sweep_dir / "cells.jsonl").read_text().splitlines()]
    assert (
        [e["cell"] for e in events[::2]] == [c.name for c in index.cells] == [e["cell"] for e in events[1::2]]
    )
    assert [e["status"] for e in events] == ["running", "completed"] * 4
    assert [c.model_dump() for c in current_index(sweep_dir).cells] == [c.model_dump() for c in index.cells]
    table = pd.read_parquet(sweep_dir / "sweep.parquet")
    assert len(table) == 4 and set(table["status"]) == {"completed"}
    assert sorted(table["param.critic"]) == ["lenient", "lenient", "strict", "strict"]
    write_parquet(sweep_dir, index)  # again, here: the same table, and the collector left unfrozen
    assert pd.read_parquet(sweep_dir / "sweep.parquet").equals(table) and gc.get_freeze_count() == 0
    # what varies reaches the cell's own config
    assert "temperature: 1.0" in (sweep_dir / "temp-1.0_critic-strict" / "config.yaml").read_text()


def resume_sweep(sweep_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)],
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def _wait_for_round(run_dir: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if list((run_dir / "snapshots").glob("round-*.json")):
            return
        time.sleep(0.02)
    raise AssertionError(f"{run_dir} never reached round 1 (sweep exited {proc.poll()})")


def test_resume_after_one_cell_is_killed(tmp_path, capsys):
    """Kill the sweep mid-cell: resume skips the two completed cells, resumes the
    killed one from its snapshots, runs the one never started; then has nothing to do."""
    # two latencies: cells that differ in nothing the transcript depends on
    args = ["model.latency_s=0.03,0.031", "critic=lenient,strict", "rounds=4"]
    proc = subprocess.Popen(
        command(tmp_path, *args),
        cwd=REPO,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not list(tmp_path.glob("sweep-*/sweep.json")):
            time.sleep(0.02)
        sweep_dir = sweep_dir_of(tmp_path)
        _wait_for_round(sweep_dir / "latency-s-0.031_critic-lenient", proc)
    finally:
        proc.kill()
        proc.communicate()
    assert not (sweep_dir / "latency-s-0.031_critic-strict").exists()
    assert sweep_main(["status", str(sweep_dir)]) == 1
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:5]]
    assert [row[1] for row in rows] == ["completed", "completed", "crashed", "pending"]
    done, tokens = int(rows[2][2].split("/")[0]), int(rows[2][4])  # the killed cell's rounds so far
    assert done >= 1 and tokens > 0  # from its newest snapshot: its manifest still held 0 and 0
    log = (sweep_dir / "cells.jsonl").read_text()

    index = (sweep_dir / "sweep.json").read_bytes()
    with driver_lock(sweep_dir, "another driver"):  # one still running: a second is refused in one line
        second = resume_sweep(sweep_dir)
    assert second.returncode == 2
    assert second.stderr.strip().endswith(
        "another driver runs this sweep (driver.lock is held); wait for it, or stop it (Ctrl-C) and resume"
    )
    assert len(second.stderr.strip().splitlines()) == 1
    assert (sweep_dir / "sweep.json").read_bytes() == index

    out = resume_sweep(sweep_dir)
    assert out.returncode == 0, out.stderr
    assert "2 completed (skipped), 1 to resume, 1 never started" in out.stdout
    index = read_index(sweep_dir)
    assert [c.status for c in index.cells] == ["completed"] * 4
    assert [c.action for c in index.cells] == ["skip", "skip", "resume", "run"]
    assert (sweep_dir / "cells.jsonl").read_text().startswith(log)  # append-only across launches
    killed = sweep_dir / "latency-s-0.031_critic-lenient"
    history = [h["action"] for h in json.loads((killed / "manifest.json").read_text())["history"]]
    assert history[0] == "start" and "resume" in history and history[-1] == "complete"
    # the resumed transcript equals the uninterrupted one of the same config
    assert arguments(killed) == arguments(sweep_dir / "latency-s-0.03_critic-lenient")
    assert len(arguments(killed)) == 8

    again = resume_sweep(sweep_dir)
    assert again.returncode == 0 and "all 4 cells completed; nothing to do" in again.stdout


# A stand-in driver: says it is ready, then logs each SIGTERM and ends as the driver does (130).
DRIVER = """
import os, signal, sys, time
log = open(sys.argv[1], "a", buffering=1)
signal.signal(signal.SIGTERM, lambda *_: (log.write("TERM\\n"), time.sleep(0.3), sys.exit(130)))
log.write(f"ready {os.getpid()} {os.getpgid(0)}\\n")
time.sleep(60)
"""
RELAY = (
    "import os, sys; from harness.sweep.index import relay; sys.exit(relay(sys.argv[1:], dict(os.environ)))"
)


def _relayed(log: Path) -> tuple[subprocess.Popen[bytes], int, int]:
    """The resume wrapper's relay running the stand-in driver: (wrapper, driver pid, its group)."""
    wrapper = subprocess.Popen(
        [sys.executable, "-c", RELAY, sys.executable, "-c", DRIVER, str(log)], env=environment()
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (log.exists() and log.read_text().startswith("ready")):
        time.sleep(0.02)
    _, pid, group = log.read_text().split()[:3]
    return wrapper, int(pid), int(group)


def test_the_resume_wrapper_passes_each_signal_on_once_and_its_driver_ends_with_it(tmp_path):
    """harness.sweep resume's driver once ran on alone when the wrapper was killed."""
    log = tmp_path / "term.log"
    wrapper, pid, group = _relayed(log)
    assert group == pid != os.getpgid(wrapper.pid)  # its own group: a terminal's Ctrl-C comes through once
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(timeout=30) == 130
    assert log.read_text().splitlines()[1:] == ["TERM"]

    killed = tmp_path / "kill.log"
    wrapper, _, _ = _relayed(killed)
    wrapper.kill()
    wrapper.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and "TERM" not in killed.read_text():
        time.sleep(0.02)
    assert killed.read_text().splitlines()[1:] == ["TERM"]  # told to stop, not left running


def test_a_resume_raises_the_cells_own_budget(tmp_path):
    """budget.tokens given to a sweep's resume reaches the cells it resumes (it reached
    only the cells never started: a resumed cell went on under its folder's budget)."""
    out = sweep(tmp_path, "rounds=2", "llm.temperature=0.2,0.8", "budget.tokens=400")
    assert out.returncode == 1, out.stderr  # each cell stopped by its budget, resumable
    sweep_dir = sweep_dir_of(tmp_path)
    assert [c.status for c in read_index(sweep_dir).cells] == ["interrupted"] * 2
    assert sweep_main(["resume", str(sweep_dir), "budget.tokens=0"]) == 2  # refused before any cell
    assert sweep_main(["resume", str(sweep_dir), "budget.tokens=100000"]) == 0
    assert [(c.status, c.rounds_done) for c in read_index(sweep_dir).cells] == [("completed", 2)] * 2


def test_the_progress_line_counts_stopped_cells_apart_from_failed_ones():
    states = ["completed", "interrupted", "interrupted", "crashed", "pending"]
    cells = [Cell(num=i, name=f"c{i}", overrides=[], params={}, status=s) for i, s in enumerate(states)]
    # a budget stop is no failure, nor is a killed cell (it said 1 failed, the table 1 crashed)
    assert (
        progress_line(cells)
        == "[sweep] 1/5 done | 0 running | 0 failed | 1 crashed | 2 interrupted | 1 pending"
    )
    cells[3].status = "failed"
    assert progress_line(cells) == "[sweep] 1/5 done | 0 running | 1 failed | 2 interrupted | 1 pending"


def test_bad_override_fails_its_cell_only_and_values_never_nest(tmp_path):
    every = "hydra.callbacks.sweep_index.progress_every_s=0.05"
    out = sweep(tmp_path, "llm.temperature=-1,0.5", "model.spec=scripted:x/y,scripted:x:y", "rounds=1", every)
    assert out.returncode == 1
    # said on the console as the sweep runs (a stream taken before harness.run let go of
    # stderr kept these lines), and into no cell's log
    assert "[sweep] temp--1_spec-scripted-x-y failed: llm.temperature: must be" in out.stderr
    assert "[sweep] 2/4 done" in out.stderr.splitlines()[-1]
    sweep_dir = sweep_dir_of(tmp_path)
    index = read_index(sweep_dir)
    by_name = {c.name: c for c in index.cells}
    assert {n: c.status for n, c in by_name.items()} == {
        "temp-0.5_spec-scripted-x-y": "completed",
        "temp-0.5_spec-scripted-x-y-2": "completed",  # x/y and x:y sanitise alike
        "temp--1_spec-scripted-x-y": "failed",
        "temp--1_spec-scripted-x-y-2": "failed",
    }
    error = "llm.temperature: must be in [0, 2], got -1.0"
    assert by_name["temp--1_spec-scripted-x-y"].error == error and error in out.stdout
    assert by_name["temp--1_spec-scripted-x-y"].exit_code == 2
    assert not (sweep_dir / "temp--1_spec-scripted-x-y").exists()  # rejected before any folder
    run_dirs = [p for p in sweep_dir.rglob("manifest.json")]
    assert sorted(p.parent.parent for p in run_dirs) == [sweep_dir, sweep_dir]  # nothing nested
    assert not any("[sweep]" in (p.parent / "cell.log").read_text() for p in run_dirs)
    assert "4 cells: 2 completed, 2 failed" in out.stdout


def test_a_value_no_cell_can_hold_fails_its_cell_in_one_line(tmp_path):
    """``-m rounds=1,abc`` ran the first cell, then ended the sweep in a pydantic
    traceback (the cell's row could not hold 'abc'), the second cell left running."""
    out = sweep(tmp_path, "rounds=1,abc")
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-800:]
    cells = {c.name: c for c in read_index(sweep_dir_of(tmp_path)).cells}
    assert {n: c.status for n, c in cells.items()} == {"rounds-1": "completed", "rounds-abc": "failed"}
    assert (cells["rounds-abc"].error or "").startswith("rounds: Value 'abc'")


def test_joblib_sweep_runs_cells_in_workers_with_replicates(tmp_path):
    out = sweep(
        tmp_path,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "critic=lenient,strict",
        "replicates=2",
        "rounds=1",
    )
    assert out.returncode == 0, out.stderr
    assert "DRIFT_WORKERS=2" in out.stderr  # the thread rule: cores split over 2 workers
    sweep_dir = sweep_dir_of(tmp_path)
    index = read_index(sweep_dir)
    assert [c.name for c in index.cells] == [
        "critic-lenient_rep-0",
        "critic-lenient_rep-1",
        "critic-strict_rep-0",
        "critic-strict_rep-1",
    ]
    assert [c.seed for c in index.cells] == [0, replicate_seed(0, 1), 0, replicate_seed(0, 1)]
    records = [json.loads((sweep_dir / "cells" / f"{c.name}.json").read_text()) for c in index.cells]
    assert "DRIFT_WORKERS=2" in (sweep_dir / "critic-strict_rep-1" / "cell.log").read_text()
    assert all(r["status"] == "completed" and r["pid"] != os.getpid() for r in records)
    rep0, rep1 = arguments(sweep_dir / "critic-lenient_rep-0"), arguments(sweep_dir / "critic-lenient_rep-1")
    assert rep0 != rep1 and len(rep0) == len(rep1) == 2  # replicates differ only in seed


def test_submitit_local_sweep(tmp_path):
    out = sweep(tmp_path, "hydra/launcher=submitit_local", "critic=lenient,strict", "rounds=1")
    assert out.returncode == 0, out.stderr
    index = read_index(sweep_dir_of(tmp_path))
    assert [(c.name, c.status) for c in index.cells] == [
        ("critic-lenient", "completed"),
        ("critic-strict", "completed"),
    ]


def test_ray_sweep_on_a_local_cluster(tmp_path):
    pytest.importorskip("ray")
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    out = sweep(
        tmp_path,
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init.num_cpus=2",
        "llm.temperature=0.2,1.0",
        "critic=lenient,strict",
        "rounds=1",
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert [c.status for c in read_index(sweep_dir_of(tmp_path)).cells] == ["completed"] * 4


# -- pieces, in-process ------------------------------------------------------------
def test_cell_names_are_one_safe_path_component_each():
    cells = plan_cells(["model.spec=openai:gpt-4o,a/../b,a:..:b", "llm.temperature=0.2", "replicate=0,1"])
    names = [c.name for c in cells]
    assert names[:2] == ["spec-openai-gpt-4o_rep-0", "spec-openai-gpt-4o_rep-1"]
    assert len(set(names)) == 6 and all("/" not in n and ".." not in n for n in names)
    assert cells[0].overrides[1:] == ["llm.temperature=0.2", "replicate=0"]
    assert cells[0].params == {"model.spec": "openai:gpt-4o", "replicate": "0"}


def test_replicate_seeds_are_deterministic_and_distinct():
    seeds = [replicate_seed(7, r) for r in range(50)]
    assert seeds[0] == 7 and len(set(seeds)) == 50
    assert seeds == [replicate_seed(7, r) for r in range(50)]


def test_single_run_folder_name_is_unchanged(run):
    assert run("rounds=1").run_dir.name == "memory-v1-temp-0.7-max-tokens-256"


def test_sweep_command_line_errors(tmp_path, capsys):
    assert sweep_main(["resume", "--help"]) == 0 and capsys.readouterr().out.startswith("usage:")
    assert sweep_main(["resume"]) == 2
    assert sweep_main(["status", str(tmp_path)]) == 2
    assert "no sweep.json" in capsys.readouterr().err
    # killed as it started, a sweep made no folder: resuming it says to run its command again
    assert sweep_main(["resume", str(tmp_path / "never-made")]) == 2
    assert capsys.readouterr().err.endswith(
        "no such folder (a sweep killed as it started makes none: run its command again)\n"
    )


def test_a_sweep_folder_that_is_a_file_is_one_line_and_the_file_is_kept(tmp_path, capsys):
    (afile := tmp_path / "afile").write_text("keep")
    for sweep_dir in (afile, afile / "sub"):  # hydra.sweep.dir, or runs_root, naming a file
        with pytest.raises(SystemExit) as exc:
            check_sweep_folder(sweep_dir)
        assert exc.value.code == 2
        assert (
            capsys.readouterr().err
            == f"error: hydra.sweep.dir: {afile} is a file, not a folder (sweep folder {sweep_dir})\n"
        )
    assert afile.read_text() == "keep"
    check_sweep_folder(tmp_path / "new" / "sweep")  # a folder still to make is no error
    with pytest.raises(SystemExit):  # a grid of no cells: refused before its folder is made
        start_index(tmp_path / "zero", OmegaConf.create(), ["llm.temperature=range(0,0)"])
    assert "this grid has no cells" in capsys.readouterr().err and not (tmp_path / "zero").exists()


def test_a_resume_is_dated_when_it_starts(tmp_path, monkeypatch):
    """sweep.json's history dated each resume with the last write of the launch before."""
    from datetime import UTC, datetime, timedelta

    from harness.sweep.index import RESUME_ENV

    cells = plan_cells(["llm.temperature=0.2,0.8"])
    then = datetime.now(UTC) - timedelta(hours=3)
    index = SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=cells)
    (tmp_path / "sweep.json").write_text(index.model_copy(update={"updated_at": then}).model_dump_json())
    monkeypatch.setenv(RESUME_ENV, "1")
    config = OmegaConf.create({"hydra": {"overrides": {"task": ["llm.temperature=0.2,0.8"]}}})
    resumed = start_index(tmp_path, config, ["llm.temperature=0.2,0.8"])
    when = datetime.fromisoformat(resumed.history[-1].removeprefix("resume "))
    assert abs(datetime.now(UTC) - when) < timedelta(minutes=1)


def test_a_folder_holding_a_sweep_says_resume_only_for_that_sweep(tmp_path, capsys, monkeypatch):
    """A second -m command into a sweep's folder was told 'continue it with: python -m
    harness.sweep resume <dir>' whatever its grid; for another grid that resume is refused."""
    from harness.sweep.index import RESUME_ENV

    monkeypatch.delenv(RESUME_ENV, raising=False)
    started = ["rounds=1", "llm.temperature=0.2,1.0"]
    index = SweepIndex(
        name="s", launcher="x", task_overrides=started, hydra_overrides=[], cells=plan_cells(started)
    )
    write_index(tmp_path, index, parquet=False)
    for typed, said in (
        (
            ["rounds=1", "llm.temperature=0.2,1.0", "budget.usd=5"],
            f"already holds this sweep; continue it with: python -m harness.sweep resume {tmp_path} budget.usd=5",
        ),
        (
            ["rounds=2", "llm.temperature=0.2,0.5"],
            "already holds a sweep of other cells (rounds=1 llm.temperature=0.2,1.0); "
            "a new grid wants a new hydra.sweep.dir",
        ),
    ):
        config = OmegaConf.create({"hydra": {"overrides": {"task": typed}}})
        with pytest.raises(SystemExit):
            start_index(tmp_path, config, typed)
        assert said in capsys.readouterr().err


def test_a_resume_changes_budgets_only_and_names_any_other_key():
    started = ["model=scripted", "llm.temperature=0.2,0.8", "rounds=2"]
    index = SweepIndex(name="s", launcher="basic", task_overrides=started, hydra_overrides=[], cells=[])
    # the sweep's own value again is no change (it once moved in the list and was refused)
    assert resume_changes(index, ["llm.temperature=0.2,0.8", "budget.sweep_usd=2"]) == ["budget.sweep_usd=2"]
    for change, key in (
        ("rounds=4", "rounds"),
        ("llm.temperature=0.2", "llm.temperature"),
        ("seed=3", "seed"),
    ):
        with pytest.raises(
            ConfigError, match=rf"^{re.escape(key)}: a sweep's cells are planned when it starts"
        ):
            resume_changes(index, [change])


def test_status_into_a_closed_pipe_ends_quietly(tmp_path, monkeypatch):
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    index = SweepIndex(name="s", launcher="basic", task_overrides=[], hydra_overrides=[], cells=[])
    write_index(tmp_path, index, parquet=False)
    monkeypatch.setattr(sys, "argv", ["drift-sweep", "status", str(tmp_path)])
    monkeypatch.setattr(sys, "stdout", ClosedPipe())  # `| head`, closed before the table
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # put back after main() guards it
    assert sweep_main() == 0  # not a BrokenPipeError traceback


def test_thread_rule_counts_the_cells_running_at_once_per_machine():
    def launcher(target: str, **kw: object) -> DictConfig:
        return OmegaConf.create({"_target_": target, **kw})

    cores = os.cpu_count() or 1
    basic = launcher("hydra._internal.core_plugins.basic_launcher.BasicLauncher")
    joblib = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
    local = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher"
    slurm = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert concurrent_workers(basic, 36) == 1
    assert concurrent_workers(launcher(joblib, n_jobs=2), 36) == 2
    assert concurrent_workers(launcher(joblib, n_jobs=8), 3) == 3  # never more than cells
    assert concurrent_workers(launcher(joblib, n_jobs=-1), 36) == cores
    assert concurrent_workers(launcher(local, array_parallelism=256), 4) == 4
    assert concurrent_workers(launcher(slurm, array_parallelism=256), 36) == 1


def test_replicates_expand_to_one_cell_each(capsys):
    assert replicate_override(["critic=lenient,strict", "replicates=3"]) == ["replicate=0,1,2"]
    assert replicate_override(["replicates=1"]) == []
    with pytest.raises(SystemExit):
        replicate_override(["replicates=1,3"])
    assert "replicates: must be a whole number" in capsys.readouterr().err


def test_replicates_without_m_is_one_line_in_run_and_plan(tmp_path, capsys, monkeypatch):
    """``harness.run experiment=debug replicates=3`` made one run, unsaid, and the plan
    planned one; both now refuse in one line before anything is made."""
    from harness.plan.cli import main as plan_main
    from harness.run import cli

    line = "error: replicates=3: makes 3 cells of a sweep, one run each; add -m\n"
    argv = ["experiment=debug", "replicates=3", f"runs_root={tmp_path / 'runs'}"]
    monkeypatch.setattr(sys, "argv", ["harness.run", *argv])
    for command in (cli, lambda: plan_main(argv)):
        with pytest.raises(SystemExit) as done:
            command()
        assert (done.value.code, capsys.readouterr().err) == (2, line)
    assert not (tmp_path / "runs").exists()

"""Cells of a sweep as threads of one process (``sweep.concurrency=N``).

One sweep through the real command line: every cell completes into the same
index, status and run folders as under the process launchers, each cell's
output lands in its own log, and a driver SIGKILLed with cells in flight
resumes (``python -m harness.sweep resume``) to every cell completed, with
every run verifying clean and no model call made twice (6 cells here; 64 in
the ``full`` tier). Against the provider simulator: a 429 storm ends with
every cell completed, and a dead provider fails each cell in one line, then
the sweep resumes once it is back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from omegaconf import OmegaConf, open_dict

from harness.formats.checks import verify
from harness.schema import ConfigError
from harness.store.rundir import read_manifest
from harness.sweep.concurrency import check_concurrency
from harness.sweep.index import read_index
from harness.sweep.launcher import launcher_overrides, uses_local_model

CELLS = ["llm.temperature=0.2,0.6,1.0", "replicates=2"]  # 6 cells
ARGS = ["model=scripted", "model.latency_s=0.05", "rounds=3", "progress=false", *CELLS]


def sweep(sweep_dir: Path, *extra: str, args: list[str] = ARGS) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness.run", "-m", *args, *extra, f"hydra.sweep.dir={sweep_dir}"]
    return subprocess.Popen(
        cmd,
        cwd=sweep_dir.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def cell_starts(sweep_dir: Path) -> int:
    """Cells started so far (read while the cell log is appended to: counted, not parsed)."""
    log = sweep_dir / "cells.jsonl"
    return log.read_text().count('"status":"running"') if log.exists() else 0


def replies(run_dir: Path) -> list[str]:
    return [json.loads(x)["id"] for p in run_dir.rglob("replies.jsonl") for x in p.read_text().splitlines()]


def replies_written(sweep_dir: Path) -> int:
    """Whole lines of every cell's reply logs, read while they are written (a last line
    may be half written; a run folder may be renamed into place under the glob)."""
    try:
        return sum(p.read_bytes().count(b"\n") for p in sweep_dir.glob("*/*/replies.jsonl"))
    except FileNotFoundError:
        return 0


def kill_when(sweep_dir: Path, args: list[str], ready: Callable[[], bool]) -> None:
    """Start the sweep and SIGKILL its driver (and nothing else) once ``ready()``."""
    driver = sweep(sweep_dir, args=args)
    deadline = time.monotonic() + 180
    while not ready() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.communicate(timeout=60)
    assert read_index(sweep_dir).launcher.endswith("InProcessLauncher")


def resume_to_the_end(sweep_dir: Path, cells: int, rounds: int) -> None:
    """``harness.sweep resume``, then: every cell completed, its records each kept once
    (``verify``: no id twice, no gap in the chain), each model call asked once (a reply
    kept before the kill replays; asked again it would be kept as ``….redo1``), and
    its log holding its own output only."""
    out = subprocess.run(
        [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)],
        cwd=sweep_dir.parent,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    index = read_index(sweep_dir)
    assert [c.status for c in index.cells] == ["completed"] * cells
    for cell in index.cells:
        run_dir = sweep_dir / cell.name
        assert verify(run_dir)[0] == [], cell.name
        manifest = read_manifest(run_dir)
        assert manifest.counts.rounds_completed == rounds
        kept = replies(run_dir)
        assert len(kept) == len(set(kept)) == manifest.counts.model_calls  # each call kept once
        assert not [r for r in kept if ".redo" in r], cell.name
        log = (run_dir / "cell.log").read_text()
        headers = [line for line in log.splitlines() if line.startswith("=== cell ")]
        assert headers and all(f"=== cell {cell.name} " in h for h in headers)  # no other cell's output


def test_cells_in_flight_in_one_process_survive_a_kill_and_resume(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    # the fifth start: four cells in flight, or finishing, when the driver dies
    kill_when(sweep_dir, [*ARGS, "sweep.concurrency=4"], lambda: cell_starts(sweep_dir) >= 5)
    resume_to_the_end(sweep_dir, cells=6, rounds=3)
    status = subprocess.run(
        [sys.executable, "-m", "harness.sweep", "status", str(sweep_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0 and "6 completed" in status.stdout


@pytest.mark.full
def test_64_cells_in_flight_survive_a_kill_and_resume(tmp_path: Path) -> None:
    """The driver dies with all 64 cells started and about a sixth of their calls
    answered; the resume replays what was kept and asks only the rest."""
    sweep_dir = tmp_path / "sweep"
    args = ["model=scripted", "model.latency_s=0.25", "rounds=2", "progress=false", "replicates=64"]

    def ready() -> bool:
        return cell_starts(sweep_dir) >= 64 and replies_written(sweep_dir) >= 128

    kill_when(sweep_dir, [*args, "sweep.concurrency=64"], ready)
    log = (sweep_dir / "cells.jsonl").read_text()
    assert log.count('"status":"completed"') <= 32  # most cells were in flight
    assert replies_written(sweep_dir) >= 128  # and had replies kept, to replay
    resume_to_the_end(sweep_dir, cells=64, rounds=2)


def test_sweep_concurrency_picks_the_launcher_and_is_checked_first() -> None:
    assert launcher_overrides(["-m", "rounds=2", "sweep.concurrency=64"]) == [
        "-m",
        "rounds=2",
        "hydra/launcher=inprocess",
        "hydra.launcher.concurrency=64",
    ]
    assert launcher_overrides(["rounds=2"]) == ["rounds=2"]
    for bad in ("0", "-3", "many", "1e9"):
        with pytest.raises(ConfigError, match=r"^sweep\.concurrency: must be a whole number from 1 to \d+"):
            launcher_overrides(["-m", f"sweep.concurrency={bad}"])
    with pytest.raises(ConfigError, match=r"^sweep\.concurrency: .*add -m$"):
        launcher_overrides(["sweep.concurrency=8"])
    with pytest.raises(ConfigError, match=r"^sweep\.concurrency: .*drop hydra/launcher=joblib"):
        launcher_overrides(["-m", "sweep.concurrency=2", "hydra/launcher=joblib"])
    assert check_concurrency(1) == 1
    # a sweep budget wants this launcher: asked for what is missing only (it said "add -m" under -m)
    for argv, missing in [
        (["budget.sweep_usd=1"], "add -m and sweep.concurrency=N"),
        (["-m", "budget.sweep_usd=1"], "add sweep.concurrency=N"),
    ]:
        with pytest.raises(ConfigError, match=rf"^budget\.sweep_usd: a sweep budget .*; {missing} \(or use"):
            launcher_overrides(argv)


def test_a_bad_concurrency_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.run",
            "-m",
            "model=scripted",
            "sweep.concurrency=0",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: sweep.concurrency: must be a whole number from 1 to 4096, got '0'"
    ]
    assert not (tmp_path / "sweep").exists()


def test_embedded_model_cells_take_turns() -> None:
    """A cell with any role on llama.cpp runs alone (it wants every core); API cells do not."""
    assert uses_local_model(OmegaConf.create({"model": {"spec": "local:smollm2"}, "roles": {}}))
    api = {"model": {"spec": "openai:gpt-4o-mini"}, "roles": {"critic": {"spec": None}}}
    assert not uses_local_model(OmegaConf.create(api))
    api["roles"]["critic"]["spec"] = "local:gemma3-270m"
    assert uses_local_model(OmegaConf.create(api))


def test_the_sweeper_composes_one_job_up_front_not_every_one() -> None:
    """At 1,000 cells, composing every job before the launch kept the first cell
    waiting minutes; each cell composes its own config when it starts, and the
    first takes the one the sweeper's check composed instead of composing it again."""
    from harness.sweep.launcher import CellConfigs, FirstJobValidation

    class Loader:
        calls: list[list[str]] = []

        def load_sweep_config(self, master_config, sweep_overrides):  # type: ignore[no-untyped-def]
            self.calls.append(sweep_overrides)
            return OmegaConf.create({"composed": sweep_overrides, "hydra": {}})

        def other(self) -> str:
            return "passed through"

    inner, master = Loader(), OmegaConf.create({})
    configs = CellConfigs(inner, master)
    lazy = FirstJobValidation(inner, configs)
    for n in range(1000):
        lazy.load_sweep_config(master, [f"seed={n}"])
    assert inner.calls == [["seed=0"]] and lazy.other() == "passed through"
    assert OmegaConf.to_container(configs.compose(["seed=0"])) == {"composed": ["seed=0"]}
    assert OmegaConf.to_container(configs.compose(["seed=1"])) == {"composed": ["seed=1"]}
    assert inner.calls == [["seed=0"], ["seed=1"]]  # seed=0 was not composed twice


def test_a_cell_whose_config_does_not_compose_fails_alone(tmp_path: Path) -> None:
    from harness.sweep.cell import SweepJob
    from harness.sweep.grid import plan_cells
    from harness.sweep.index import SweepIndex, read_index, write_index
    from harness.sweep.launcher import fail_cell

    cells = plan_cells(["llm.temperature=0.2,0.9"])
    write_index(
        tmp_path, SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=cells)
    )
    fail_cell(SweepJob(tmp_path, 1, cells[1].overrides), ValueError("Could not override 'llm.nokey'"))
    record = json.loads((tmp_path / "cells" / f"{cells[1].name}.json").read_text())
    assert (record["status"], record["exit_code"]) == ("failed", 2)
    assert "Could not override 'llm.nokey'" in record["error"]
    assert read_index(tmp_path).cells[0].status == "pending"


def test_a_completed_cell_skipped_takes_in_the_log_its_killed_launch_left_aside(tmp_path: Path, run) -> None:
    """A driver killed after a cell's run completed, before its log (kept in ``cells/``
    until the run folder exists) moved into the folder: the resume's skip moves it."""
    from harness.sweep.cell import SweepJob, pending_log, run_cell
    from harness.sweep.grid import plan_cells
    from harness.sweep.index import SweepIndex, write_index

    cells = plan_cells(["llm.temperature=0.2"])
    write_index(
        tmp_path, SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=cells)
    )
    done = run("rounds=1", f"runs_root={tmp_path}", f"run_name={cells[0].name}")
    pending = pending_log(tmp_path, cells[0].name)
    pending.parent.mkdir()
    pending.write_text("=== cell before the kill ===\n")

    def never(cfg: object) -> None:
        raise AssertionError("a completed cell is skipped, not run")

    run_cell(OmegaConf.create({"rounds": 1}), never, SweepJob(tmp_path, 0, cells[0].overrides))
    assert not pending.exists()
    assert (done.run_dir / "cell.log").read_text() == "=== cell before the kill ===\n"
    record = json.loads((tmp_path / "cells" / f"{cells[0].name}.json").read_text())
    assert (record["status"], record["action"]) == ("completed", "skip")


def test_a_copied_cell_config_equals_what_hydra_composes(tmp_path: Path) -> None:
    """``CellConfigs`` composes once per shape of cell and copies with values set:
    every cell's config must equal Hydra's own composition of its overrides."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from harness.paths import conf_dir
    from harness.sweep.launcher import CellConfigs

    grid = [
        [f"model={model}", f"llm.temperature={t}", f"replicate={r}", "topic.text='a b: c'", f"rounds={n}"]
        for model in ("scripted", "openai")
        for t in (0.2, 1.0)
        for r in (0, 3)
        for n in (2, 5)
    ]
    grid += [
        ["critic=strict", "+llm.extra=1"],
        ["model=openai", "model.kwargs.base_url=http://127.0.0.1:9/v1"],
    ]
    # a value equal to the one its shape was composed with, but of another type; a key set twice
    grid += [["model=scripted", f"llm.temperature={t}", "rounds=2"] for t in ("1", "1.0", "1", "true")]
    grid += [["model=scripted", f"rounds={a}", f"rounds={b}"] for a, b in ((2, 5), (5, 2), (7, 5), (2, 5))]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = compose(config_name="config", overrides=["critic=lenient"], return_hydra_config=True)
        configs = CellConfigs(loader, master)
        for overrides in grid:
            want = loader.load_sweep_config(master, overrides)
            with open_dict(want):
                del want["hydra"]
            # as YAML: 1, 1.0 and true are equal in Python
            assert OmegaConf.to_yaml(configs.compose(overrides)) == OmegaConf.to_yaml(want), overrides
    assert len(configs.shapes) == 5  # the grid's two model choices, three more shapes; '+' composes in full


def api_sweep(sweep_dir: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """An in-process sweep of ``model=openai`` cells (the real client) against ``base_url``."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.run",
            "-m",
            "model=openai",
            "model.spec=openai:sim-model",
            f"model.kwargs.base_url={base_url}",
            "rounds=1",
            "progress=false",
            *extra,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=sweep_dir.parent,
        env={**os.environ, "OPENAI_API_KEY": "sk-sweep"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def status_of(sweep_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.sweep", "status", str(sweep_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ledger(sweep_dir: Path) -> tuple[int, int]:
    """(model calls, tokens) over every cell's manifest: the harness's own count."""
    counts = [read_manifest(d).counts for d in sweep_dir.iterdir() if (d / "manifest.json").is_file()]
    return sum(c.model_calls for c in counts), sum(c.input_tokens + c.output_tokens for c in counts)


@pytest.mark.network_loopback
def test_a_429_storm_completes_every_cell_and_the_limiter_keeps_its_changes(tmp_path: Path) -> None:
    """Eight API cells in flight, asking as fast as they can, against a provider
    allowing 8 requests a second: every cell completes, nothing is billed that the
    harness did not keep, the limiter they share cuts its limit on the 429s, and
    each change lands in the sweep's ``limits.jsonl``, which ``status`` reads back."""
    from provider_sim import ProviderSim

    sweep_dir = tmp_path / "sweep"
    with ProviderSim(rpm=8, window_s=1.0) as sim:
        out = api_sweep(
            sweep_dir,
            sim.base_url,
            "replicates=8",
            "sweep.concurrency=8",
            "retry.max_attempts=8",
            "retry.initial_s=0.05",
            "retry.max_s=0.2",
        )
        billed = sim.billing("sk-sweep")
    assert out.returncode == 0, out.stderr[-2000:]
    assert [c.status for c in read_index(sweep_dir).cells] == ["completed"] * 8
    assert billed.rate_limited >= 8  # a storm: refusals, not a queue
    assert ledger(sweep_dir) == (billed.billed_requests, billed.total_tokens)  # no call paid twice
    changes = [json.loads(line) for line in (sweep_dir / "limits.jsonl").read_text().splitlines()]
    assert any(c["reason"] == "429" and c["new"] < c["old"] for c in changes)
    assert "sk-sweep" not in (sweep_dir / "limits.jsonl").read_text()  # a hash of the key, never the key
    status = status_of(sweep_dir)
    (line,) = [x for x in status.stdout.splitlines() if x.startswith("limiter ")]
    assert "cut(s) on 429" in line and "8 completed" in status.stdout


@pytest.mark.network_loopback
def test_a_dead_provider_fails_each_cell_in_one_line_and_the_sweep_resumes(tmp_path: Path) -> None:
    """The provider's port refuses: each cell fails with one line naming the
    connection error; once the provider is back on that port the sweep resumes
    to every cell completed, billed exactly what the harness kept."""
    from provider_sim import ProviderSim

    sweep_dir = tmp_path / "sweep"
    with ProviderSim() as sim:
        base_url = sim.base_url
    port = urlsplit(base_url).port  # nothing listens there now: connections are refused
    out = api_sweep(
        sweep_dir,
        base_url,
        "llm.temperature=0.2,0.6,1.0",
        "sweep.concurrency=3",
        "retry.max_attempts=2",
        "retry.initial_s=0.05",
        "retry.max_s=0.1",
    )
    assert out.returncode == 1
    cells = read_index(sweep_dir).cells
    assert [c.status for c in cells] == ["failed"] * 3
    for cell in cells:
        assert cell.error and "\n" not in cell.error and "connection" in cell.error.lower(), cell.error
        assert (sweep_dir / cell.name / "manifest.json").is_file()  # a run folder to resume
    table = status_of(sweep_dir).stdout.splitlines()
    assert [line.split()[1] for line in table[1:4]] == ["failed"] * 3
    with ProviderSim(port=port) as sim:
        resumed = subprocess.run(
            [sys.executable, "-m", "harness.sweep", "resume", str(sweep_dir)],
            cwd=tmp_path,
            env={**os.environ, "OPENAI_API_KEY": "sk-sweep"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        billed = sim.billing("sk-sweep")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert [c.status for c in read_index(sweep_dir).cells] == ["completed"] * 3
    assert ledger(sweep_dir) == (billed.billed_requests, billed.total_tokens)


def test_ended_cells_garbage_is_collected_a_wave_at_a_time_while_cells_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under fewer_collections no collection reaches an ended cell's cyclic garbage
    (its config, graph and logs) before the sweep's end: EndedCells collects once as
    many cells have ended as run at once (at least ``least``), while more are queued."""
    import gc

    from harness.sweep.launcher import EndedCells

    collected: list[int] = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or 0)
    ended = EndedCells(least=4)
    for _ in range(3):
        ended(1, 2, True)  # 3 of the 4 a wave needs
    assert collected == []
    ended(1, 2, True)
    assert collected == [1]
    ended(8, 8, True)  # a wave of 8 when 8 run at once
    assert collected == [1, 1]
    ended(9, 8, False)  # nothing queued: the exit frees it, no pause for the cells left
    assert collected == [1, 1]

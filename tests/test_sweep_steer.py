"""Steering a running in-process sweep (``python -m harness.sweep ctl``, issue 38).

Against the provider simulator with the real client: a sweep started at
``sweep.concurrency=4`` is raised to 16 cells in flight; paused, the
simulator gets no call beyond those in flight at the pause; a cell held at
the pause is cancelled (left interrupted) and requeued; after ``resume``
every cell completes with the transcripts of a sweep never paused. On the
priced scripted model, a raised ``budget.sweep_usd`` lets a sweep that was
about to stop go on, never past the new limit, and the same sweep paused and
killed resumes like any sweep. Bad commands, a driver that is not running and
a process launcher's sweep are each one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
from provider_sim import ProviderSim

from harness.engine import RunResult
from harness.sweep.cell_status import CellRecord, read_cell_record, write_cell_record
from harness.sweep.commands import main as sweep_main
from harness.sweep.configs import CellConfigs
from harness.sweep.control import (
    ControlEntry,
    ControlError,
    ControlLog,
    append_entry,
    check_command,
    driver_lock,
    send,
)
from harness.sweep.index import SweepIndex, read_index, write_index
from harness.sweep.steer import Steering

API = ["model=openai", "model.spec=openai:sim-model", "rounds=1", "progress=false"]
PRICED = [
    "model=scripted",
    "model.latency_s=0.15",
    "rounds=2",
    "progress=false",
    r"prices.models={scripted\:default:{input:1000,output:1000}}",
]


_STARTED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    """A failed test leaves no sweep of its own running (they start in sessions of their own)."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start(sweep_dir: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "harness.run", "-m", *args, f"hydra.sweep.dir={sweep_dir}"]
    _STARTED.append(_popen(cmd, sweep_dir, env))
    return _STARTED[-1]


def _popen(cmd: list[str], sweep_dir: Path, env: dict[str, str] | None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cmd,
        cwd=sweep_dir.parent,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def until(ready: Callable[[], bool], driver: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert driver.poll() is None, driver.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def ctl(sweep_dir: Path, *words: str) -> str:
    effect = send(sweep_dir, list(words))
    assert effect is not None and effect.ok, effect
    return effect.detail


def running(sweep_dir: Path) -> set[str]:
    cells = [p.stem for p in (sweep_dir / "cells").glob("*.json")] if (sweep_dir / "cells").is_dir() else []
    return {c for c in cells if (r := read_cell_record(sweep_dir, c)) is not None and r.status == "running"}


def transcripts(sweep_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """Every cell's kept replies, (id, text), in id order."""
    out = {}
    for cell in read_index(sweep_dir).cells:
        lines = [json.loads(x) for p in (sweep_dir / cell.name).rglob("replies.jsonl") for x in p.open()]
        out[cell.name] = sorted((r["id"], r["text"]) for r in lines)
    return out


def sent(sim: ProviderSim) -> int:
    """Requests the steered sweep sent (the plain one asks with another key)."""
    return sum(c.key == "sk-steer" for c in sim.calls)


@pytest.mark.network_loopback
def test_raise_pause_cancel_requeue_and_resume_on_the_simulator(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-steer"}
    with ProviderSim(latency_s=0.3) as sim:
        args = [*API, f"model.kwargs.base_url={sim.base_url}", "replicates=16"]
        plain = start(tmp_path / "plain", [*args, "sweep.concurrency=16"], {"OPENAI_API_KEY": "sk-plain"})
        steered_dir = tmp_path / "steered"
        driver = start(steered_dir, [*args, "sweep.concurrency=4"], env)
        until(lambda: len(running(steered_dir)) == 4, driver)
        assert "sweep.concurrency 4 -> 16" in ctl(steered_dir, "set", "sweep.concurrency=16")
        until(lambda: len(running(steered_dir)) == 16, driver)  # 16 cells in flight at once

        assert "paused every model call and every cell start; quiet" in ctl(steered_dir, "pause")
        at_pause, held = sent(sim), running(steered_dir)  # the calls sent before the pause returned
        time.sleep(1.0)
        assert sent(sim) == at_pause  # nothing sent while paused

        victim = sorted(held)[0]
        ctl(steered_dir, "cancel", victim)  # held at the gate: stopped there, no call made
        until(lambda: victim not in running(steered_dir), driver)
        assert read_cell_record(steered_dir, victim).status == "interrupted"  # type: ignore[union-attr]
        ctl(steered_dir, "requeue", victim)
        assert plain.wait(timeout=120) == 0, plain.communicate()[1][-2000:]
        assert sent(sim) == at_pause

        assert "resumed (*)" in ctl(steered_dir, "resume")
        assert driver.wait(timeout=120) == 0, driver.communicate()[1][-2000:]
    assert [c.status for c in read_index(steered_dir).cells] == ["completed"] * 16
    assert transcripts(steered_dir) == transcripts(tmp_path / "plain")
    effects = [e for e in ControlLog(steered_dir).read() if e.kind == "effect"]
    assert [e.words[0] for e in effects] == ["set", "pause", "cancel", "requeue", "resume"]
    assert effects[0].concurrency == 16 and effects[1].paused == ["*"] and effects[-1].paused == []
    assert oct((steered_dir / "control.jsonl").stat().st_mode & 0o777) == "0o600"


def test_a_raised_budget_lets_a_stopping_sweep_go_on_and_a_killed_paused_one_resumes(
    tmp_path: Path,
) -> None:
    """Each cell costs about $2: $3 stops the second; raised to $7.5 while the second
    runs (held by a pause), the sweep goes on to a third cell. Paused and killed there, the kernel drops
    the driver's lock (ctl then says the driver is not running), and ``resume`` runs the
    killed cell to the end and stops at the new limit, never past it."""
    import signal

    sweep_dir = tmp_path / "sweep"
    driver = start(sweep_dir, [*PRICED, "replicates=4", "sweep.concurrency=1", "budget.sweep_usd=3"])
    first = lambda: (r := read_cell_record(sweep_dir, "rep-0")) is not None and r.status != "running"  # noqa: E731
    until(first, driver)
    # paused while ctl makes the cells' configs to check their prices (a second): the
    # second cell, $2 a cell, would pass $3 sooner
    ctl(sweep_dir, "pause")
    assert "budget.sweep_usd $3 -> $7.5" in ctl(sweep_dir, "set", "budget.sweep_usd=7.5")
    ctl(sweep_dir, "resume")
    until(lambda: "rep-2" in running(sweep_dir), driver)  # past $3: the raise let it go on
    ctl(sweep_dir, "pause")
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait(timeout=60)
    with pytest.raises(ControlError, match="driver not running"):
        send(sweep_dir, ["resume"])
    assert sweep_main(["resume", str(sweep_dir), "budget.sweep_usd=7.5"]) == 1  # rep-3 stopped by $7.5
    cells = read_index(sweep_dir).cells
    assert [c.status for c in cells[:3]] == ["completed"] * 3 and cells[3].status == "interrupted"
    assert 3 < sum(c.cost_usd or 0.0 for c in cells) <= 7.5
    again = (
        f"raise it and resume: python -m harness.sweep resume {sweep_dir.resolve()} budget.sweep_usd=<more>"
    )
    assert again in (sweep_dir / "rep-3" / "cell.log").read_text()  # the key that stopped it, not budget.usd

    from harness.view.static import export_static  # the finished sweep, shared as a folder of pages

    export_static(sweep_dir, tmp_path / "pages")
    page = (tmp_path / "pages" / "sweep.html").read_text()
    assert page.count("data-cell=") == 4 and "<svg" in page and "live-refresh" not in page
    assert 'href="runs/rep-0/page-1.html"' in page and (tmp_path / "pages/runs/rep-0/page-1.html").is_file()


def test_a_sweep_budget_that_refuses_a_call_starts_no_more_cells(tmp_path: Path) -> None:
    """A cell costs about $2: $1 stops the first mid-run. The three queued behind it used
    to start anyway, each opening its folder only to stop before its first call; they stay
    pending (no folder), one line says why and how to go on, and that resume completes them.
    The stopped cell's note in the table is its stop reason (it was empty)."""
    sweep_dir = tmp_path / "sweep"
    priced = [a for a in PRICED if not a.startswith("model.latency_s")]
    driver = start(sweep_dir, [*priced, "replicates=4", "sweep.concurrency=1", "budget.sweep_usd=1"])
    _, err = driver.communicate(timeout=120)
    cells = read_index(sweep_dir).cells
    assert [c.status for c in cells] == ["interrupted", *["pending"] * 3]
    assert (cells[0].error or "").startswith("budget: $")  # the table's note says why it stopped
    assert not (sweep_dir / "rep-1").exists()
    go_on = f"python -m harness.sweep resume {sweep_dir.resolve()} budget.sweep_usd=<more>"
    assert "[sweep] 3 cell(s) left pending: the sweep budget stopped its cells (budget: $" in err
    assert go_on in err
    assert sweep_main(["resume", str(sweep_dir), "budget.sweep_usd=100"]) == 0
    assert {c.status for c in read_index(sweep_dir).cells} == {"completed"}


def test_the_gate_holds_an_endpoint_or_every_call_and_lets_a_stop_through() -> None:
    import threading

    from harness.runtime.gate import Gate
    from harness.runtime.interrupt import RunStopped, request_stop_of, stoppable_as

    gate = Gate()
    gate.hold("openai")
    gate.wait("scripted:default")  # another provider goes on
    assert gate.holds("openai:gpt-4o-mini") and not gate.holds("anthropic:claude")
    passed = threading.Event()
    waiter = threading.Thread(target=lambda: (gate.wait("openai:m"), passed.set()))
    waiter.start()
    time.sleep(0.3)
    assert not passed.is_set() and gate.waiting == 1
    gate.release()
    waiter.join(5)
    assert passed.is_set()

    gate.hold()
    with stoppable_as("cell-a"):
        request_stop_of("cell-a", "cancelled")
        with pytest.raises(RunStopped, match="cancelled"):
            gate.wait("scripted:default")  # a held call of a cancelled cell ends, no call made


def test_bad_commands_and_unreachable_drivers_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    index = {
        "name": "s",
        "launcher": "hydra_plugins.x.JoblibLauncher",
        "task_overrides": [],
        "hydra_overrides": [],
    }
    (sweep_dir / "sweep.json").write_text(json.dumps({**index, "cells": []}))
    for words, message in [
        (["set", "sweep.concurrency=0"], "sweep.concurrency: must be a whole number"),
        (["set", "budget.sweep_usd=-1"], "budget.sweep_usd: a number of dollars above 0"),
        (["set", "llm.temperature=1"], "set: one of"),
        (["fly"], "usage:"),
        (["pause"], "runs on JoblibLauncher, which ctl cannot steer"),
    ]:
        assert sweep_main(["ctl", str(sweep_dir), *words]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (sweep_dir / "control.jsonl").exists()  # nothing was sent
    index["launcher"] = "harness.sweep.launcher.InProcessLauncher"
    (sweep_dir / "sweep.json").write_text(json.dumps({**index, "cells": []}))
    with pytest.raises(
        ControlError, match="driver not running; continue with: python -m harness.sweep resume"
    ):
        send(sweep_dir, ["resume"])


def test_a_command_sent_as_the_driver_ends_says_so_at_once(tmp_path: Path) -> None:
    """The driver lets go of its lock without reading the command (the sweep ended as it
    came): ctl says so at once, not 'the driver did not answer' after seconds of waiting."""
    index = {"name": "s", "launcher": "harness.sweep.launcher.InProcessLauncher"}
    (tmp_path / "sweep.json").write_text(
        json.dumps({**index, "task_overrides": [], "hydra_overrides": [], "cells": []})
    )
    held, sent_at = threading.Event(), time.monotonic()

    def ending_driver() -> None:
        with driver_lock(tmp_path, "InProcessLauncher"):
            held.set()
            time.sleep(0.3)

    driver = threading.Thread(target=ending_driver)
    driver.start()
    held.wait()
    with pytest.raises(
        ControlError, match="the driver ended before it read this command, so nothing changed"
    ):
        send(tmp_path, ["pause"], answer_s=3)
    driver.join()
    assert time.monotonic() - sent_at < 2


def test_requeue_takes_a_failed_cell_and_refuses_a_completed_one(tmp_path: Path) -> None:
    import threading

    from harness.sweep.grid import Cell
    from harness.sweep.steer import Steering

    cells = [Cell(num=n, name=f"c{n}", overrides=[f"seed={n}"], params={}) for n in range(2)]
    (tmp_path / "sweep.json").write_text(
        json.dumps(
            {
                "name": "s",
                "launcher": "x",
                "task_overrides": [],
                "hydra_overrides": [],
                "cells": [c.model_dump() for c in cells],
            }
        )
    )
    write_cell_record(tmp_path, "c0", CellRecord(status="failed", exit_code=1, error="boom"))
    write_cell_record(tmp_path, "c1", CellRecord(status="completed", exit_code=0))
    steering = Steering(tmp_path, 2, threading.Event())
    assert steering.do_requeue("c0", "") == (True, "requeued c0 (failed); 0 cell(s) in flight, 1 queued")
    assert steering.do_requeue("c0", "")[0] is False  # already queued
    assert steering.do_requeue("c1", "") == (
        False,
        "requeue: c1 is completed; only a failed or interrupted cell goes back",
    )
    assert list(steering.queue) == [(0, ["seed=0"])]
    steering.queue.clear()
    steering.stopped.set()  # Ctrl-C: the cells in flight wind down, none starts
    assert steering.do_requeue("c0", "")[1].startswith("requeue: the sweep is stopping (Ctrl-C or SIGTERM)")
    assert not steering.queue
    steering.stopped.clear()

    steering.queue.clear()
    steering.cancelled.add("c0")  # cancelled, still winding down: its record may say interrupted already
    assert steering.do_requeue("c0", "")[0] and not steering.queue
    steering.ended("c0")  # its future is done: back in the queue
    assert list(steering.queue) == [(0, ["seed=0"])]


def test_set_reaches_live_limiters_shared_budgets_and_the_next_cells_config(tmp_path: Path) -> None:
    """``set budget.sweep_tokens`` (was refused: no sweep-wide cap for an unpriced model)
    takes the shared budget's token limit at once, as ``budget.sweep_usd`` its dollars."""
    import threading

    from omegaconf import OmegaConf

    from harness.models.limiter import key_for, limiter_for, reset_limiters
    from harness.runtime.budget import BudgetExhausted, forget_sweep_budgets, in_sweep_budget
    from harness.sweep.steer import Steering

    (tmp_path / "sweep.json").write_text(
        json.dumps({"name": "s", "launcher": "x", "task_overrides": [], "hydra_overrides": [], "cells": []})
    )
    steering = Steering(tmp_path, 2, threading.Event())
    reset_limiters()
    limiter = limiter_for(key_for("openai", None, "sk", "m"), initial=8, maximum=64)
    assert steering.do_set("model.max_concurrency", "4")[0]
    assert (limiter.maximum, limiter.limit) == (4, 4)  # the ceiling at once, the limit under it
    reset_limiters()

    forget_sweep_budgets()
    with in_sweep_budget(str(tmp_path.resolve()), 1.0, None, lambda: (0.9, 90)) as budget:
        with pytest.raises(BudgetExhausted):
            budget.reserve(0.2, 0)  # $0.90 spent of $1: the next $0.20 call could cross it
        ok, detail = steering.do_set("budget.sweep_usd", "2")
        assert ok and detail == "budget.sweep_usd $1 -> $2 (spent $0.9000)"
        budget.reserve(0.2, 0)  # now it fits
        # a token cap, the one an unpriced model takes, on the same budget: checked as sent
        assert check_command(["set", "budget.sweep_tokens=100"]) == ("set", "budget.sweep_tokens", "100")
        for bad in ("0", "1.5", "-3", "1e3"):
            with pytest.raises(ControlError, match=r"^budget.sweep_tokens: a whole number of tokens above 0"):
                check_command(["set", f"budget.sweep_tokens={bad}"])
        assert steering.do_set("budget.sweep_tokens", "100") == (
            True,
            "budget.sweep_tokens none -> 100 (used 90 tokens)",  # counted from the runs' ledgers
        )
        with pytest.raises(BudgetExhausted, match=r"^budget: 90 of budget.sweep_tokens=100 spent"):
            budget.reserve(0.0, 20)
        assert (
            steering.do_set("budget.sweep_tokens", "1000")[1]
            == "budget.sweep_tokens 100 -> 1000 (used 90 tokens)"
        )
        budget.reserve(0.0, 20)  # raised: the sweep goes on
        assert (budget.usd, budget.tokens) == (2.0, 1000)  # each set keeps the other limit
    forget_sweep_budgets()

    cfg = OmegaConf.create({"model": {"concurrency": 8, "max_concurrency": 64}, "budget": {"sweep_usd": 1.0}})
    steering.configure(cfg)  # a cell starting now gets what was set
    assert (cfg.model.max_concurrency, cfg.model.concurrency, cfg.budget.sweep_usd) == (4, 4, 2.0)
    assert cfg.budget.sweep_tokens == 1000


def test_a_sweep_budget_of_0_or_less_is_one_line_before_any_cell_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``harness.run -m`` and ``harness.sweep resume`` (which relaunches it with the
    change) refuse it in the command line's check, naming the key, exit 2."""
    from harness.run import checked_argv
    from harness.sweep.index import SweepIndex, relaunch_command

    index = SweepIndex(
        name="s",
        launcher="harness.sweep.launcher.InProcessLauncher",
        task_overrides=["replicates=2", "budget.sweep_usd=5"],
        hydra_overrides=["hydra/launcher=inprocess", "hydra.launcher.concurrency=2"],
        cells=[],
    )
    for argv, key, bad in [
        (["-m", "replicates=2", "sweep.concurrency=2", "budget.sweep_usd=-1"], "budget.sweep_usd", "-1"),
        (["-m", "replicates=2", "sweep.concurrency=2", "budget.sweep_usd=0"], "budget.sweep_usd", "0"),
        (
            ["-m", "replicates=2", "sweep.concurrency=2", "+budget.sweep_tokens=1.5"],
            "budget.sweep_tokens",
            "1.5",
        ),
        (relaunch_command(tmp_path, index, ["budget.sweep_usd=-1"])[4:], "budget.sweep_usd", "-1"),
    ]:
        with pytest.raises(SystemExit) as stop:
            checked_argv(argv)
        assert stop.value.code == 2
        assert capsys.readouterr().err == f"error: {key}: must be a number > 0 (or null: none), got '{bad}'\n"
    checked_argv(["-m", "sweep.concurrency=2", "budget.sweep_usd=0.5", "budget.sweep_tokens=1000"])
    checked_argv(relaunch_command(tmp_path, index, ["budget.sweep_usd=null"])[4:])


def test_a_budget_stop_says_which_key_to_raise_and_where() -> None:
    from harness.runtime.budget import Budget, BudgetExhausted, go_on_past

    cell = Path("sweeps/s/rep-0")
    for budget, again in [
        (Budget("budget.sweep_", usd=1.0), "python -m harness.sweep resume sweeps/s budget.sweep_usd=<more>"),
        (
            Budget("budget.sweep_", tokens=10),
            "python -m harness.sweep resume sweeps/s budget.sweep_tokens=<more>",
        ),
        (Budget("budget.", usd=1.0), "python -m harness.resume sweeps/s/rep-0 budget.usd=<more>"),
        (Budget("budget.", tokens=10), "python -m harness.resume sweeps/s/rep-0 budget.tokens=<more>"),
    ]:
        with pytest.raises(BudgetExhausted) as stop:
            budget.reserve(2.0, 20)
        assert go_on_past(str(stop.value), cell) == again


def test_a_budget_set_on_a_sweep_started_without_one_holds_the_cells_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell running when ``set budget.sweep_usd`` lands is held by it at its next
    call; the budget is charged with what the sweep's runs had spent before it."""
    import threading

    import harness.sweep.steer as steer
    from harness.engine.execute import run_budgets
    from harness.runtime.budget import BudgetExhausted, forget_sweep_budgets
    from harness.schema import Config

    (tmp_path / "sweep.json").write_text(
        json.dumps({"name": "s", "launcher": "x", "task_overrides": [], "hydra_overrides": [], "cells": []})
    )
    # the runs' ledgers: $0.50 spent by an earlier driver, and the $0.30 call below
    monkeypatch.setattr(steer, "spent_in", lambda sweep_dir: (0.8, 80), raising=False)
    forget_sweep_budgets()
    steering = steer.Steering(tmp_path, 2, threading.Event())

    def cell(num: int, overrides: list[str]) -> None:
        budgets = run_budgets(Config(), tmp_path / "c0")  # made as the cell's run starts
        with budgets.call(0.3, 30) as held:
            held.pay(0.3, 30)
        assert steering.do_set("budget.sweep_usd", "1") == (
            True,
            "budget.sweep_usd none -> $1 (spent $0.8000)",
        )
        with pytest.raises(BudgetExhausted, match=r"budget.sweep_usd=\$1 spent"), budgets.call(0.3, 30):
            pass  # $0.80 + $0.30 could cross $1: not made
        with budgets.call(0.15, 15) as held:  # fits
            held.pay(0.15, 15)

    steering._run(cell, "c0", 0, [])
    assert (steering.budget.spent_usd, steering.budget.spent_tokens) == (pytest.approx(0.95), 95)
    forget_sweep_budgets()


def test_a_call_held_by_a_pause_is_checked_again_against_a_budget_lowered_meanwhile(
    run: Callable[..., RunResult], tmp_path: Path
) -> None:
    """A cell's call reserves its worst case and is held at the paused gate; ``set
    budget.sweep_usd`` lowers the limit under it. Once the pause ends the call is checked
    again and not sent: the run stops before it, by budget (it was sent, one call per
    cell past the new limit, on the reservation made before the pause)."""
    from harness.runtime.budget import charged_to, forget_sweep_budgets, open_sweep_budget, set_sweep_usd
    from harness.runtime.gate import gate
    from harness.store.reader import replies

    forget_sweep_budgets()
    name = str(tmp_path.resolve())
    budget = open_sweep_budget(name, lambda: (0.0, 0))  # as the driver opens it, with no limit
    done: list[RunResult] = []

    def cell() -> None:
        with charged_to(budget):
            done.append(run("rounds=1", "run_name=cell", PRICED[-1]))

    thread = threading.Thread(target=cell)
    gate().hold()  # ctl pause
    try:
        thread.start()
        deadline = time.monotonic() + 30
        while gate().waiting == 0:  # its first call reserved, and waits at the gate
            assert thread.is_alive() and time.monotonic() < deadline, "no call reached the gate"
            time.sleep(0.01)
        assert budget._held_usd > 0.001
        assert set_sweep_usd(name, 0.001) == (None, 0.0)  # ctl set budget.sweep_usd=0.001
    finally:
        gate().release()  # ctl resume
        thread.join(30)
        forget_sweep_budgets()
    manifest = done[0].manifest
    assert manifest.status == "interrupted"
    assert (manifest.stop_reason or "").startswith("budget: $0.0000 of budget.sweep_usd=$0.001 spent")
    assert list(replies(done[0].run_dir)) == []  # the held call was never sent
    assert (budget.spent_usd, budget._held_usd) == (0.0, 0.0)


def sweep_folder(sweep_dir: Path, cells: list[list[str]]) -> CellConfigs:
    """The folder a driver of these cells made (its ``multirun.yaml`` as Hydra writes it)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from harness.paths import conf_dir

    sweep_dir.mkdir()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        master = hydra.compose_config("config", ["experiment=debug"], run_mode=RunMode.MULTIRUN)
        OmegaConf.save(master, sweep_dir / "multirun.yaml")
        configs = CellConfigs(hydra.config_loader, master)
        [configs.compose(overrides) for overrides in cells]  # composed now, while Hydra is up
    rows = [{"num": n, "name": f"c{n}", "overrides": o, "params": {}} for n, o in enumerate(cells)]
    launcher = "hydra_plugins.drift_harness_launcher.InProcessLauncher"
    index = {"name": "s", "launcher": launcher, "task_overrides": [], "hydra_overrides": [], "cells": rows}
    (sweep_dir / "sweep.json").write_text(json.dumps(index))
    return configs


def test_a_model_key_no_cell_has_is_refused_unsent_and_skipped_where_a_cell_lacks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``set model.max_concurrency`` on a scripted sweep would fail every later cell
    (its model config has no such key): one line naming the key, nothing appended. A
    sweep of a scripted and an OpenAI cell takes it, set in the OpenAI cell's config only."""
    from harness.sweep.control import check_model_key

    scripted = tmp_path / "scripted"
    sweep_folder(scripted, [["experiment=debug", f"replicate={n}", "replicates=3"] for n in range(3)])
    with driver_lock(scripted, "InProcessLauncher"):
        assert sweep_main(["ctl", str(scripted), "set", "model.max_concurrency=3"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: model.max_concurrency: no cell of this sweep has it in its model config "
        "(scripted:default); nothing sent\n"
    )
    assert (scripted / "control.jsonl").read_text() == ""  # nothing was sent

    mixed = tmp_path / "mixed"
    cells = [["experiment=debug", "model=scripted"], ["experiment=debug", "model=openai"]]
    configs = sweep_folder(mixed, cells)
    check_model_key(mixed, "model.max_concurrency")  # the OpenAI cell has it: no error
    steering = Steering(mixed, 2, threading.Event())
    steering.overrides["model.max_concurrency"] = 3  # as ctl set it
    scripted_cfg, openai_cfg = (configs.compose(o) for o in cells)  # as the driver makes each cell's
    steering.configure(scripted_cfg)  # no KeyError: the scripted cell starts as it was
    steering.configure(openai_cfg)
    assert "max_concurrency" not in scripted_cfg.model
    assert (openai_cfg.model.max_concurrency, openai_cfg.model.concurrency) == (3, 3)


def test_a_pause_of_an_endpoint_no_cell_calls_is_refused_unsent(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``pause openai`` on a scripted sweep said 'paused calls to openai' and held nothing."""
    sweep_dir = tmp_path / "s"
    sweep_folder(sweep_dir, [["experiment=debug", "llm.temperature=0.2"]])
    with driver_lock(sweep_dir, "InProcessLauncher"):
        assert sweep_main(["ctl", str(sweep_dir), "pause", "openai"]) == 2
        assert capsys.readouterr().err.startswith(
            "error: pause openai: no cell of this sweep calls it (its models: scripted:default); "
        )
        assert (sweep_dir / "control.jsonl").read_text() == ""  # nothing was sent
        for endpoint in ("scripted", "scripted:default"):  # its provider, its model: sent (no driver answers)
            assert send(sweep_dir, ["pause", endpoint], answer_s=0.05) is None
    assert (sweep_dir / "control.jsonl").read_text().count('"pause"') == 2


def test_a_dollar_limit_on_a_model_with_no_price_is_refused_unsent_naming_the_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``set budget.sweep_usd`` where a cell's model has no price: its calls cost unknown,
    so the limit never held the cells running, and every cell started after failed at its
    start (a dollar budget fails closed on an unpriced model). One line naming the model,
    its cells when only some run it, the token cap that needs no price (sent), and the keys
    that price it with what a price costs the started cells (a resume with --force: was
    left unsaid); nothing sent. Free (scripted) and priced models take it, and a completed
    cell spends no more."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    unpriced = ["experiment=debug", "model=openai", "model.spec=openai:no-price"]
    every = tmp_path / "every"
    sweep_folder(every, [[*unpriced, f"replicate={n}", "replicates=2"] for n in range(2)])
    with driver_lock(every, "InProcessLauncher"):
        assert sweep_main(["ctl", str(every), "set", "budget.sweep_usd=1"]) == 2
    assert capsys.readouterr().err == (
        "error: budget.sweep_usd: openai:no-price has no price, so a dollar limit would never hold the cells; "
        "cap them with budget.sweep_tokens=N instead (it needs no price), or price it with "
        "prices.models={openai\\:no-price:{input:<$/1M>,output:<$/1M>}} or prices.file (docs/costs.md), "
        "which a cell started already takes only on a resume with --force (its fingerprint holds its prices); "
        "nothing sent\n"
    )
    assert (every / "control.jsonl").read_text() == ""  # nothing was sent
    with driver_lock(every, "InProcessLauncher"):  # the token cap it names is sent (no driver here answers)
        assert send(every, ["set", "budget.sweep_tokens=1000"], answer_s=0.05) is None
    assert '"budget.sweep_tokens=1000"' in (every / "control.jsonl").read_text()

    from harness.sweep.control import check_priced

    mixed = tmp_path / "mixed"
    free, priced = ["experiment=debug"], ["experiment=debug", "model=openai", "model.spec=openai:gpt-4o-mini"]
    sweep_folder(mixed, [free, priced, unpriced])
    with pytest.raises(
        ControlError, match=r"openai:no-price \(cells c2 of the 3 left to run\) has no price, "
    ):
        check_priced(mixed)
    write_cell_record(mixed, "c2", CellRecord(status="completed", exit_code=0))
    check_priced(mixed)  # the unpriced cell is done; the free and the priced ones are held


def test_a_command_sent_once_the_lock_is_held_reaches_the_driver(tmp_path: Path) -> None:
    """The index callback takes driver.lock before the launcher starts reading the
    control log; `ctl … --wait` sends as soon as the lock is held, and that command
    is this driver's (it was skipped, and ctl said 'the driver did not answer')."""
    write_index(tmp_path, SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=[]))
    append_entry(tmp_path, ControlEntry(kind="command", id="old", words=["pause"]))  # to an earlier driver
    with driver_lock(tmp_path, "test"):
        append_entry(tmp_path, ControlEntry(kind="command", id="new", words=["pause"]))
        steering = Steering(tmp_path, 1, threading.Event())
        assert [entry.id for entry in steering.log.read()] == ["new"]


def test_ctrl_c_says_resume_once_and_writes_the_index_a_cancel_says_nothing(tmp_path: Path) -> None:
    """A ctl cancel stops one cell: the driver's console gets no 'continue with ...
    resume' for it. Ctrl-C with no cell in flight (paused) still says it, once, and
    leaves sweep.json and sweep.parquet as its cells' own files say, as any end does."""
    sweep_dir, err = tmp_path / "sweep", tmp_path / "err.log"
    args = ["model=scripted", "model.latency_s=0.2", "rounds=3", "replicates=2", "progress=false"]
    cmd = [
        sys.executable,
        "-m",
        "harness.run",
        "-m",
        *args,
        "sweep.concurrency=1",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    with err.open("w") as fh:
        driver = subprocess.Popen(
            cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True
        )
    _STARTED.append(driver)  # type: ignore[arg-type]
    until(lambda: "rep-0" in running(sweep_dir), driver)  # type: ignore[arg-type]
    ctl(sweep_dir, "pause")
    ctl(sweep_dir, "cancel", "rep-0")
    until(lambda: "rep-0" not in running(sweep_dir), driver)  # type: ignore[arg-type]
    time.sleep(0.5)  # the line followed its record at once
    assert "continue with" not in err.read_text()
    os.killpg(driver.pid, signal.SIGINT)
    assert driver.wait(timeout=60) == 130
    assert err.read_text().count(f"continue with: python -m harness.sweep resume {sweep_dir}\n") == 1
    expected = {"rep-0": "interrupted", "rep-1": "pending"}
    assert {c.name: c.status for c in read_index(sweep_dir).cells} == expected
    assert (
        dict(zip(*pd.read_parquet(sweep_dir / "sweep.parquet")[["name", "status"]].T.values, strict=True))
        == expected
    )

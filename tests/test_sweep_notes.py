"""What a sweep's table says about a cell (``harness.sweep.cell``), and what refuses one first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.plan.cells import PlanError, compose_cells
from harness.run import main as single_run
from harness.sweep.cell import SweepJob, run_cell
from harness.sweep.grid import plan_cells
from harness.sweep.index import SweepIndex, write_index


def test_a_failed_cell_s_note_names_the_sweep_s_resume(tmp_path: Path, make_cfg) -> None:
    """A cell whose model failed for good said 'resume it with: python -m harness.resume
    <run>': that resumed the run but left the sweep's table saying it failed."""
    cells = plan_cells(["rounds=1"])
    write_index(
        tmp_path, SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=cells)
    )
    cfg = make_cfg("experiment=debug", "rounds=1", "model.error_rate=1.0", "retry.max_attempts=1")
    job = SweepJob(tmp_path, 0, cells[0].overrides)
    for action in ("run", "resume"):  # a fresh cell's failure, and its resume's
        run_cell(cfg, single_run, job)
        record = json.loads((tmp_path / "cells" / f"{cells[0].name}.json").read_text())
        assert (record["status"], record["action"]) == ("failed", action)
        assert record["error"].endswith(f"; resume it with: python -m harness.sweep resume {tmp_path}")
        assert "harness.resume" not in record["error"]


def test_topic_index_without_topic_file_is_one_line_naming_it(tmp_path: Path, make_cfg) -> None:
    """``topic.index=1`` with no ``topic.file`` ran the debate on topic.text, the index unsaid."""
    cells = plan_cells(["topic.index=1"])
    write_index(
        tmp_path, SweepIndex(name="s", launcher="x", task_overrides=[], hydra_overrides=[], cells=cells)
    )
    run_cell(
        make_cfg("experiment=debug", "topic.index=1"), single_run, SweepJob(tmp_path, 0, cells[0].overrides)
    )
    record = json.loads((tmp_path / "cells" / f"{cells[0].name}.json").read_text())
    said = "topic.index=1: picks a motion of topic.file, and no topic.file is set"
    assert record["status"] == "failed" and record["error"].startswith(said)
    assert not (tmp_path / cells[0].name).exists()  # refused before its run folder
    with pytest.raises(PlanError, match=f"^{said}"):
        compose_cells(["experiment=debug", "topic.index=1"])
    topics = tmp_path / "topics.txt"
    topics.write_text("One.\nTwo.\n")
    (cell,) = compose_cells(["experiment=debug", "topic.index=1", f"topic.file={topics}"]).cells
    assert cell.settings.topic.text == "Two."


def test_an_interview_past_the_last_round_is_one_line_naming_it(make_cfg) -> None:
    """``interviews.rounds=[9]`` with ``rounds=2`` completed, the interview never asked, unsaid."""
    from harness.run import start
    from harness.schema import ConfigError

    said = r"^interviews\.rounds: \[9\] past this run's last round \(rounds=2\), so never asked"
    with pytest.raises(ConfigError, match=said):
        start(make_cfg("experiment=debug", "rounds=2", "interviews.rounds=[1,9]"))
    with pytest.raises(PlanError, match=said):
        compose_cells(["experiment=debug", "rounds=2", "interviews.rounds=[1,9]"])
    (cell,) = compose_cells(["experiment=debug", "rounds=2", "interviews.rounds=[1,2]"]).cells
    assert cell.settings.interviews.rounds == [1, 2]


def test_hydra_s_flags_after_an_override_reach_hydra_first() -> None:
    """``experiment=debug -m rounds=1,2`` was refused with the first line of Hydra's usage,
    naming nothing: its parser takes the overrides as one run of words."""
    from harness.run import checked_argv

    typed = ["experiment=debug", "-m", "rounds=1,2", "--config-dir", "/x/my conf", "critic=strict"]
    assert checked_argv(typed) == [
        "-m",
        "--config-dir",
        "/x/my conf",
        "experiment=debug",
        "rounds=1,2",
        "critic=strict",
    ]

"""``python -m analysis study``: the plan's commands, skipping and resuming
sweeps, and a whole small study on the scripted model down to its report."""

from __future__ import annotations

import json
import math

import pytest

from analysis.findings import cell_summary, echoes_schema, main, md_table, smallest_p
from analysis.study import Plan, parse, sweep_state
from analysis.tables import cell_of


def test_the_plan_sweeps_each_condition_and_names_its_command(tmp_path):
    plan, _ = parse(
        ["--root", str(tmp_path), "--models", "smollm2", "--conditions", "debate,control_no_critic"]
    )
    assert plan.runs() == 1 * 2 * 2 * 3
    over = plan.overrides("smollm2", "control_no_critic")
    assert "experiment=control_no_critic" in over and "llm.temperature=0.3,1.0" in over
    assert f"hydra.sweep.dir={tmp_path / 'smollm2-control_no_critic'}" in over
    assert "experiment=" not in " ".join(plan.overrides("smollm2", "debate"))
    # the command it prints parses back to the same plan
    again, _ = parse(plan.command().split()[4:])
    assert again == plan


@pytest.mark.parametrize(
    "bad", [["--conditions", "debate,rivalry"], ["--replicates", "1"], ["--rounds", "2"]]
)
def test_a_plan_that_cannot_show_anything_is_refused(bad, capsys):
    with pytest.raises(SystemExit):
        parse(bad)
    assert "--" in capsys.readouterr().err


def test_sweep_state_says_new_partial_or_done(tmp_path):
    assert sweep_state(tmp_path) == "new"
    (tmp_path / "sweep.json").write_text(
        json.dumps({"cells": [{"status": "completed"}, {"status": "failed"}]})
    )
    assert sweep_state(tmp_path) == "partial"
    (tmp_path / "sweep.json").write_text(json.dumps({"cells": [{"status": "completed"}] * 2}))
    assert sweep_state(tmp_path) == "done"


def test_replicates_of_a_sweep_share_one_analysis_cell():
    row = {"cfg.llm.temperature": 0.3, "cfg.model.spec": "scripted:default", "cfg.critic.name": "balanced"}
    a = cell_of({**row, "cfg.seed": 1, "cfg.replicate": 0, "cfg.run_name": "temp-0.3_rep-0"})
    b = cell_of({**row, "cfg.seed": 2, "cfg.replicate": 1, "cfg.run_name": "temp-0.3_rep-1"})
    c = cell_of({**row, "cfg.llm.temperature": 1.0, "cfg.run_name": "temp-1.0_rep-0"})
    assert a == b and a[0] != c[0]


def test_smallest_permutation_p_and_markdown_tables():
    assert smallest_p(3, 3) == pytest.approx(0.1)  # 2 of the 20 relabellings are as extreme
    assert math.isnan(smallest_p(0, 3))
    import pandas as pd

    table = md_table(pd.DataFrame({"a": [1.23456, math.nan], "b": ["x|y", "z"]}))
    assert table.splitlines() == ["| a | b |", "|---|---|", "| 1.235 | x/y |", "| – | z |"]


def test_a_small_scripted_study_writes_its_report_and_skips_what_is_done(tmp_path, capsys):
    root, report = tmp_path / "study", tmp_path / "docs" / "findings.md"
    args = [
        "--root",
        str(root),
        "--models",
        "scripted",
        "--conditions",
        "debate,control_no_critic",
        "--temperatures",
        "0.7",
        "--replicates",
        "2",
        "--rounds",
        "3",
        "--workers",
        "1",
        "--embedder",
        "hash",
        "--report",
        str(report),
        "--detector",
        str(tmp_path / "none.json"),
    ]
    assert main(args) == 0
    text = report.read_text()
    assert Plan(root=root).command().split()[:3] == ["python", "-m", "analysis"]
    assert "--models scripted --conditions debate,control_no_critic" in text
    assert "| scripted:default | 0.700 | control_no_critic | 2 | 2 | 3 |" in text
    assert "| no_critic | 2/2 |" in text  # the pair found, with both replicates in each cell
    # 2 vs 2 runs: no exact permutation p can be below 1/3, and the report says so
    assert "the smallest p an exact test of 2 vs 2 runs can reach is 0.33" in text
    assert "_Not available:" in text and (report.parent / "images" / "findings_trajectories.png").is_file()
    assert (root / "findings.md").read_text() == text
    assert "## Echoes of the instructions" in text and "## Detector validity on real text" in text
    capsys.readouterr()
    assert main([*args, "--long", str(root)]) == 0  # everything done: nothing runs again
    out = capsys.readouterr().out
    assert out.count("done, skipped") == 2 and "[study] report:" in out
    long = report.read_text().split("## Long trajectories")[1]
    assert long.count("| completed | 3 | 2 | 6 |") == 4  # each run: 3 rounds, 2 seats, 6 turns
    assert long.count("| pros | 3 |") == 4 and (report.parent / "images" / "findings_long.png").is_file()


def test_the_cell_table_gives_a_student_t_interval():
    from types import SimpleNamespace

    import pandas as pd

    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "cfg.model.spec": "m",
            "cfg.llm.temperature": 0.7,
            "status": "completed",
            "counts.rounds_completed": 5,
            "counts.rejections": 0,
            "counts.loop_locks": 0,
            "counts.schema_failures": 0,
        }
    )
    final = pd.DataFrame({"run_id": ["a", "b", "c"], "drift_index": [1.0, 2.0, 3.0]})
    turns = pd.DataFrame({"run_id": ["a", "b"], "text": ["the argument to publish", "Cities need parks."]})
    tables = SimpleNamespace(runs=runs, turns=turns)
    row = cell_summary(SimpleNamespace(tables=tables, final=final)).iloc[0]  # type: ignore[arg-type]
    assert row["turns echoing the schema"] == pytest.approx(0.5)  # run a: 1 of 1, run b: 0 of 1, run c: none
    assert row["final drift index"] == pytest.approx(2.0)
    assert row["± 95% (t)"] == pytest.approx(4.303 * 1.0 / math.sqrt(3), rel=1e-3)  # t(0.975, 2 df), sd 1


def test_a_turn_that_repeats_a_field_description_is_flagged():
    import pandas as pd

    texts = pd.Series(
        [
            "Optional, a stronger version of the draft (or null) ",  # the critic's `revised` label, verbatim
            "Remote work saves commuting time and widens the hiring pool for small firms.",
            None,
        ]
    )
    assert echoes_schema(texts).tolist() == [True, False, False]

"""The preregistration (analysis.prereg) and its guard and Confirmatory
section (analysis.confirm), in a throwaway git checkout, on hand-made runs."""

from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest

from analysis.confirm import (
    confirmatory,
    file_hashes,
    frozen_files,
    read_prereg,
    section,
)
from analysis.prereg import main, write_prereg
from analysis.study import parse as parse_study

COMMITTED = "2025-06-01T12:00:00+00:00"


def git(repo, *args, date=COMMITTED):
    env = {**os.environ, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        env=env,
    )


def block(repo, **changes):
    return {
        "hypothesis": "The debate drifts more than its no-critic control.",
        "model": "smollm2",
        "temperature": 1.0,
        "conditions": {"a": "control_no_critic", "b": "debate"},
        "metric": "counts.rejections",
        "test": "one-sided exact permutation test of mean(b) - mean(a) over runs (b > a)",
        "alpha": 0.05,
        "n_per_arm": 3,
        "d": 3.0,
        "power": 0.85,
        "embedder": "hash",
        "root": "runs/confirm",
        "command": "python -m analysis study --root runs/confirm --runs-only",
        "pilot": {
            "root": "runs/pilot",
            "cells": ["A", "B"],
            "n_a": 3,
            "n_b": 3,
            "sd_a": 0.1,
            "sd_b": 0.2,
            "pilot_d": 2.45,
        },
        "frozen": file_hashes(repo, ["analysis/metric.py"]),
        **changes,
    }


@pytest.fixture
def repo(tmp_path):
    """A checkout with one frozen file and a committed preregistration."""
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "metric.py").write_text("def metric(x):\n    return x\n")
    git(tmp_path, "init", "-q")
    write_prereg(tmp_path / "docs" / "prereg.md", block(tmp_path))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "preregister")
    return tmp_path


def runs(a=(1, 2, 3), b=(4, 5, 6), started="2025-06-02T00:00:00+00:00"):
    """Runs of the two arms; the metric is a runs-table column, so no scores are needed."""
    rows = [("a", "no_critic", v) for v in a] + [("b", None, v) for v in b]
    return pd.DataFrame(
        {
            "run_id": [f"{arm}{i}" for i, (arm, _, _) in enumerate(rows)],
            "cell": ["A" if arm == "a" else "B" for arm, _, _ in rows],
            "cfg.control": [c for _, c, _ in rows],
            "cfg.model.spec": "local:smollm2",
            "cfg.llm.temperature": 1.0,
            "counts.rejections": [float(v) for _, _, v in rows],
            "started_at": pd.Timestamp(started),
        }
    )


def test_the_section_renders_the_preregistered_test_on_a_match(repo):
    lines = confirmatory(repo / "docs" / "prereg.md", runs(), None)
    text = "\n".join(lines)
    assert lines[0] == "## Confirmatory" and "Hypothesis: The debate drifts more" in text
    assert "its 1 frozen analysis files match" in text and "planned 3, achieved 3 (a) and 3 (b)" in text
    assert (
        "| a | control_no_critic | 3 | 2.000 | 1.000 |" in text
        and "| b | debate | 3 | 5.000 | 1.000 |" in text
    )
    assert "Difference b − a: 3.000" in text
    assert "One-sided permutation p = 0.0500 (exact, 20 relabellings" in text  # the 1-in-20 split
    assert "**H0 rejected** at α = 0.05" in text and "the pilot's d was 2.45" in text


def test_a_null_result_renders_as_a_null_result(repo):
    text = "\n".join(confirmatory(repo / "docs" / "prereg.md", runs(a=(4, 5, 6), b=(1, 2, 3)), None))
    assert "One-sided permutation p = 1.0000" in text
    assert "**H0 not rejected** at α = 0.05: a null result" in text and "H0 rejected" not in text


def test_the_guard_refuses_a_changed_frozen_file(repo):
    (repo / "analysis" / "metric.py").write_text("def metric(x):\n    return 2 * x\n")
    with pytest.raises(ValueError, match=r"^analysis/metric.py: differs from its sha256 in .*prereg.md"):
        confirmatory(repo / "docs" / "prereg.md", runs(), None)
    with pytest.raises(ValueError, match="analysis/metric.py: differs"):
        section(repo / "docs" / "prereg.md")  # before it looks for runs


def test_the_guard_refuses_a_run_that_started_before_the_commit(repo):
    early = pd.concat([runs(), runs(started="2025-06-01T11:59:00+00:00").iloc[[0]].assign(run_id="old")])
    with pytest.raises(ValueError, match=r"^old: started .* not after .*prereg.md was committed"):
        confirmatory(repo / "docs" / "prereg.md", early, None)
    at_once = runs(started=COMMITTED)  # the same second as the commit is not later
    with pytest.raises(ValueError, match="not after"):
        confirmatory(repo / "docs" / "prereg.md", at_once, None)


def test_the_guard_refuses_an_uncommitted_or_edited_block(repo, tmp_path_factory):
    path = repo / "docs" / "prereg.md"
    write_prereg(path, block(repo, n_per_arm=2))  # edited after its commit: the runs would be judged by it
    with pytest.raises(ValueError, match="its yaml block differs from the one commit"):
        confirmatory(path, runs(), None)
    other = tmp_path_factory.mktemp("uncommitted")
    git(other, "init", "-q")
    (other / "analysis").mkdir()
    (other / "analysis" / "metric.py").write_text("def metric(x):\n    return x\n")
    git(other, "add", ".")
    git(other, "commit", "-q", "-m", "code")
    write_prereg(other / "prereg.md", block(other))  # written, never committed
    with pytest.raises(ValueError, match="prereg.md: not committed"):
        confirmatory(other / "prereg.md", runs(), None)


def test_the_guard_refuses_runs_of_other_cells(repo):
    stray = pd.concat([runs(), runs().iloc[[0]].assign(run_id="x", cell="C", **{"cfg.llm.temperature": 0.3})])
    with pytest.raises(ValueError, match="^x: a run under runs/confirm of no preregistered arm"):
        confirmatory(repo / "docs" / "prereg.md", stray, None)


def test_no_section_without_a_preregistration_or_its_runs(repo, tmp_path):
    assert section(tmp_path / "none.md") == []
    assert section(repo / "docs" / "prereg.md") == []  # committed, but runs/confirm holds no run


def test_writing_again_replaces_the_block_and_keeps_the_prose(repo):
    path = repo / "docs" / "prereg.md"
    assert path.read_text().startswith("# Preregistration") and "d = 2.45 on 3 vs 3 runs" in path.read_text()
    path.write_text("# Mine\n\nWhy this contrast.\n\n```yaml\nold: 1\n```\n\nAfter.\n")
    write_prereg(path, block(repo, n_per_arm=5))
    text = path.read_text()
    assert text.startswith("# Mine\n\nWhy this contrast.\n\n```yaml\nhypothesis:") and text.endswith(
        "```\n\nAfter.\n"
    )
    assert read_prereg(path).n_per_arm == 5
    path.write_text(text.replace("n_per_arm: 5\n", ""))
    with pytest.raises(ValueError, match="prereg.md: its yaml block lacks n_per_arm"):
        read_prereg(path)


def test_the_check_command_reports_the_commit(repo, capsys):
    assert main(["--check", str(repo / "docs" / "prereg.md")]) == 0
    assert "1 frozen files match" in capsys.readouterr().out


def test_frozen_files_are_what_the_metric_and_the_test_import():
    frozen = frozen_files()
    needed = ["compare", "confirm", "power", "scoring", "signals", "compute", "load"]
    assert {f"analysis/{m}.py" for m in needed} <= set(frozen)
    assert not {"analysis/findings.py", "analysis/prereg.py", "analysis/exploratory.py"} & set(frozen)


def test_write_draws_the_block_from_pilot_runs(tmp_path):
    from synthetic import write_run

    pilot = tmp_path / "pilot"
    for name, control, seeds in (
        ("debate", {}, (10, 11, 12)),
        ("nocrit", {"control": "no_critic"}, (0, 1, 2)),
    ):
        for seed in seeds:
            config = {
                "llm": {"temperature": 1.0},
                "model": {"spec": "local:smollm2"},
                **control,
                "seed": seed,
            }
            write_run(pilot / f"{name}-{seed}", [(1, "pros", "An argument.")], config=config)
    study = "python -m analysis study --root {} --models smollm2,gemma3_270m --conditions debate,control_no_critic"
    (pilot / "study_commands.txt").write_text(
        study.format(pilot) + " --rounds 5 --set critic.max_iterations=2\n"
    )
    from analysis.load import load_runs

    cells = load_runs(pilot, cache=False).runs.drop_duplicates("cell").set_index("run_id").cell
    contrast = f"{cells['nocrit-0'][:6]}:{cells['debate-10'][:6]}"
    path = tmp_path / "prereg.md"
    argv = ["--write", str(path), "--pilot", str(pilot), "--metric", "cfg.seed"]
    assert main([*argv, "--shrink", "0.3"]) == 0  # no --contrast: the pilot's only control pair
    b = read_prereg(path).block
    assert b["conditions"] == {"a": "control_no_critic", "b": "debate"} and b["model"] == "smollm2"
    assert (b["d"], b["n_per_arm"], b["pilot"]["pilot_d"]) == (3.0, 3, 10.0)  # 0.3 x the pilot's d of 10
    plan, args = parse_study(b["command"].split()[4:])
    assert (plan.models, plan.conditions, plan.temperatures, plan.replicates) == (
        ("smollm2",),
        ("debate", "control_no_critic"),
        (1.0,),
        3,
    )
    assert plan.rounds == 5 and plan.extra == ("critic.max_iterations=2",) and plan.seed == 1000
    assert args.runs_only and args.power_one_sided and args.power_d == 3.0
    assert set(b["frozen"]) == set(frozen_files())
    assert b["pilot"]["cells"] == [cells["nocrit-0"], cells["debate-10"]]
    with pytest.raises(ValueError, match="--seed 11: a pilot run has that seed"):
        main([*argv, "--contrast", contrast, "--seed", "11"])

"""Cell comparisons: Cohen's d with a bootstrap CI, the permutation test, the
per-round difference, and pairing each cell with its control cells."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic import write_run

from analysis import compare_cells, control_pairs, find_control, format_comparison, load_runs
from analysis.__main__ import main
from analysis.compare import bootstrap_d, cohens_d, permutation_p


def test_cohens_d_recovers_a_planted_effect():
    rng = np.random.default_rng(7)
    a, b = rng.normal(0.0, 1.0, 200), rng.normal(1.0, 1.0, 200)
    d = cohens_d(a, b)
    low, high = bootstrap_d(a, b, resamples=2000, seed=0)
    assert abs(d - 1.0) < 0.2 and low < 1.0 < high and high - low < 0.7
    assert bootstrap_d(a, b, seed=0) == (low, high)  # seeded: the same interval again
    p, method = permutation_p(a, b)
    assert method == "monte carlo, 2000 relabellings" and p == pytest.approx(
        1 / 2001
    )  # no relabelling beats it


def test_null_effect_gives_a_large_p_and_a_ci_around_zero():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.0, 1.0, 40), rng.normal(0.0, 1.0, 40)
    low, high = bootstrap_d(a, b)
    p, _ = permutation_p(a, b)
    assert low < 0.0 < high and abs(cohens_d(a, b)) < 0.3
    assert p > 0.3


def test_exact_permutation_p_equals_the_hand_count():
    # 6 relabellings of {1,2,3,4} into two pairs; |mean diff| >= 2 for {1,2}|{3,4} both ways: p = 2/6
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    assert permutation_p(a, b) == (pytest.approx(1 / 3), "exact, 6 relabellings")
    monte_carlo, method = permutation_p(a, b, resamples=4000, seed=1, max_exact=1)
    assert method == "monte carlo, 4000 relabellings" and monte_carlo == pytest.approx(1 / 3, abs=0.03)
    assert math.isnan(cohens_d(a[:1], b)) and math.isnan(bootstrap_d(a[:1], b)[0])  # one run: no spread


def test_per_round_difference_on_shared_teams():
    rows = [  # (run, team, round, drift index); cell B's cons team is absent from A and must be ignored
        ("a1", "pros", 1, 0.0),
        ("a2", "pros", 1, 2.0),
        ("a1", "pros", 2, 1.0),
        ("a2", "pros", 2, 1.0),
        ("b1", "pros", 1, 3.0),
        ("b2", "pros", 1, 5.0),
        ("b1", "pros", 2, 0.0),
        ("b2", "pros", 2, 4.0),
        ("b1", "cons", 1, 99.0),
        ("b2", "cons", 2, 99.0),
    ]
    scores = pd.DataFrame(rows, columns=["run_id", "team", "round", "drift_index"])
    runs = pd.DataFrame(
        {"run_id": ["a1", "a2", "b1", "b2"], "cell": ["A", "A", "B", "B"], "cell_label": ["a", "a", "b", "b"]}
    )
    result = compare_cells(scores, runs, "A", "B")
    assert result["teams"] == ["pros"]
    per_round = result["per_round"].set_index("round")
    assert per_round.loc[1, ["mean_a", "mean_b", "diff"]].tolist() == [1.0, 4.0, 3.0]
    assert per_round.loc[2, ["mean_a", "mean_b", "diff"]].tolist() == [1.0, 2.0, 1.0]
    half = stats.t.ppf(0.975, 2) * math.sqrt(2.0)  # var 2 each side, 2 runs: se^2 = 1 + 1, Welch dof 2
    assert per_round.loc[1, "ci_low"] == pytest.approx(3.0 - half)
    assert per_round.loc[1, "ci_high"] == pytest.approx(3.0 + half)
    # final round (2): A = [1, 1], B = [0, 4]; run means: A = [0.5, 1.5], B = [1.5, 4.5]
    assert (result["mean_a"], result["mean_b"], result["diff"]) == (1.0, 2.0, 1.0)
    assert (result["run_mean_a"], result["run_mean_b"]) == (1.0, 3.0)
    assert result["cohens_d"] == pytest.approx(2.0 / math.sqrt((0.5 + 4.5) / 2))
    # relabellings of run means {0.5, 1.5, 1.5, 4.5}: 4 of 6 split them as far apart as observed
    assert result["perm_method"] == "exact, 6 relabellings" and result["perm_p"] == pytest.approx(2 / 3)


def _runs(root, name, config, teams=("pros", "cons"), replicates=2, rounds=3):
    for seed in range(replicates):
        words = ["growth", "risk", "trust", "harm", "progress", "doubt", "evidence", "cost"]
        arguments = [
            (
                r,
                team,
                f"Round {r}, {team} of {name}: we argue {words[(r + seed) % 8]} and {words[(r * 3) % 8]} "
                f"matter because the data shows {words[(seed + 2 * r) % 8]} clearly here.",
            )
            for r in range(1, rounds + 1)
            for team in teams
        ]
        write_run(root / f"{name}-{seed}", arguments, config={**config, "seed": seed})


BASE = {"llm": {"temperature": 0.7}, "experiment_name": "default"}
MONOLOGUE = {
    **BASE,
    "control": "monologue",
    "experiment_name": "control_monologue",
    "format": {"teams": ["pros"]},
}


def test_per_round_has_only_the_rounds_of_the_two_cells():
    """A third cell's longer run (a run killed at round 8 beside 4-round cells) gave the
    comparison of two 4-round cells rows for rounds 5-8 with n_a = n_b = 0, all NaN."""
    rows = [(run, "pros", r, 1.0) for run in ("a1", "a2", "b1", "b2") for r in (1, 2)]
    rows += [("c1", "pros", r, 1.0) for r in range(1, 9)]
    scores = pd.DataFrame(rows, columns=["run_id", "team", "round", "drift_index"])
    runs = pd.DataFrame(
        {"run_id": ["a1", "a2", "b1", "b2", "c1"], "cell": [*"AABBC"], "cell_label": [*"aabbc"]}
    )
    assert compare_cells(scores, runs, "A", "B")["per_round"]["round"].tolist() == [1, 2]


def test_a_comparison_names_the_runs_that_did_not_complete():
    """A failed run (or one killed with kill -9: 'running') counted as a replicate, its
    final drift index that of an earlier or a partial round, and the comparison said nothing."""
    rows = [(run, "pros", r, 1.0) for run in ("a1", "a2", "b1", "b2") for r in (1, 2, 3)]
    scores = pd.DataFrame(rows, columns=["run_id", "team", "round", "drift_index"])
    runs = pd.DataFrame(
        {
            "run_id": ["a1", "a2", "b1", "b2"],
            "cell": [*"AABB"],
            "cell_label": [*"aabb"],
            "status": ["completed", "failed", "running", "completed"],
        }
    )
    result = compare_cells(scores, runs, "A", "B")
    assert result["incomplete"] == ["A: a2 (failed)", "B: b1 (running, or was killed)"]
    assert (
        format_comparison(result)
        .splitlines()[-1]
        .startswith(
            "note: 2 run(s) did not complete: A: a2 (failed), B: b1 (running, or was killed); the final drift"
        )
    )


def test_pairing_finds_the_control_and_ignores_unrelated_cells(tmp_path):
    _runs(tmp_path, "full", BASE)
    _runs(tmp_path, "mono", MONOLOGUE, teams=("pros",))
    _runs(tmp_path, "other", {**BASE, "llm": {"temperature": 0.2}})  # another cell, no control of its own
    no_critic = {
        "llm": {"temperature": 0.2},
        "control": "no_critic",
        "critic": {"approve_all": True},
        "rounds": 9,
    }
    _runs(tmp_path, "lone", no_critic)  # a control whose full cell (rounds=9) was never run
    runs = load_runs(tmp_path, cache=False).runs
    cell = {name: runs[runs.run_id.str.startswith(name)].cell.iloc[0] for name in ("full", "mono", "other")}
    assert find_control(runs, cell["full"], "monologue") == cell["mono"]
    assert find_control(runs, cell["full"], "no_critic") is None
    assert find_control(runs, cell["other"], "monologue") is None
    pairs = control_pairs(runs)
    assert pairs[["cell", "control", "control_cell"]].values.tolist() == [
        [cell["full"], "monologue", cell["mono"]]
    ]


def test_compare_command_prints_each_control_comparison(tmp_path, capsys):
    _runs(tmp_path, "full", BASE)
    _runs(tmp_path, "mono", MONOLOGUE, teams=("pros",))
    assert main(["compare", str(tmp_path), "--embedder", "hash", "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    assert "== monologue control ==" in out and "teams compared: pros" in out
    assert "Cohen's d" in out and "permutation p" in out and "exact, 6 relabellings" in out
    assert len([line for line in out.splitlines() if line.strip()[:1].isdigit()]) == 3  # rounds 1-3
    label = load_runs(tmp_path).runs.cell.iloc[0][:6]
    assert main(["compare", str(tmp_path), "--embedder", "hash", "--cell", label, "--cell", "nope"]) == 2
    assert "--cell nope: names no cell" in capsys.readouterr().err


def test_compare_command_without_controls_says_so(tmp_path, capsys):
    _runs(tmp_path, "full", BASE)
    assert main(["compare", str(tmp_path), "--embedder", "hash"]) == 0
    assert capsys.readouterr().out.startswith("no control cells found")


def test_each_control_preset_pairs_with_the_default_cell(run, runs_root):
    run("rounds=1")
    for control in ("monologue", "no_critic", "cooperative"):
        run("rounds=1", f"experiment=control_{control}")
    run("rounds=1", "llm.temperature=0.2", "experiment=control_monologue")  # controls another cell
    runs = load_runs(runs_root, cache=False).runs
    full = runs[runs["cfg.control"].isna()].cell.iloc[0]
    pairs = control_pairs(runs)
    assert pairs.control.tolist() == ["cooperative", "monologue", "no_critic"] and (pairs.cell == full).all()
    assert set(pairs.control_cell) == set(runs[runs["cfg.llm.temperature"] == 0.7].cell) - {full}

"""Checks on the judges: Cohen's κ, test-retest and position-swap consistency on
hand-made judgements (values worked out by hand), missing judgements left out
and counted, and the checks run through judge and stance on the scripted model."""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest
from synthetic import write_run
from test_stance import PLAN, FakeJudge

from analysis import load_runs
from analysis.__main__ import main
from analysis.agreement import (
    categorical,
    cohens_kappa,
    percent_agreement,
    retest_agreement,
    sample_positions,
    swap_consistency,
)
from analysis.judge import CheckPlan, JudgeWarning, check_judge, judge_turns
from analysis.stance import check_stance, judge_stance
from harness.schema import ModelConfig


def test_kappa_textbook_case():
    # 50 items: both yes 20, A yes B no 5, A no B yes 10, both no 15.
    # p_o = 35/50 = 0.7; A says yes 0.5, B 0.6: p_e = 0.5*0.6 + 0.5*0.4 = 0.5; κ = 0.2/0.5
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert percent_agreement(a, b) == pytest.approx(0.7)
    assert cohens_kappa(a, b) == pytest.approx(0.4)


def test_kappa_perfect_chance_and_constant_raters():
    labels = ["for", "against", "unclear", "for", "against"]
    assert cohens_kappa(labels, labels) == 1.0
    # p_o = 2/4, p_e = 0.5*0.5 + 0.5*0.5: agreement exactly at chance
    assert cohens_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    # one constant rater: it agrees exactly as often as chance predicts
    assert cohens_kappa(["x"] * 4, ["x", "y", "x", "y"]) == 0.0
    assert cohens_kappa(["x", "y", "y"], ["y"] * 3) == 0.0
    # both constant on one label (p_e = 1): undefined, never read as perfect; on two labels: none
    assert math.isnan(cohens_kappa(["x"] * 3, ["x"] * 3))
    assert cohens_kappa(["x"] * 3, ["y"] * 3) == 0.0
    # worse than chance is negative: p_o = 0, p_e = 0.5
    assert cohens_kappa(["a", "b"], ["b", "a"]) == -1.0


def test_missing_judgements_are_left_out_and_counted():
    a = ["yes"] * 25 + ["no"] * 25 + [None, "yes", float("nan")]
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15 + ["no", pd.NA, "yes"]
    result = categorical(a, b)
    assert (result.n, result.n_missing) == (53, 3)
    assert result.agreement == pytest.approx(0.7) and result.kappa == pytest.approx(0.4)
    nothing = categorical([None, None], ["x", "y"])
    assert nothing.n_missing == 2 and math.isnan(nothing.agreement) and math.isnan(nothing.kappa)
    with pytest.raises(ValueError, match="3 judgements against 2"):
        categorical(["x"] * 3, ["x"] * 2)


def test_retest_of_numeric_scores():
    result = retest_agreement([1, 2, 3, 4, 5], [1, 2, 4, 4, float("nan")])
    # complete pairs (1,1) (2,2) (3,4) (4,4): 3 of 4 equal, |diff| sums to 1;
    # r = S_xy / sqrt(S_xx S_yy) = 5.5 / sqrt(5 * 6.75)
    assert (result.n, result.n_missing) == (5, 1)
    assert result.agreement == 0.75 and result.mad == 0.25
    assert result.r == pytest.approx(5.5 / math.sqrt(5 * 6.75))
    flat = retest_agreement([3, 3, 3], [3, 4, 5])
    assert math.isnan(flat.r) and flat.mad == 1.0 and flat.agreement == pytest.approx(1 / 3)


def test_swap_consistency_on_hand_made_pairs():
    forward = ["first", "first", "second", "tie", "first", None]
    swapped = ["second", "first", "first", "tie", "second", "second"]
    # consistent: the same text twice (first<->second) or a tie twice; (first, first) is not
    result = swap_consistency(forward, swapped)
    assert (result.n, result.n_missing, result.agreement) == (6, 1, 0.8)
    always_first = swap_consistency(["first"] * 4, ["first"] * 4)
    assert always_first.agreement == 0.0
    assert swap_consistency(["A", "B"], ["B", "A"], mirror={"A": "B", "B": "A"}).agreement == 1.0


def test_sample_positions_are_seeded_and_bounded():
    drawn = sample_positions(range(100), 10, seed=3)
    assert drawn == sample_positions(range(100), 10, seed=3) and drawn == sorted(set(drawn))
    assert len(drawn) == 10 and drawn != sample_positions(range(100), 10, seed=4)
    assert sample_positions([5, 2, 9], 20, seed=0) == [2, 5, 9]
    with pytest.raises(ValueError, match="check sample"):
        sample_positions(range(3), -1, seed=0)


def test_judge_retest_disagreement_and_second_judges(run):
    tables = load_runs(run("rounds=2").run_dir, cache=False)
    judge = ModelConfig(spec="scripted:judge")
    scores = judge_turns(tables, judge.spec, model_cfg=judge)
    # the same scripted judge under other seeds scores at random: the retest must see it
    checks = check_judge(tables, scores, CheckPlan(sample=3, seed=1), model_cfg=judge)
    assert (checks.check == "retest").all() and len(checks) == len(scores["item"].unique())
    assert (checks.n == 3).all() and (checks.n_missing == 0).all() and (checks.agreement < 1).any()
    # a second judge answering as the first agrees fully; a broken one is all missing
    twin = check_judge(tables, scores, CheckPlan(3, 1, ModelConfig(spec="scripted:twin")), model_cfg=judge)
    assert (twin[twin.check == "second judge"].agreement == 1.0).all()
    broken = ModelConfig(spec="scripted:broken", malformed_rate=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JudgeWarning)  # neither judge debated: no warning
        lost = check_judge(tables, scores, CheckPlan(3, 1, broken), model_cfg=judge)
    second = lost[lost.check == "second judge"]
    assert (second.n_missing == 3).all() and second.agreement.isna().all()


def test_stance_checks_count_missing_and_see_a_steady_judge_agree(tmp_path):
    arguments = [
        (r + 1, team, f"Round {r + 1}: we argue <<{plan[r]}>> on this motion.")
        for r in range(6)
        for team, plan in PLAN.items()
    ]
    write_run(tmp_path / "run", arguments)
    tables, judge = load_runs(tmp_path, cache=False), ModelConfig(spec="fake:judge")
    stances = judge_stance(tables, judge.spec, model=FakeJudge())
    checks = check_stance(tables, stances, CheckPlan(sample=12), model_cfg=judge, model=FakeJudge())
    row = checks.iloc[0]  # the fake judge reads the stance off the text, whatever the seed
    assert (row.check, row.n, row.n_missing, row.agreement, row.kappa) == ("retest", 12, 2, 1.0, 1.0)


def test_judge_command_reports_and_stores_the_checks(run, runs_root, capsys):
    run("rounds=4")
    argv = ["judge", str(runs_root), "--model", "scripted:judge", "--stance", "--check-sample", "8"]
    assert main([*argv, "--second-judge", "scripted:twin"]) == 0
    out = capsys.readouterr().out
    assert "checks on judge scripted:judge" in out and "second judge (scripted:twin)" in out
    assert "0 of 8" in out.split("retest", 1)[1]
    checks = pd.read_parquet(runs_root / "_analysis" / "stance_checks.parquet").set_index("check")
    assert checks.loc["retest", "agreement"] < 1.0 and checks.loc["second judge", "kappa"] == 1.0
    with pytest.raises(SystemExit):
        main(["judge", str(runs_root), "--model", "scripted:judge", "--check-sample", "-1"])
    assert "--check-sample: -1; give 0 or more" in capsys.readouterr().err

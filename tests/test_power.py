"""Power of the permutation test over runs (analysis.power), Holm's correction
and the one-sided test (analysis.compare), and the study's power lines."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.compare import holm, permutation_p
from analysis.power import (
    first_reachable,
    power,
    required_n,
    run_metric,
    shared_teams,
    smallest_p,
)
from analysis.study import Plan, power_lines


def t_power(n: int, d: float) -> float:
    """One-sided t-test power with n a side: the permutation test's should be close."""
    df, ncp = 2 * n - 2, d * math.sqrt(n / 2)
    return float(1 - stats.nct.cdf(stats.t.ppf(0.95, df), df, ncp))


def test_the_smallest_attainable_p_is_the_hand_count():
    assert smallest_p(3, 3, one_sided=True) == pytest.approx(1 / 20)  # 1 of C(6, 3) = 20 relabellings
    assert smallest_p(3, 3) == pytest.approx(0.10)  # and its mirror, two-sided
    assert smallest_p(4, 4, one_sided=True) == pytest.approx(1 / 70)
    assert smallest_p(2, 3) == pytest.approx(1 / 10)  # unequal arms: no mirror split
    assert math.isnan(smallest_p(0, 3))
    # the test itself gives those floors on perfectly separated runs
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    assert permutation_p(a, b, alternative="greater")[0] == pytest.approx(1 / 20)
    assert permutation_p(a, b)[0] == pytest.approx(0.10)
    assert permutation_p(a, b, alternative="less")[0] == pytest.approx(1.0)
    assert first_reachable(0.05, one_sided=True) == 3 and first_reachable(0.05) == 4
    with pytest.raises(ValueError, match="alternative 'up'"):
        permutation_p(a, b, alternative="up")


def test_power_is_that_of_the_exact_test_on_its_attainable_p():
    assert power(3, 3, 10.0, one_sided=True) > 0.99  # a huge effect: always the most extreme split
    assert power(3, 3, 10.0) == 0.0  # two-sided, 3 vs 3: p never below 0.10, whatever the effect
    # no effect: the rejection rate is the test's true size, the largest attainable p <= alpha
    assert power(4, 4, 0.0, one_sided=True) == pytest.approx(3 / 70, abs=0.02)
    assert power(6, 6, 0.0) == pytest.approx(46 / 924, abs=0.02)  # two-sided p's come in pairs
    assert power(9, 9, 0.0, one_sided=True) == pytest.approx(0.05, abs=0.02)  # Monte Carlo relabellings
    # a real effect: close to the t-test's power (the normal data it is simulated on)
    assert power(6, 6, 1.5, one_sided=True) == pytest.approx(t_power(6, 1.5), abs=0.03)
    assert power(9, 9, 1.0, one_sided=True) == pytest.approx(t_power(9, 1.0), abs=0.03)
    # seeded: another seed moves the estimate by less than its stated ±0.02 each
    other = power(6, 6, 1.5, one_sided=True, seed=1)
    assert other != power(6, 6, 1.5, one_sided=True) and other == pytest.approx(t_power(6, 1.5), abs=0.03)


def test_required_n_is_the_first_n_reaching_the_target():
    n, reached = required_n(1.5, one_sided=True, n_max=12)
    assert reached >= 0.8 and power(n - 1, n - 1, 1.5, one_sided=True) < 0.8
    assert required_n(10.0, one_sided=True)[0] == 3  # the first n whose smallest p is <= alpha
    assert required_n(10.0)[0] == 4
    assert required_n(0.0)[0] is None and required_n(-1.0, one_sided=True)[0] is None
    assert required_n(0.3, n_max=6)[0] is None


def test_holm_adjusts_by_rank_keeps_the_order_and_caps_at_one():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.6]).tolist() == [1.0, 1.0]  # 0.5 x 2 capped at 1; 0.6 x 1 raised to 1
    adjusted = holm([0.2, math.nan, 0.01])
    assert math.isnan(adjusted[1]) and adjusted[[0, 2]] == pytest.approx([0.2, 0.02])  # m = 2
    assert holm([]).size == 0


def test_a_run_metric_is_one_value_per_run_on_the_teams_given():
    scores = pd.DataFrame(
        [("r1", "pros", 1, 1.0), ("r1", "pros", 2, 3.0), ("r1", "cons", 2, 9.0), ("r2", "pros", 1, 2.0)],
        columns=["run_id", "team", "round", "drift_index"],
    )
    runs = pd.DataFrame({"run_id": ["r1", "r2"], "cell": ["B", "A"], "wall_s": [5, 7], "status": "x"})
    assert run_metric(runs, "final_drift", scores).to_dict() == {"r1": 6.0, "r2": 2.0}  # last round, mean
    assert run_metric(runs, "final_drift", scores, ["pros"]).to_dict() == {"r1": 3.0, "r2": 2.0}
    assert run_metric(runs, "run_mean_drift", scores, ["pros"]).to_dict() == {"r1": 2.0, "r2": 2.0}
    assert run_metric(runs, "wall_s").to_dict() == {"r1": 5.0, "r2": 7.0}
    assert shared_teams(scores, runs, "A", "B") == ["pros"]
    for bad in ("status", "nope"):
        with pytest.raises(ValueError, match=f"--metric {bad}: not a metric"):
            run_metric(runs, bad, scores)


def test_the_study_states_each_planned_contrast_power():
    plan = Plan(models=("m",), conditions=("debate", "control_no_critic", "control_monologue"))
    lines = power_lines(plan, d=1.0)
    assert len(lines) == 1 * 2 * 2  # one model, two temperatures, two controls
    assert lines[0].startswith("[study] power: m T=0.3 debate vs control_no_critic, 3 vs 3 runs: 0.00")
    assert all("unreachable" in line for line in lines)
    more = power_lines(Plan(models=("m",), conditions=("debate", "control_no_critic"), replicates=6), 2.0)
    assert f"6 vs 6 runs: {power(6, 6, 2.0):.2f} at d = 2.0" in more[0] and "unreachable" not in more[0]
    one = power_lines(Plan(models=("m",), conditions=("debate", "control_no_critic")), 3.0, one_sided=True)
    assert f"3 vs 3 runs: {power(3, 3, 3.0, one_sided=True):.2f} at d = 3.0 (one-sided" in one[0]
    assert power_lines(Plan(conditions=("debate",)))[0].endswith(
        "no planned contrast (the plan has no debate with a control)"
    )


def test_the_power_command_plans_each_control_contrast_of_a_pilot(tmp_path, capsys):
    from synthetic import write_run

    from analysis.__main__ import main

    for name, config, teams, seeds in (
        ("full", {}, ("pros", "cons"), (10, 11, 12)),
        ("mono", {"control": "monologue", "format": {"teams": ["pros"]}}, ("pros",), (0, 1, 2)),
    ):
        for seed in seeds:
            turns = [(r, team, f"Round {r}, {team}: an argument.") for r in (1, 2, 3) for team in teams]
            write_run(
                tmp_path / f"{name}-{seed}",
                turns,
                config={"llm": {"temperature": 0.7}, **config, "seed": seed},
            )
    # a runs-table column as the metric: the seeds, 10 apart between the arms, SD 1 within each
    args = ["power", "--pilot", str(tmp_path), "--metric", "cfg.seed", "--sims", "400", "--no-cache"]
    assert main([*args, "--d-from-pilot", "--shrink", "0.3", "--one-sided"]) == 0
    out = capsys.readouterr().out
    assert "n = 2: 0.1667 > α: unreachable, power 0" in out and "n = 3: 0.0500\n" in out
    row = next(line for line in out.splitlines() if "3/3" in line).split()  # monologue (a) vs its debate (b)
    expected = power(3, 3, 3.0, one_sided=True, sims=400)
    assert row[-8:] == ["1.000", "1.000", "11.000", "1.000", "10.000", "3.000", "3", f"{expected:.3f}"]
    assert main([*args, "--d", "0.5", "--n-max", "8"]) == 0  # two-sided, a small effect: out of reach
    row = next(line for line in capsys.readouterr().out.splitlines() if "3/3" in line).split()
    assert row[-4:-1] == ["0.500", ">", "8"] and row[-1] == f"{power(8, 8, 0.5, sims=400):.3f}"
    assert main([*args, "--d", "-1", "--one-sided"]) == 0  # the wrong way for a one-sided test: no n helps
    row = next(line for line in capsys.readouterr().out.splitlines() if "3/3" in line).split()
    assert row[-2:] == ["never", "NaN"]
    assert main([*args, "--metric", "nope", "--d", "1"]) == 2
    assert "--metric nope: not a metric" in capsys.readouterr().err
    # a failed pilot run counted as a replicate, unsaid; it is named now
    manifest = tmp_path / "mono-1" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "status": "failed"}))
    assert main([*args, "--d", "1"]) == 0
    note = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("note:"))
    assert note.startswith("note: 1 pilot run(s) did not complete: ") and "(failed); each counts as" in note


@pytest.mark.parametrize(
    ("option", "line"),
    [
        (["--sims", "0"], "--sims 0: at least 1"),  # was a ZeroDivisionError traceback
        (["--n-max", "0"], "--n-max 0: at least 1"),
        (["--alpha", "1.5"], "--alpha 1.5: a probability between 0 and 1"),  # planned 1 pair at power 1
        (["--power", "0"], "--power 0.0: a probability between 0 and 1"),
    ],
)
def test_power_options_out_of_range_are_one_error_before_any_run_is_read(tmp_path, capsys, option, line):
    from analysis.power import parse

    with pytest.raises(SystemExit) as done:
        parse(["--pilot", str(tmp_path / "none"), "--paired", "--d", "1", *option])
    assert done.value.code == 2 and capsys.readouterr().err.splitlines()[-1].endswith(f"error: {line}")


def test_pairs_resamples_below_one_is_one_error(tmp_path, capsys):
    from analysis.pairs import parse

    with pytest.raises(SystemExit) as done:  # was an IndexError traceback from the bootstrap
        parse([str(tmp_path), "--resamples", "0"])
    assert done.value.code == 2 and capsys.readouterr().err.splitlines()[-1].endswith(
        "--resamples 0: at least 1"
    )

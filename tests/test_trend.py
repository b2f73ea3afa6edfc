"""The Mann-Kendall trend test: it finds a planted slope, stays quiet at about
alpha on flat noise (ties included), and handles short and constant series."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis import compute_signals, load_runs, mann_kendall, score, trends
from analysis.trend import COLUMNS


def test_s_tau_and_tied_variance_by_hand():
    x = np.array([1.0, 2.0, 2.0, 3.0, 3.0, 3.0])
    test = mann_kendall(x)
    # rising pairs: 1<all 5, each 2 < the three 3s: 5 + 2*3 = 11; no falling pair
    assert test.S == 11
    var = (6 * 5 * 17 - (2 * 1 * 9) - (3 * 2 * 11)) / 18  # ties of 2 and of 3
    assert test.z == pytest.approx((11 - 1) / math.sqrt(var))
    assert test.tau == pytest.approx(stats.kendalltau(np.arange(6), x).statistic)
    assert test.p_value == pytest.approx(2 * stats.norm.sf(test.z))


def test_finds_a_planted_slope_and_its_size():
    rng = np.random.default_rng(0)
    t = np.arange(1, 61)
    up = mann_kendall(0.05 * t + rng.normal(0, 0.5, 60), t)
    assert up.p_value < 0.001 and up.S > 0
    assert up.slope == pytest.approx(0.05, abs=0.015)
    down = mann_kendall(-0.05 * t + rng.normal(0, 0.5, 60), t)
    assert down.p_value < 0.001 and down.S < 0 and down.slope < 0


@pytest.mark.parametrize("ties", [False, True])
def test_false_positive_rate_on_flat_noise_is_near_alpha(ties):
    rng = np.random.default_rng(1)
    alpha, runs = 0.05, 2000
    hits = 0
    for _ in range(runs):
        x = rng.normal(0, 1, 40)
        x = (x > 0).astype(float) if ties else x  # ties: only two values, 20-odd of each
        hits += mann_kendall(x).p_value < alpha
    # binomial sd at 2000 runs is 0.005; with ties, the uncorrected variance gives 0.02
    assert 0.03 < hits / runs < 0.07, hits / runs


def test_short_and_constant_series_have_no_trend():
    assert math.isnan(mann_kendall(np.array([1.0, 2.0])).p_value)
    assert mann_kendall(np.array([1.0, 2.0, 3.0])).S == 3
    flat = mann_kendall(np.full(10, 0.5))
    assert (flat.S, flat.z, flat.p_value) == (0, 0.0, 1.0)


def frame(values: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = [
        {"run_id": run, "team": team, "round": i + 1, "order": i, "drift_index": v}
        for (run, team), series in values.items()
        for i, v in enumerate(series)
    ]
    return pd.DataFrame(rows)


def test_trends_is_one_tidy_row_per_agent_and_column():
    rng = np.random.default_rng(2)
    scores = frame(
        {
            ("a", "pros"): list(0.1 * np.arange(30) + rng.normal(0, 0.3, 30)),
            ("a", "cons"): list(rng.normal(0, 0.3, 30)),
            ("b", "pros"): list(-0.1 * np.arange(30) + rng.normal(0, 0.3, 30)),
            ("b", "cons"): [1.0, 2.0],
        }
    )
    out = trends(scores, ["drift_index", "not_there"], alpha=0.01)
    assert list(out.columns) == COLUMNS
    verdict = {(r.run_id, r.team): r.trend for r in out.itertuples()}
    assert verdict == {
        ("a", "pros"): "up",
        ("a", "cons"): "none",
        ("b", "pros"): "down",
        ("b", "cons"): "none",
    }
    assert out.signal.unique().tolist() == ["drift_index"]


def test_several_turns_in_a_round_count_as_one_point():
    scores = frame({("a", "pros"): [1.0, 3.0, 2.0, 4.0, 3.0, 5.0]})
    scores["round"] = [1, 1, 2, 2, 3, 3]  # means 2, 3, 4 per round
    row = trends(scores, ["drift_index"]).iloc[0]
    assert (row.n, row.S, row.slope) == (3, 3, 1.0)


def test_alpha_out_of_range_is_refused():
    with pytest.raises(ValueError, match="alpha"):
        trends(frame({("a", "pros"): [1.0, 2.0, 3.0]}), alpha=1.5)


def test_a_drifting_scripted_persona_trends_and_a_stable_one_does_not(run):
    def verdict(*overrides: str) -> set[str]:
        result = run("rounds=30", "seed=4", *overrides)
        turns = compute_signals(load_runs(result.run_dir, cache=False), embedder="hash", progress=False).turns
        return set(trends(score(turns), ["drift_index"], alpha=0.01).trend)

    assert verdict("model.persona_drift_rate=0.04", "run_name=drift") == {"up"}
    assert verdict("run_name=stable") == {"none"}

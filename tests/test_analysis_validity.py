"""Validity of the drift signals on runs whose truth we know: a planted
persona switch, a stable persona, and a run that repeats itself verbatim.
These use the real embedding model (all-MiniLM-L6-v2, loaded offline)."""

from __future__ import annotations

import pytest
from synthetic import write_run

from analysis import change_points, compute_signals, load_runs, score

REPETITION = ["sem_prev_sim", "sem_max_earlier_sim", "ngram_rep_prev", "ngram_rep_history"]


def drift_change_points(run_dir):
    signals = compute_signals(load_runs(run_dir, cache=False), progress=False)
    scores = score(signals.turns)
    return change_points(scores, ["drift_index"])


@pytest.mark.parametrize("k", [6, 10])
def test_planted_persona_switch_is_found_at_k(run, k):
    result = run("rounds=16", f"model.persona_switch_round={k}", f"seed={k}")
    found = drift_change_points(result.run_dir)
    for team in ("pros", "cons"):
        rounds = found[found.team == team]["round"].tolist()
        assert rounds, f"{team}: no change point found for a switch at round {k}"
        assert all(abs(r - k) <= 1 for r in rounds), f"{team}: change points {rounds}, switch at {k}"


@pytest.mark.parametrize("seed", [1, 2])
def test_stable_persona_has_no_change_point(run, seed):
    result = run("rounds=16", f"seed={seed}")
    found = drift_change_points(result.run_dir)
    assert found.empty, found.to_string()


def test_verbatim_repetition_gives_maximal_repetition_signals(tmp_path):
    texts = {
        "pros": "Remote work saves hours of commuting every single week.",
        "cons": "Offices build trust that video calls cannot replace.",
    }
    write_run(tmp_path / "same", [(r, t, texts[t]) for r in range(1, 7) for t in texts])
    varied = [
        (r, t, f"{texts[t]} Point {r}: {'new angle ' * r}{t} round {r}.") for r in range(1, 7) for t in texts
    ]
    write_run(tmp_path / "varied", varied)
    turns = compute_signals(load_runs(tmp_path, cache=False), progress=False).turns
    later = turns[turns["round"] > 1]
    same, other = later[later.run_id == "same"], later[later.run_id == "varied"]
    for name in REPETITION:
        assert same[name].min() == pytest.approx(1.0, abs=1e-4), name
        assert other[name].min() < 0.999, f"{name} is maximal on a run that does not repeat"
    assert same.sem_centroid_dist.max() == pytest.approx(0.0, abs=1e-4)
    assert other.sem_centroid_dist.max() > 1e-3

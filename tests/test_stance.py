"""Stance holding: each turn's judged side against its seat's, turn of flip and
number of flips, and a missing (never defaulted) judgement that is no flip."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest
from synthetic import write_run

from analysis import load_runs
from analysis.__main__ import main
from analysis.stance import STANCES, judge_stance, seat_sides, stance_flips
from harness.models.base import Completion, ModelRequest


class FakeJudge:
    """Replies with the stance written in the argument as ``<<for>>``; ``<<garbage>>`` gets no JSON."""

    spec = "fake:judge"

    def complete(self, request: ModelRequest) -> Completion:
        found = re.search(r"<<(\w+)>>", " ".join(m["content"] for m in request.messages))  # repairs too
        stance = found.group(1) if found else "unclear"
        text = "I cannot say." if stance == "garbage" else json.dumps({"stance": stance})
        return Completion(text=text, input_tokens=1, output_tokens=1, latency_s=0.0)

    def model_files(self) -> dict[str, str]:
        return {}


PLAN = {  # the judged stance of each seat's turn in rounds 1..6
    "pros": ["for", "for", "against", "garbage", "against", "for"],  # side for
    "cons": ["against", "unclear", "garbage", "for", "for", "against"],  # side against
}


def test_turn_of_flip_and_number_of_flips_from_chosen_stances(tmp_path):
    arguments = [
        (r + 1, team, f"Round {r + 1}: we argue <<{plan[r]}>> on this motion.")
        for r in range(6)
        for team, plan in PLAN.items()
    ]
    write_run(tmp_path / "run", arguments)
    turns = judge_stance(load_runs(tmp_path, cache=False), "fake:judge", model=FakeJudge())
    assert len(turns) == 12 and set(turns.side) == {"for", "against"}
    missing = turns[turns.stance.isna()]
    assert missing[["team", "round"]].values.tolist() == [["cons", 3], ["pros", 4]]  # in turn order
    assert missing.missing_reason.str.startswith("unparseable after 2 attempts").all()
    pros = turns[turns.team == "pros"].sort_values("round")
    assert pros.holds.tolist() == [True, True, False, pd.NA, False, True]
    flips = stance_flips(turns).set_index("team")
    # pros: for for against . against for -> flips at 3 and 6; first away from "for" at 3
    assert flips.loc["pros", ["turn_of_flip", "n_flips", "n_clear", "n_missing"]].tolist() == [3, 2, 5, 1]
    # cons: against ? . for for against -> the missing and unclear turns are skipped: flips at 4 and 6
    assert flips.loc["cons", ["turn_of_flip", "n_flips", "n_unclear", "n_missing"]].tolist() == [4, 2, 1, 1]
    assert flips.loc["cons", "hold_share"] == 0.5


def test_a_missing_judgement_between_two_equal_ones_is_no_flip(tmp_path):
    arguments = [(r, "pros", f"Round {r}: <<{s}>>") for r, s in ((1, "for"), (2, "garbage"), (3, "for"))]
    write_run(tmp_path / "run", arguments)
    flips = stance_flips(judge_stance(load_runs(tmp_path, cache=False), "fake:judge", model=FakeJudge()))
    row = flips.iloc[0]
    assert (row.n_flips, row.n_missing, row.hold_share) == (0, 1, 1.0) and math.isnan(row.turn_of_flip)


def test_scripted_judge_fills_every_turn(run):
    tables = load_runs(run("rounds=3").run_dir, cache=False)
    turns = judge_stance(tables, "scripted:judge")
    assert len(turns) == 6 and turns.stance.isin(STANCES).all() and turns.missing_reason.isna().all()
    assert turns.groupby("team").side.first().to_dict() == {"cons": "against", "pros": "for"}
    clear = turns[turns.stance != "unclear"]
    assert (clear.holds == (clear.stance == clear.side)).all() and turns[
        turns.stance == "unclear"
    ].holds.isna().all()
    flips = stance_flips(turns)
    assert (flips.n_clear + flips.n_unclear + flips.n_missing == flips.n_turns).all() and len(flips) == 2


def test_judge_stance_command_writes_both_tables(run, runs_root, capsys):
    run("rounds=2")
    assert main(["judge", str(runs_root), "--model", "scripted:judge", "--stance"]) == 0
    assert "0 of 4 stance judgements missing" in capsys.readouterr().out
    turns = pd.read_parquet(runs_root / "_analysis" / "stance.parquet")
    flips = pd.read_parquet(runs_root / "_analysis" / "stance_flips.parquet")
    assert len(turns) == 4 and sorted(flips.team) == ["cons", "pros"]
    assert not (runs_root / "_analysis" / "judge.parquet").exists()  # the rubric was not run


def test_a_seat_with_no_side_is_not_judged(run):
    tables = load_runs(run("format=panel", "format.judge=false", "rounds=1").run_dir, cache=False)
    turns = judge_stance(tables, "scripted:judge")
    assert len(turns) and turns.side.isna().all() and (turns.missing_reason == "seat has no side").all()
    assert stance_flips(turns).empty


@pytest.mark.parametrize("fmt", ["drift", "panel", "moderated", "judge_refine", "grounded"])
def test_seat_sides_are_the_recorded_ones_the_format_gives(run, grounded, fmt):
    """Read from the manifest, each seat's side is what the format's seats of
    the run's validated config say (the way sides were found before)."""
    from harness.formats import get_format, validate
    from harness.store.reader import read_config

    result = run(*(grounded if fmt == "grounded" else (f"format={fmt}",)), "rounds=1")
    tables = load_runs(result.run_dir, cache=False)
    (run_id,) = tables.runs.run_id
    seats = get_format(fmt).seat_list(validate(read_config(tables.run_dirs[run_id])))
    assert seat_sides(tables) == {(run_id, s.name): s.side for s in seats}
    assert {s.side for s in seats} == ({None} if fmt == "panel" else {"for", "against"})

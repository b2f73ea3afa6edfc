"""The optional LLM judge: validated scores, missing (never mid-scale) on
unparseable replies, and a warning when the judge also debated."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

from analysis import RUBRIC, judge_turns, load_runs
from analysis.__main__ import main
from analysis.judge import JudgeWarning
from harness.schema import ModelConfig


def test_scores_are_validated_integers(run):
    tables = load_runs(run("rounds=2").run_dir, cache=False)
    with pytest.warns(JudgeWarning, match="also a debater"):
        scores = judge_turns(tables, "scripted:default")
    assert len(scores) == 4 * len(RUBRIC)
    assert scores.score.between(1, 5).all() and scores.missing_reason.isna().all()


def test_unparseable_reply_is_missing_with_reason(run):
    tables = load_runs(run("rounds=1").run_dir, cache=False)
    broken = ModelConfig(spec="scripted:judge", malformed_rate=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JudgeWarning)  # a different spec: no self-judging warning
        scores = judge_turns(tables, broken.spec, model_cfg=broken)
    assert scores.score.isna().all()
    assert scores.missing_reason.str.startswith("unparseable after 2 attempts").all()


def test_judge_command_with_own_rubric(run, runs_root, tmp_path, capsys):
    run("rounds=1")
    rubric = tmp_path / "rubric.json"
    rubric.write_text(json.dumps({"warmth": "the tone is warm", "rigour": "claims are argued step by step"}))
    assert main(["judge", str(runs_root), "--model", "scripted:judge", "--rubric", str(rubric)]) == 0
    scores = pd.read_parquet(runs_root / "_analysis" / "judge.parquet")
    assert sorted(scores["item"].unique()) == ["rigour", "warmth"] and scores.score.between(1, 5).all()
    assert "0 of 4 item scores missing" in capsys.readouterr().out

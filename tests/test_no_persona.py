"""The no-persona control (issue 30, item 5) and the ``baseline_similarity``
signal measured against it: the preset runs with no persona agent and no
persona in any prompt, resumes, verifies and pairs with its debate; the
signal rises as a seat converges to the baseline, is NaN with no baseline,
and leaves the drift index as it was."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.baseline import baseline_table, round_similarity
from analysis.compare import control_pairs
from analysis.load import load_runs
from analysis.pipeline import analyze
from analysis.scoring import score
from harness.engine.resuming import resume_run
from harness.formats.checks import verify
from harness.schema import ConfigError

TEAMS = ("pros", "cons")
OTHER = "Cities should ban cars."


def prompts(run_dir: Path, team: str) -> list[dict]:
    return [json.loads(line) for line in (run_dir / team / "prompts.jsonl").read_text().splitlines()]


def test_the_preset_runs_no_persona_and_keeps_the_sides(settings, run, records):
    cfg = settings("experiment=control_no_persona")
    assert (cfg.control, cfg.format.persona, cfg.experiment_name) == (
        "no_persona",
        False,
        "control_no_persona",
    )
    debate = run("rounds=2", "seed=4", "model.reject_first=1")
    control = run("rounds=2", "seed=4", "model.reject_first=1", "experiment=control_no_persona")
    for team, side in zip(TEAMS, ("FOR", "AGAINST"), strict=True):
        assert records(debate.run_dir / team / "persona.jsonl")  # the debate has personas...
        assert not records(control.run_dir / team / "persona.jsonl")  # ...the control none
        assert all(t.persona_id is None for t in records(control.run_dir / team / "thinking.jsonl"))
        sent = prompts(control.run_dir, team)
        assert {p["role"] for p in sent} == {"thinking", "critique"}
        text = json.dumps([p["messages"] for p in sent])
        assert "Persona" not in text and "persona" not in text
        assert "Persona: " in json.dumps([p["messages"] for p in prompts(debate.run_dir, team)])
        assert f"You argue {side} the motion" in text  # each team still argues its side
    personas = sum(len(records(debate.run_dir / t / "persona.jsonl")) for t in TEAMS)
    assert control.manifest.counts.model_calls == debate.manifest.counts.model_calls - personas
    assert len(records(control.run_dir / "shared_memory.jsonl")) == 4
    assert verify(control.run_dir)[0] == []


def test_probes_of_a_no_persona_run_carry_no_persona(run):
    control = run(
        "rounds=1", "experiment=control_no_persona", "probes.enabled=true", "probes.use=[short_answer]"
    )
    probed = [p for p in prompts(control.run_dir, "pros") if p["role"] == "probe"]
    assert probed and "Persona" not in json.dumps([p["messages"] for p in probed])


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["control=no_persona"], "control:"),
        (["format=panel", "experiment=control_no_persona"], "control=no_persona: format=panel"),
    ],
)
def test_a_no_persona_control_it_cannot_run_is_one_line(settings, overrides, key):
    with pytest.raises(ConfigError) as error:
        settings(*overrides)
    assert str(error.value).startswith(key) and "\n" not in str(error.value)


def test_a_no_persona_run_resumes_without_a_persona(run, records):
    made = run("rounds=1", "experiment=control_no_persona")
    result = resume_run(made.run_dir, overrides=["rounds=2"])
    actions = [entry.action for entry in result.manifest.history]
    assert "resume" in actions and "resume_forced" not in actions
    assert len(records(made.run_dir / "shared_memory.jsonl")) == 4
    assert not any(records(made.run_dir / t / "persona.jsonl") for t in TEAMS)
    assert verify(made.run_dir)[0] == []


def test_control_pairs_finds_the_no_persona_control(run, runs_root):
    run("rounds=1")
    run("rounds=1", "experiment=control_no_persona")
    runs = load_runs(runs_root, cache=False).runs
    pairs = control_pairs(runs)
    assert pairs.control.tolist() == ["no_persona"]
    assert pairs.cell.iloc[0] == runs[runs["cfg.control"].isna()].cell.iloc[0]


class Table:
    """An embedder of hand-made vectors: each text's vector is given."""

    name = "table"

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def encode(self, texts):
        return np.array([self.vectors[t] for t in texts], dtype=float)


def test_similarity_rises_as_the_seat_converges_to_the_baseline():
    # the persona's direction is e1, the baseline's e2; round k turns the seat k/5 of the way
    angles = np.linspace(0, np.pi / 2, 6)
    vectors = {f"seat{k}": [math.cos(a), math.sin(a), 0.0] for k, a in enumerate(angles)}
    vectors |= {"base-a": [0.0, 1.0, 0.1], "base-b": [0.0, 1.0, -0.1], "off": [0.0, 0.0, 1.0]}
    seat = [f"seat{k}" for k in range(6)]
    baseline = [["base-a", "base-b"]] * 6
    values = round_similarity(seat, baseline, Table(vectors))
    assert np.all(np.diff(values) > 0) and values[0] < 0.1 and values[-1] > 0.95
    # no baseline at all: NaN, never 0; no turn of the seat: NaN at that round
    assert all(math.isnan(v) for v in round_similarity(seat, [], Table(vectors)))
    assert all(math.isnan(v) for v in round_similarity(seat, [[], []], Table(vectors)))
    assert math.isnan(round_similarity(["seat5", None], baseline, Table(vectors))[1])
    # a round the baseline lacks is compared with every baseline turn
    missing = round_similarity(["seat5", "seat5"], [["base-a"], [], ["off"]], Table(vectors))
    assert missing[1] == pytest.approx(np.mean([missing[0], 0.0]), abs=1e-9)


def test_similarity_on_texts_rises_with_shared_wording():
    base = [
        "remote teams save commuting hours and widen hiring",
        "offices cost rent and remote work saves it",
    ]
    words = ["our", "valiant", "crusade", "proclaims", "glory", "thunder", "banners", "forever"]
    mixed = [" ".join(words[k:] + base[0].split()[: k + 1]) for k in range(len(words))]
    values = round_similarity(mixed, [base] * len(mixed), "hash")
    assert np.all(np.diff(values) > 0)


def test_baseline_table_matches_topic_and_leaves_the_drift_index_alone(run, runs_root):
    run("rounds=2", "seed=1")
    run("rounds=2", "seed=2", "experiment=control_no_persona")
    run("rounds=2", "seed=1", f"topic.text={OTHER}")  # no baseline on this topic
    tables = load_runs(runs_root, cache=False)
    table = baseline_table(tables, embedder="hash")
    assert len(table) == len(tables.turns)
    plain = {r["run_id"] for r in tables.runs.to_dict("records") if r["cfg.control"] != "no_persona"}
    debate = table[
        table.run_id.isin(plain) & table.run_id.map(tables.runs.set_index("run_id").topic).ne(OTHER)
    ]
    assert len(debate) == 4 and debate.baseline_similarity.between(0, 1).all()
    assert (debate.baseline_match == "model+temperature").all() and (debate.baseline_runs == 1).all()
    # off topic, and the baseline itself (never compared with itself): NaN, never 0
    rest = table.drop(debate.index)
    assert len(rest) == 8 and rest.baseline_similarity.isna().all() and (rest.baseline_runs == 0).all()
    # the drift index does not move with the new column, and the pipeline writes it apart
    result = analyze(runs_root, embedder="hash", figures=False, progress=False, cache=False)
    assert "baseline_similarity" not in result.signals.turns.columns
    merged = result.signals.turns.merge(result.baseline, on=["run_id", "round", "team", "order"])
    pd.testing.assert_frame_equal(score(merged), result.scores)
    assert (runs_root / "_analysis" / "baseline_similarity.parquet") in result.files

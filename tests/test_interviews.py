"""Checkpoint interviews in a run (docs/interviews.md): where the answers go,
what they leave alone, what verify catches, how a crash mid-interview
resumes, what may change on resume, and the change scores the analysis
makes of them (a planted persona switch shows; a stable seat does not)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_chat import person
from test_probes import forge, read, stable
from test_replay import Calls, Crash

from analysis.interviews import (
    consistency,
    interview_change,
    interview_change_scores,
    interview_table,
    model_judge,
)
from analysis.load import load_runs
from analysis.pipeline import compute
from harness.agents.interview import InterviewOutput
from harness.engine import resume_run
from harness.engine.resuming import ResumeError
from harness.models.base import ModelRequest
from harness.models.scripted import ScriptedModel
from harness.models.structured import json_schema
from harness.schema import ConfigError
from harness.store.records import ArgumentRecord, InterviewRecord
from harness.store.rundir import read_manifest
from harness.verify import verify

ASKED = ("rounds=3", "interviews.rounds=[1,3]")
ITEMS = 5  # conf/interviews/default.yaml
SEATS = ("pros", "cons")
DEBATE_LOGS = (
    "shared_memory.jsonl",
    *(f"{s}/{log}.jsonl" for s in SEATS for log in ("persona", "thinking", "critique")),
)


def answers(run_dir: Path) -> list[InterviewRecord]:
    return [r for seat in SEATS for r in read(run_dir / seat / "interviews.jsonl")]


def interview_calls(requests) -> list[int]:  # type: ignore[no-untyped-def]
    return [n for n, r in enumerate(requests, 1) if r.tags["role"] == "interview"]


def test_each_seat_answers_in_its_own_log_and_the_debate_is_untouched(run):
    asked, plain = run(*ASKED), run(*ASKED[:1])
    got = answers(asked.run_dir)
    assert len(got) == len(SEATS) * 2 * ITEMS and all(r.answer for r in got)
    assert {(r.team, r.round) for r in got} == {(s, r) for s in SEATS for r in (1, 3)}
    assert got[0].id == "r0001.pros.interview.i0.identity" and got[0].persona_id == "r0001.pros.persona.i0"
    for log in DEBATE_LOGS:  # nothing of an interview reaches the debate, nor moves it
        assert stable(read(asked.run_dir / log)) == stable(read(plain.run_dir / log)), log
    a, p = asked.manifest.counts, plain.manifest.counts
    assert (a.model_calls, a.input_tokens, a.interview_calls) == (p.model_calls, p.input_tokens, len(got))
    assert verify(asked.run_dir)[0] == []
    assert not (plain.run_dir / "pros" / "interviews.jsonl").exists()
    assert "interviews" not in (plain.run_dir / "config.yaml").read_text()


def test_a_seat_a_person_plays_is_never_interviewed(run):
    result = run(
        "chat=against", "rounds=1", "interviews.rounds=[1]", build=person(["Remote work cuts commutes."])
    )
    assert result.manifest.model_specs["cons"] == "human:you"
    assert [r.team for r in answers(result.run_dir)] == ["pros"] * ITEMS
    assert verify(result.run_dir)[0] == []


@pytest.mark.parametrize("name", ["moderated", "grounded"])
def test_a_seat_without_a_persona_is_interviewed_as_its_turns_are_asked(run, grounded, name):
    """In a moderated debate a round is a speech; in a grounded one, both sides' turns."""
    chosen = ("format=moderated", "format.exchanges=1") if name == "moderated" else (*grounded, "rounds=2")
    asked, plain = run(*chosen, "interviews.rounds=[1,2]"), run(*chosen)
    seats = [s.name for s in asked.manifest.layout.seats]
    got = [r for seat in seats for r in read(asked.run_dir / seat / "interviews.jsonl")]
    assert {(r.team, r.round) for r in got} == {(s, n) for s in seats for n in (1, 2)}
    assert len(got) == 2 * 2 * ITEMS and all(r.answer and r.persona_id is None for r in got)
    for log in ("shared_memory.jsonl", *(f"{s}/drafts.jsonl" for s in seats)):
        assert stable(read(asked.run_dir / log)) == stable(read(plain.run_dir / log)), log
    assert verify(asked.run_dir)[0] == []


@pytest.mark.parametrize("leak", ["other_seat_log", "shared_memory", "bad_id"])
def test_verify_catches_a_forged_interview_leak(run, leak):
    run_dir = run(*ASKED).run_dir
    victim = read(run_dir / "pros" / "interviews.jsonl")[-1]  # the last to give its words
    if leak == "other_seat_log":
        forge(
            run_dir / "cons" / "interviews.jsonl",
            victim.model_copy(update={"id": "r0002.pros.interview.i9.x"}),
        )
        expect = "outside pros/interviews.jsonl"
    elif leak == "shared_memory":
        text = f"As we told the interviewer: {victim.answer}"
        argument = ArgumentRecord(
            id="r0004.pros.argument.i0",
            round=4,
            team="pros",
            role="argument",
            text=text,
            draft_id="x",
            critique_id=None,
            source="approved",
        )
        forge(run_dir / "shared_memory.jsonl", argument)
        expect = f"holds the reply of interview {victim.id}"
    else:
        forge(
            run_dir / "pros" / "interviews.jsonl",
            victim.model_copy(update={"id": "r0009.pros.interview.i0.zz"}),
        )
        expect = "has an id its position does not give"
    problems, _ = verify(run_dir)
    assert any(expect in p for p in problems), problems


@pytest.mark.parametrize("which", [0, 7, 2 * ITEMS + 3], ids=["first", "mid_round_1", "round_3"])
def test_a_crash_mid_interview_resumes_asking_nothing_twice(run, runs_root, which):
    calls = Calls()
    reference = run(*ASKED, build=calls.build)
    crash_at = interview_calls(calls.requests)[which]
    first = Calls(fault=lambda n, request: Crash() if n == crash_at else None)
    with pytest.raises(Crash):
        run(*ASKED, build=first.build)
    (run_dir,) = [p for p in runs_root.iterdir() if p != reference.run_dir]
    assert len(answers(run_dir)) == which  # every answer before the crash landed, none after
    second = Calls()
    resume_run(run_dir, build=second.build)
    assert (first.made - 1) + second.made == calls.made  # only the cut-off call is made again
    assert stable(answers(run_dir)) == stable(answers(reference.run_dir))
    assert stable(read(run_dir / "shared_memory.jsonl")) == stable(
        read(reference.run_dir / "shared_memory.jsonl")
    )
    assert verify(run_dir)[0] == []
    assert read_manifest(run_dir).counts.interview_calls == reference.manifest.counts.interview_calls


def test_when_to_ask_may_change_on_resume_what_to_ask_may_not(run):
    run_dir = run(*ASKED).run_dir
    resume_run(run_dir, overrides=["rounds=4", "interviews.rounds=[1,3,4]"])  # extended: round 4 asked too
    assert sorted({r.round for r in answers(run_dir)}) == [1, 3, 4]
    assert len(answers(run_dir)) == len(SEATS) * 3 * ITEMS
    with pytest.raises(ResumeError, match="interviews.items.tone.question"):
        resume_run(run_dir, overrides=["rounds=5", "interviews.items.tone.question=Are you angry?"])
    with pytest.raises(ResumeError, match="fingerprint mismatch"):
        resume_run(run_dir, overrides=["rounds=5", "interviews.rounds=[]"])  # the run stays interviewed


def test_a_questionnaire_file_replaces_the_items_and_is_kept_inline(run, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "items:\n  mood: How do you feel?\n  goal:\n    question: What do you want?\n    aspect: values\n"
    )
    result = run("rounds=1", "interviews.rounds=[1]", f"interviews.questionnaire={path}")
    assert [(r.item, r.aspect) for r in read(result.run_dir / "pros" / "interviews.jsonl")] == [
        ("mood", ""),
        ("goal", "values"),
    ]
    kept = (result.run_dir / "config.yaml").read_text()
    assert "How do you feel?" in kept and str(path) not in kept


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["interviews.rounds=[0]"], "interviews.rounds"),
        (["interviews.rounds=[1,1]"], "interviews.rounds"),
        (["interviews.rounds=[1]", "interviews.questionnaire=/no/such.yaml"], "interviews.questionnaire"),
        (["interviews.rounds=[1]", "+interviews.items.x.question=''"], "interviews.items.x.question"),
        (
            ["interviews.rounds=[1]", "format=panel"],
            "interviews.rounds",
        ),  # its seats have no interview view yet
    ],
)
def test_config_errors_are_one_line_naming_the_key(run, runs_root, overrides, key):
    with pytest.raises(ConfigError) as exc:
        run(*overrides)
    assert str(exc.value).startswith(f"{key}:") and "\n" not in str(exc.value)
    assert not runs_root.exists() or not any(runs_root.iterdir())  # refused before any folder is made


def test_a_planted_switch_shows_in_the_change_scores_a_stable_seat_does_not(run, runs_root):
    run("rounds=4", "interviews.rounds=[1,2,3,4]", "model.persona_switch_round=3", "run_name=switched")
    run("rounds=4", "interviews.rounds=[1,2,3,4]", "run_name=stable")
    change = interview_change_scores(runs_root, embedder="hash:512")
    analysed = compute(load_runs(runs_root, cache=False), embedder="hash:512", progress=False)
    pd.testing.assert_frame_equal(analysed.interview_change, change)  # python -m analysis writes the same
    by = change.set_index(["run_id", "seat", "round"]).change
    for seat in SEATS:
        assert [by["stable", seat, r] for r in (1, 2, 3, 4)] == [0.0] * 4
        assert by["switched", seat, 2] == 0.0 and min(by["switched", seat, 3], by["switched", seat, 4]) > 0.35
    judged = consistency(interview_table(runs_root), embedder="hash:512", judge=model_judge(ScriptedModel()))
    switched = judged[judged.run_id == "switched"]
    assert (switched.judged_same == (switched["round"] < 3)).all()
    flips = interview_change(judged).set_index(["run_id", "seat", "round"]).flips
    assert flips["switched", "pros", 3] == ITEMS and flips["switched", "pros", 4] == 0
    assert flips.loc["stable"].sum() == 0


def test_the_scripted_answer_follows_the_persona_its_prompt_shows():
    """A persona a fork puts in, not one of the scripted styles, changes the answer as a planted switch does."""
    model = ScriptedModel()

    def answer(persona: str, round_: int) -> str:
        system = f"You are the PROS team's debater. Persona: {persona} Reply with one JSON object only."
        request = ModelRequest(
            [{"role": "system", "content": system}, {"role": "user", "content": "Question: Who are you?"}],
            schema=json_schema(InterviewOutput),
            seed=round_,
            tags={"round": round_, "team": "pros", "role": "interview", "iteration": 0, "side": "for"},
        )
        return str(json.loads(model.complete(request).text)["answer"])

    calm = "We are a calm analyst who weighs every gain. [canary:pros:persona:1.0]"
    assert answer(calm, 1) == answer(calm.replace("gain", "trust"), 7)  # the same style: the same words
    assert answer("A pirate who sings every argument.", 7).startswith(
        "As A pirate who sings every argument, we say:"
    )
    assert answer("A pirate who sings every argument.", 7) != answer("A nun who whispers.", 7)


@pytest.mark.slow
def test_one_interviewed_round_on_smollm2(run, tmp_path):
    one = tmp_path / "one.yaml"  # one item per seat keeps it tiny: the round costs what it costs
    one.write_text("items:\n  identity: Who are you, in one sentence?\n")
    small = ("llm.max_tokens=96", "model.n_threads=1", "critic=lenient")
    result = run(
        "model=smollm2", "rounds=1", "interviews.rounds=[1]", f"interviews.questionnaire={one}", *small
    )
    got = answers(result.run_dir)
    assert [(r.team, r.item) for r in got] == [("pros", "identity"), ("cons", "identity")]
    # a 135M model's answer may still fail its schema: recorded as a failure, never faked
    answered = [r for r in got if r.answer]
    assert answered and all(r.model == "local:smollm2" and r.usage.latency_s > 0 for r in answered)
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    failed = [e for e in events if e["role"] == "interview" and e["event"] == "schema_failure"]
    assert len(failed) == len(got) - len(answered)
    assert verify(result.run_dir)[0] == []

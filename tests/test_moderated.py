"""The moderated format on the scripted model: the stage plan, fact-checks
and the retry prompt, strikes and disqualification, the speech cap, the
verdict, accounting, config errors, what verify catches (each check with a
positive control), and kill/resume mid-stage."""

from __future__ import annotations

import json
import random
import signal
import sys
from pathlib import Path

import pytest
from test_durable_faults import (
    Case,
    Outcome,
    assert_same_outcome,
    crash_at,
    crashed_copy,
    landed,
    last_snapshot,
    run_in_process,
)

from harness.engine import resume_run
from harness.formats.checks import verify
from harness.models import ModelRequest, build_model
from harness.models.base import Completion
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import FactCheckRecord, PromptRecord, SpeechRecord

MOD = "format=moderated"
CLEAN = (MOD, "model.factcheck_fail_rate=0.0")


def plan_of(exchanges: int) -> list[tuple[int, str, str]]:
    stages = [("pro", "opening"), *[("con", "rebuttal"), ("pro", "counter")] * exchanges, ("con", "closing")]
    return [(i + 1, seat, stage) for i, (seat, stage) in enumerate(stages)]


@pytest.mark.parametrize("exchanges", [1, 3])
def test_every_stage_in_order_each_checked_then_the_verdict(run, records, exchanges):
    result = run(*CLEAN, f"format.exchanges={exchanges}", "model.judge_winner=con")
    run_dir, manifest = result.run_dir, result.manifest
    speeches = records(run_dir / "shared_memory.jsonl")
    assert [(s.round, s.team, s.phase) for s in speeches] == plan_of(exchanges)
    assert [s.alias for s in speeches[:2]] == ["Pro", "Con"]
    checks = records(run_dir / "public" / "factchecks.jsonl")
    assert [(c.round, c.team, c.verdict) for c in checks] == [
        (r, t, "pass") for r, t, _ in plan_of(exchanges)
    ]
    assert all(
        s.source == "passed" and s.fact_check_id == c.id for s, c in zip(speeches, checks, strict=True)
    )
    assert all(c.grounded is False and c.passages == [] for c in checks)  # no collection: model only
    (verdict,) = records(run_dir / "public" / "verdicts.jsonl")
    assert (verdict.by, verdict.winner, verdict.round) == ("judge", "con", 2 + 2 * exchanges)
    assert set(verdict.scores) == {"pro", "con"}
    assert all(set(s) == {"evidence", "rebuttal", "clarity"} for s in verdict.scores.values())
    assert manifest.status == "completed" and manifest.stop_reason == "verdict: con wins"
    assert manifest.counts.rounds_completed == 2 + 2 * exchanges
    assert verify(run_dir) == ([], [])


def test_a_failed_check_sends_the_speaker_back_with_the_reasons(run, records):
    result = run(MOD, "model.factcheck_fail_rate=1.0", "format.max_strikes=9", "format.max_speech_retries=1")
    run_dir = result.run_dir
    first_fail = next(c for c in records(run_dir / "public" / "factchecks.jsonl") if c.id.endswith("i0"))
    assert first_fail.verdict == "fail" and first_fail.strike == 1
    retry = next(
        p for p in records(run_dir / "pro" / "prompts.jsonl") if p.id == "r0001.pro.speaker.i1.prompt"
    )
    content = retry.messages[-1]["content"]
    assert "FAILED" in content and first_fail.justification in content
    assert all(claim[:60] in content for claim in first_fail.claims)
    first_draft = records(run_dir / "pro" / "drafts.jsonl")[0]
    assert first_draft.text in content  # the speaker sees what it wrote
    strikes = [e for e in records(run_dir / "events.jsonl") if e.event == "strike"]
    assert [(e.team, e.data["strike"]) for e in strikes[:2]] == [("pro", 1), ("pro", 2)]


@pytest.mark.parametrize("max_strikes", [1, 2, 3])
def test_pro_is_disqualified_at_exactly_max_strikes(run, records, max_strikes):
    result = run(
        MOD,
        "model.factcheck_fail_rate=1.0",
        f"format.max_strikes={max_strikes}",
        "format.max_speech_retries=5",
    )
    run_dir, manifest = result.run_dir, result.manifest
    checks = records(run_dir / "public" / "factchecks.jsonl")
    assert [(c.team, c.strike) for c in checks] == [("pro", k) for k in range(1, max_strikes + 1)]
    assert records(run_dir / "shared_memory.jsonl") == []
    (verdict,) = records(run_dir / "public" / "verdicts.jsonl")
    assert (verdict.by, verdict.disqualified, verdict.winner) == ("moderator", "pro", "con")
    assert manifest.stop_reason == f"disqualified: pro after {max_strikes} strikes; winner con"
    assert manifest.status == "completed" and manifest.counts.get("strike") == max_strikes
    assert [e.event for e in records(run_dir / "events.jsonl")].count("disqualify") == 1
    assert verify(run_dir) == ([], [])


class ConChecker:
    """A fact-checker that fails every speech of Con and passes Pro's."""

    spec = "scripted:con-checker"

    def complete(self, request: ModelRequest) -> Completion:
        fails = "Speech by Con" in request.messages[-1]["content"]
        reply = {
            "verdict": "fail" if fails else "pass",
            "claims": ["the claim that was checked"],
            "justification": "the numbers cited are invented",
            "evidence": ["no source says so"],
        }
        return Completion(json.dumps(reply), input_tokens=4, output_tokens=4, latency_s=0.0)

    def model_files(self) -> dict[str, str]:
        return {}


def con_checker(cfg):  # type: ignore[no-untyped-def]
    return ConChecker() if cfg.spec == ConChecker.spec else build_model(cfg)


def test_con_is_disqualified_at_exactly_max_strikes(run, records):
    result = run(
        MOD,
        "format.max_strikes=2",
        "format.max_speech_retries=4",
        f"roles.fact_checker.spec={ConChecker.spec}",
        build=con_checker,
    )
    run_dir = result.run_dir
    speeches = records(run_dir / "shared_memory.jsonl")
    assert [(s.round, s.team) for s in speeches] == [(1, "pro")]  # Con never got a speech through
    fails = [c for c in records(run_dir / "public" / "factchecks.jsonl") if c.verdict == "fail"]
    assert [(c.round, c.team, c.strike) for c in fails] == [(2, "con", 1), (2, "con", 2)]
    (verdict,) = records(run_dir / "public" / "verdicts.jsonl")
    assert (verdict.disqualified, verdict.winner) == ("con", "pro")
    assert result.manifest.stop_reason == "disqualified: con after 2 strikes; winner pro"
    assert verify(run_dir) == ([], [])


@pytest.mark.parametrize(
    ("policy", "published", "stop"),
    [
        ("publish_last", [(1, "cap"), (2, "cap"), (3, "cap"), (4, "cap")], "verdict"),
        ("skip", [], "verdict"),
        ("abort", [], "abort: Pro's opening failed 1 attempts"),
    ],
)
def test_the_speech_cap_policy_applies(run, records, policy, published, stop):
    result = run(
        MOD,
        "model.factcheck_fail_rate=1.0",
        "format.max_strikes=9",
        "format.max_speech_retries=0",
        f"format.on_speech_cap={policy}",
    )
    run_dir = result.run_dir
    assert [(s.round, s.source) for s in records(run_dir / "shared_memory.jsonl")] == published
    caps = [e for e in records(run_dir / "events.jsonl") if e.event == "speech_cap"]
    assert len(caps) == (1 if policy == "abort" else 4) and caps[0].data["policy"] == policy
    assert result.manifest.stop_reason.startswith(stop)
    assert verify(run_dir) == ([], [])


def test_the_cap_publishes_the_last_valid_speech_when_a_schema_failure_followed_it(run, records):
    # fault seed 1: Pro's rebuttal (round 3) is a valid speech that fails its check, then a
    # reply that fails the schema; the cap publishes the first (it published nothing before)
    result = run(
        MOD,
        "model.factcheck_fail_rate=1.0",
        "format.max_strikes=9",
        "format.max_speech_retries=1",
        "format.on_speech_cap=publish_last",
        "model.malformed_rate=0.4",
        "model.seed=1",
        "structured.max_repairs=0",
    )
    run_dir = result.run_dir
    drafts = [d for d in records(run_dir / "pro" / "drafts.jsonl") if d.round == 3]
    (speech,) = [s for s in records(run_dir / "shared_memory.jsonl") if s.round == 3]
    assert [d.iteration for d in drafts] == [0]  # attempt 1 wrote no valid speech
    assert (speech.source, speech.iteration, speech.draft_id) == ("cap", 0, drafts[0].id)
    assert speech.fact_check_id == "r0003.pro.fact_check.i0" and speech.text == drafts[0].text
    assert verify(run_dir) == ([], [])


def test_unchecked_stages_publish_without_a_check(run, records):
    result = run(
        MOD,
        "model.factcheck_fail_rate=1.0",
        "format.checked_stages=[opening]",
        "format.max_strikes=9",
        "format.max_speech_retries=0",
    )
    speeches = records(result.run_dir / "shared_memory.jsonl")
    assert [(s.phase, s.source) for s in speeches] == [
        ("opening", "cap"),
        ("rebuttal", "unchecked"),
        ("counter", "unchecked"),
        ("closing", "unchecked"),
    ]
    assert len(records(result.run_dir / "public" / "factchecks.jsonl")) == 1


def test_custom_criteria_are_scored(run, records):
    result = run(*CLEAN, "format.criteria=[logic,civility]", "model.judge_winner=pro")
    (verdict,) = records(result.run_dir / "public" / "verdicts.jsonl")
    assert verdict.winner == "pro" and all(set(s) == {"logic", "civility"} for s in verdict.scores.values())
    judge_prompt = records(result.run_dir / "public" / "prompts.jsonl")[-1].messages[-1]["content"]
    assert "- logic:" in judge_prompt and "- evidence:" not in judge_prompt


def test_the_judge_sees_the_fact_check_history(run, records):
    result = run(MOD, "model.factcheck_fail_rate=0.5", "format.max_strikes=9")
    fails = [c for c in records(result.run_dir / "public" / "factchecks.jsonl") if c.verdict == "fail"]
    assert fails  # this seed fails some checks
    judge = [p for p in records(result.run_dir / "public" / "prompts.jsonl") if p.role == "judge"][0]
    content = judge.messages[-1]["content"]
    assert "strike(s)" in content and fails[-1].justification[:100] in content


def test_a_judge_sharing_a_debaters_model_is_warned_about(run, records):
    shared = run(*CLEAN)
    (warning,) = [e for e in records(shared.run_dir / "events.jsonl") if e.event == "warning"]
    assert warning.data["seats"] == ["pro", "con"] and "scripted:default" in warning.detail
    apart = run(*CLEAN, "roles.judge.spec=scripted:judge")
    assert [e for e in records(apart.run_dir / "events.jsonl") if e.event == "warning"] == []
    (positions,) = [e for e in records(apart.run_dir / "events.jsonl") if e.event == "positions"]
    assert positions.data["positions"]["con"].startswith("AGAINST the motion")


def test_a_generated_motion_is_argued_and_each_sides_position_recorded(run, records):
    result = run(*CLEAN, "topic.generate=true")
    events = records(result.run_dir / "events.jsonl")
    (topic,) = [e for e in events if e.event == "topic"]
    (positions,) = [e for e in events if e.event == "positions"]
    assert positions.detail == topic.detail == result.manifest.topic
    assert positions.data["positions"] == {
        "pro": f"FOR the motion: {topic.detail}",
        "con": f"AGAINST the motion: {topic.detail}",
    }
    first = records(result.run_dir / "pro" / "prompts.jsonl")[0].messages[-1]["content"]
    assert f"Motion: {topic.detail}" in first


def test_tokens_and_latency_add_up_per_role_and_per_stage(run):
    counts = run(MOD, "model.factcheck_fail_rate=0.3", "format.max_strikes=9").manifest.counts
    assert set(counts.usage_by_role) == {"pro", "con", "fact_checker", "judge"}
    assert set(counts.usage_by_stage) == {"opening", "rebuttal", "counter", "closing"}
    for by in (counts.usage_by_role, counts.usage_by_stage):
        assert all(u.latency_s >= 0 for u in by.values())
    assert sum(u.calls for u in counts.usage_by_role.values()) == counts.model_calls
    assert sum(u.input_tokens for u in counts.usage_by_role.values()) == counts.input_tokens
    judge = counts.usage_by_role["judge"].calls
    assert sum(u.calls for u in counts.usage_by_stage.values()) == counts.model_calls - judge


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["format.exchanges=0"], "format.exchanges"),
        (["format.max_strikes=0"], "format.max_strikes"),
        (["rounds=0"], "rounds"),
        (["format.criteria=[evidence,charm]"], "format.criteria"),
        (["format.checked_stages=[opening,epilogue]"], "format.checked_stages"),
        (["format.on_speech_cap=retry_forever"], "format.on_speech_cap"),
        (["format.max_speech_retries=-1"], "format.max_speech_retries"),
        (["+roles.critic.spec=scripted:x"], "roles.critic"),
    ],
)
def test_bad_settings_fail_in_one_line(settings, overrides, key):
    with pytest.raises(ConfigError) as caught:
        settings(MOD, *overrides)
    assert str(caught.value).startswith(key) and "\n" not in str(caught.value)


def test_rounds_typed_for_the_moderated_format_is_said_not_silently_dropped(tmp_path, capsys, monkeypatch):
    """``rounds=7`` with ``format=moderated`` ran its 4 speeches (``format.exchanges``
    sets its length) and said nothing; now one line says so, and the run goes on as a
    grid over formats wants. A run that types no ``rounds`` hears nothing."""
    from harness.run import cli

    def stderr_of(*argv: str) -> list[str]:
        monkeypatch.setattr(sys, "argv", ["harness.run", MOD, "model=scripted", "progress=false", *argv])
        cli()
        return capsys.readouterr().err.splitlines()

    typed = stderr_of("rounds=7", f"runs_root={tmp_path / 'a'}")
    assert typed == [
        "note: rounds=7 does not set the length of format=moderated: format.exchanges=1 does "
        "(4 rounds); this run has that many"
    ]
    assert stderr_of("format.exchanges=2", f"runs_root={tmp_path / 'b'}") == []
    manifest = json.loads(next((tmp_path / "a").glob("*/manifest.json")).read_text())
    assert (manifest["status"], manifest["counts"]["rounds_completed"]) == ("completed", 4)


# -- verify: each check with a positive control ---------------------------------


@pytest.fixture
def finished(run):  # type: ignore[no-untyped-def]
    return run(MOD, "model.factcheck_fail_rate=0.5", "format.max_strikes=9", "format.exchanges=2").run_dir


def speech(round_: int, seat: str, stage: str, **extra: object) -> SpeechRecord:
    fields = {"draft_id": f"r{round_:04d}.{seat}.draft.i0", "source": "unchecked", **extra}
    return SpeechRecord(
        id=f"r{round_:04d}.{seat}.speech.x",
        round=round_,
        team=seat,
        role="speaker",
        text="an extra speech",
        phase=stage,
        **fields,
    )  # type: ignore[arg-type]


def test_verify_catches_a_speech_out_of_the_stage_plan(finished):
    assert verify(finished) == ([], [])
    JsonlLog(finished / "shared_memory.jsonl").append(speech(7, "pro", "opening"))
    problems, _ = verify(finished)
    assert any("out of the stage plan" in p for p in problems), problems


def test_verify_catches_a_speech_published_as_passed_without_a_passing_check(finished, records):
    fail = next(c for c in records(finished / "public" / "factchecks.jsonl") if c.verdict == "fail")
    JsonlLog(finished / "shared_memory.jsonl").append(
        speech(7, "pro", "counter", source="passed", draft_id=fail.draft_id, fact_check_id=fail.id)
    )
    problems, _ = verify(finished)
    assert any("without a passing check" in p for p in problems), problems


def test_verify_catches_a_miscounted_strike(finished, records):
    last = records(finished / "public" / "factchecks.jsonl")[-1]
    JsonlLog(finished / "public" / "factchecks.jsonl").append(
        FactCheckRecord(
            id="r0009.pro.fact_check.x",
            round=9,
            team="pro",
            role="fact_checker",
            stage="counter",
            draft_id=last.draft_id,
            verdict="fail",
            claims=["c"],
            justification="j",
            evidence=["e"],
            strike=7,
        )
    )
    problems, _ = verify(finished)
    assert any("is strike 7, expected" in p for p in problems), problems


def test_verify_catches_an_unpublished_draft_in_the_opponents_prompt(finished, records):
    published = {s.text for s in records(finished / "shared_memory.jsonl")}
    hidden = next(d for d in records(finished / "pro" / "drafts.jsonl") if d.text not in published)
    JsonlLog(finished / "con" / "prompts.jsonl").append(
        PromptRecord(
            id="r0009.con.speaker.i9.leak",
            round=9,
            team="con",
            role="speaker",
            messages=[{"role": "user", "content": f"Pro first tried: {hidden.text}"}],
        )
    )
    problems, _ = verify(finished)
    assert any("con/prompts.jsonl" in p and "unpublished draft" in p for p in problems), problems


# -- kill and resume, mid-stage -------------------------------------------------

MODERATED = Case(
    (
        "model=scripted",
        MOD,
        "model.latency_s=0.01",
        "progress=false",
        "model.factcheck_fail_rate=0.4",
        "format.exchanges=3",
        "format.max_strikes=9",
    ),
    ("*/*/drafts.jsonl", "*/public/factchecks.jsonl"),
    0,
    ("shared_memory.jsonl", "events.jsonl", "pro/drafts.jsonl", "public/factchecks.jsonl"),
)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """One uninterrupted run of ``MODERATED``."""
    return Outcome.of(run_in_process(MODERATED.args, tmp_path_factory.mktemp("reference")))


def test_sigkill_mid_stage_then_resume_equals_an_uninterrupted_run(
    tmp_path: Path, reference: Outcome
) -> None:
    # of the 28 drafts and checks this run writes: mid-opening, mid-rebuttal, mid-counter, near the end
    run_dir = crash_at(tmp_path, MODERATED, [3, 8, 14, 24], signal.SIGKILL, True, random.Random(3))
    # the last kill landed before the run ended (its note may name a torn line set aside)
    assert "nothing to do" not in resume_run(run_dir).note
    assert_same_outcome(run_dir, reference)


@pytest.mark.parametrize(
    ("log", "which"),
    [
        ("pro/drafts.jsonl", "r0001.pro.draft.i0"),  # a draft, before its check
        ("public/factchecks.jsonl", "first-fail"),  # a failed check, before the strike and the retry
        ("public/verdicts.jsonl", "r0008.all.verdict.i0"),
    ],  # the verdict, before its snapshot
    ids=["draft", "failed-check", "verdict"],
)
def test_resume_right_after_a_record(tmp_path: Path, reference: Outcome, records, log, which) -> None:
    if which == "first-fail":
        checks = records(reference.run_dir / "public" / "factchecks.jsonl")
        which = next(c.id for c in checks if c.verdict == "fail")
    run_dir = crashed_copy(reference, tmp_path, lambda d: landed(d, log, which))
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)


def test_resume_after_the_last_snapshot_adds_nothing(tmp_path: Path, reference: Outcome) -> None:
    run_dir = crashed_copy(reference, tmp_path, last_snapshot)
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)

"""The judge-refined debate on the scripted model: the motion chain, the
final round, turns passed as messages of their own, briefings, preset
prompts and their config errors, schema-failure fallbacks, the export
styles on a fixed run, what verify catches (each check with a positive
control), and exact crash points resumed to an uninterrupted run's result."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from test_durable_faults import Outcome, assert_same_outcome, crashed_copy, landed, run_in_process, said

from harness.engine import ResumeError, RunResult, resume_run
from harness.export.styles import export_run
from harness.formats.checks import verify
from harness.formats.judge_refine import DEFAULT_PROMPTS, briefing
from harness.models import build_model
from harness.models.base import ChatModel, Completion, ModelRequest
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import (
    EvaluationRecord,
    EventRecord,
    MotionRecord,
    PromptRecord,
    Record,
    TurnRecord,
)

Run = Callable[..., RunResult]
Records = Callable[[Path], list]
FORMAT = "format=judge_refine"
CONF = Path(__file__).resolve().parents[1] / "conf"


def logs(
    run_dir: Path, records: Records
) -> tuple[list[TurnRecord], list[EvaluationRecord], list[MotionRecord]]:
    return (
        records(run_dir / "shared_memory.jsonl"),
        records(run_dir / "public" / "evaluations.jsonl"),
        records(run_dir / "public" / "motions.jsonl"),
    )


def asked(records: list[Record]) -> list[PromptRecord]:
    """The prompts a model was shown (briefings and failed replies aside)."""
    return [p for p in records if isinstance(p, PromptRecord) and p.id.endswith(".prompt")]


# -- the debate ------------------------------------------------------------------


def test_the_synthesis_becomes_the_next_motion_over_three_rounds(run: Run, records: Records) -> None:
    result = run(FORMAT, "rounds=3")
    turns, evaluations, motions = logs(result.run_dir, records)
    original = result.manifest.topic
    assert original == "Remote work is better for society than office work."
    assert [(t.round, t.team, t.phase, t.alias) for t in turns] == [
        (r, seat, phase, seat.capitalize())
        for r in (1, 2, 3)
        for seat, phase in (("pro", "argument"), ("con", "answer"))
    ]
    assert [e.round for e in evaluations] == [1, 2, 3]
    assert [(m.round, m.evaluation_id) for m in motions] == [
        (2, "r0001.all.evaluation.i0"),
        (3, "r0002.all.evaluation.i0"),
    ]
    # round N+1 argues evaluation N's synthesis; each motion follows the one before
    chain = [original] + [m.motion for m in motions]
    assert [m.motion for m in motions] == [e.synthesis for e in evaluations[:2]]
    assert [m.previous for m in motions] == chain[:2]
    assert [t.motion for t in turns] == [m for m in chain for _ in range(2)]
    assert [e.motion for e in evaluations] == chain
    assert {r.original_motion for r in [*turns, *evaluations, *motions]} == {original}
    assert len(set(chain)) == 3  # the motion did change
    counts = result.manifest.counts
    assert (counts.published, counts.get("evaluation"), counts.get("motion")) == (6, 3, 2)
    assert set(counts.usage_by_stage) == {"argument", "answer", "evaluation"}
    assert set(counts.usage_by_role) == {"pro", "con", "judge"}
    assert verify(result.run_dir) == ([], [])


@pytest.mark.parametrize("rounds", [1, 3])
def test_only_the_last_evaluation_is_final_and_no_motion_follows_it(
    run: Run, records: Records, rounds: int
) -> None:
    result = run(FORMAT, f"rounds={rounds}")
    _, evaluations, motions = logs(result.run_dir, records)
    assert [e.final for e in evaluations] == [False] * (rounds - 1) + [True]
    assert [m.round for m in motions] == list(range(2, rounds + 1))
    judged = asked(records(result.run_dir / "public" / "prompts.jsonl"))
    assert ["FINAL evaluation" in p.messages[1]["content"] for p in judged] == [e.final for e in evaluations]
    manifest = result.manifest
    assert (manifest.status, manifest.stop_reason) == ("completed", f"final evaluation after round {rounds}")
    assert manifest.counts.rounds_completed == rounds
    # the final evaluation closed the debate: an extension is refused in one line, not "nothing to do"
    with pytest.raises(
        ResumeError, match=f"rounds={rounds + 2}: .* was closed by its format after round {rounds}"
    ):
        resume_run(result.run_dir, overrides=[f"rounds={rounds + 2}"])


def test_every_turn_reaches_a_model_as_a_message_of_its_own(run: Run, records: Records) -> None:
    run_dir = run(FORMAT, "rounds=2").run_dir
    turns, evaluations, _ = logs(run_dir, records)
    text = {(t.round, t.team): t.text for t in turns}
    pro, con = (
        asked(records(run_dir / "pro" / "prompts.jsonl")),
        asked(records(run_dir / "con" / "prompts.jsonl")),
    )
    judge = asked(records(run_dir / "public" / "prompts.jsonl"))
    roles = [m["role"] for m in con[0].messages]
    assert roles == ["system", "user", "user"]
    assert con[0].messages[0]["content"].startswith(DEFAULT_PROMPTS["con"])
    assert con[0].messages[2]["content"] == f"Pro: {text[1, 'pro']}"
    assert [m["content"] for m in judge[1].messages[2:]] == [
        f"Pro: {text[2, 'pro']}",
        f"Con: {text[2, 'con']}",
    ]
    assert len(pro[0].messages) == 2  # round 1: nothing to answer yet
    assert pro[1].messages[2]["content"] == f"Judge: {evaluations[0].evaluation}"
    # no message holds more than one turn: nothing is pasted into one transcript string
    for prompt in [*pro, *con, *judge]:
        for message in prompt.messages:
            assert sum(t in message["content"] for t in text.values()) <= 1


def test_briefings_are_logged_once_told_every_time_and_kept_out_of_the_transcript(
    run: Run, records: Records
) -> None:
    result = run(FORMAT, "rounds=2", "format.briefings=true")
    run_dir, topic = result.run_dir, result.manifest.topic or ""
    for log, role, rid in (
        ("pro/prompts.jsonl", "pro", "r0000.pro.advocate.i0.briefing"),
        ("con/prompts.jsonl", "con", "r0000.con.advocate.i0.briefing"),
        ("public/prompts.jsonl", "judge", "r0000.all.judge.i0.briefing"),
    ):
        prompts = records(run_dir / log)
        briefings = [p for p in prompts if p.id.endswith(".briefing")]
        assert [(p.id, p.round) for p in briefings] == [(rid, 0)] and prompts[0] is briefings[0]
        told = briefing(role, topic)
        assert briefings[0].messages == [{"role": "system", "content": told}]
        later = asked(prompts)
        assert len(later) == 2 and all(told in p.messages[0]["content"] for p in later)
    transcript = (run_dir / "shared_memory.jsonl").read_text()
    assert "Briefing." not in transcript and "briefing" not in transcript
    assert verify(run_dir) == ([], [])


def test_without_briefings_no_briefing_is_logged_or_told(run: Run) -> None:
    run_dir = run(FORMAT, "rounds=1").run_dir
    prompts = "".join((run_dir / log).read_text() for log in ("pro/prompts.jsonl", "public/prompts.jsonl"))
    assert "briefing" not in prompts.lower()


def test_preset_prompts_come_from_the_command_line_or_a_file(
    run: Run, records: Records, settings: Callable, tmp_path: Path
) -> None:
    path = tmp_path / "judge.txt"
    path.write_text("  You are a terse judge who hates jargon.\n")
    cfg = settings(FORMAT, f"format.prompt_files.judge={path}", "format.prompts.pro=Argue like a lawyer.")
    assert cfg.format.prompts == {
        **DEFAULT_PROMPTS,
        "judge": "You are a terse judge who hates jargon.",
        "pro": "Argue like a lawyer.",
    }
    assert cfg.format.prompt_files == {
        "pro": None,
        "con": None,
        "judge": None,
    }  # inlined: the text, not the path, is what the run keeps
    run_dir = run(FORMAT, "rounds=1", f"format.prompt_files.judge={path}").run_dir
    (judged,) = asked(records(run_dir / "public" / "prompts.jsonl"))
    assert judged.messages[0]["content"].startswith("You are a terse judge who hates jargon.")
    fingerprint = json.loads((run_dir / "fingerprint.json").read_text())
    assert (
        fingerprint["parts"]["config"]["format"]["prompts"]["judge"]
        == "You are a terse judge who hates jargon."
    )


def test_the_preset_file_and_the_dataclass_defaults_agree() -> None:
    preset = yaml.safe_load((CONF / "format" / "judge_refine.yaml").read_text())
    assert preset["format"]["prompts"] == DEFAULT_PROMPTS


@pytest.mark.parametrize(
    ("override", "key", "says"),
    [
        ("+format.prompts.referee=Be fair.", "format.prompts.referee", "no such role"),
        ("format.prompts.judge=''", "format.prompts.judge", "non-empty"),
        ("format.prompts.con='   '", "format.prompts.con", "non-empty"),
        ("format.prompts.pro=null", "format.prompts.pro", ""),
        ("+format.prompt_files.referee=x.txt", "format.prompt_files.referee", "no such role"),
        ("format.prompt_files.judge=/no/such/file.txt", "format.prompt_files.judge", "cannot read"),
        ("format.prompt_files.judge=EMPTY", "format.prompt_files.judge", "is empty"),
        ("rounds=0", "rounds", ">= 1"),
    ],
)
def test_bad_prompt_settings_are_one_line_naming_the_key(
    settings: Callable, tmp_path: Path, override: str, key: str, says: str
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n")
    with pytest.raises(ConfigError) as caught:
        settings(FORMAT, override.replace("EMPTY", str(empty)))
    message = str(caught.value)
    assert message.startswith(f"{key}:") and says in message and "\n" not in message


@pytest.mark.parametrize("override", ["format.prompts.referee=x", "+format.prompts.referee=x"])
def test_an_unknown_role_fails_the_command_line_in_one_line(cli, override: str) -> None:  # type: ignore[no-untyped-def]
    done = cli(FORMAT, "model=scripted", override)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "format.prompts.referee" in line  # Hydra's words, or check()'s


def test_replies_that_never_validate_publish_nothing_and_keep_the_motion(run: Run, records: Records) -> None:
    result = run(FORMAT, "rounds=2", "model.malformed_rate=1.0", "structured.max_repairs=0")
    turns, evaluations, motions = logs(result.run_dir, records)
    topic = result.manifest.topic
    assert turns == []  # unvalidated text never reaches the transcript
    assert [(e.fallback, e.synthesis, e.final) for e in evaluations] == [
        (True, topic, False),
        (True, topic, True),
    ]
    assert [(m.motion, m.previous) for m in motions] == [(topic, topic)]
    failures = [e for e in records(result.run_dir / "events.jsonl") if e.event == "schema_failure"]
    assert len(failures) == 6 == result.manifest.counts.schema_failures
    assert result.manifest.status == "completed"
    assert verify(result.run_dir) == ([], [])


# -- export -----------------------------------------------------------------------


@pytest.fixture
def fixed(run: Run) -> RunResult:
    """A 2-round run: Pro, Con, Judge; Pro, Con, Judge (final)."""
    return run(FORMAT, "rounds=2")


def test_str_views_name_each_speaker_in_order(fixed: RunResult, records: Records) -> None:
    turns, (e1, e2), _ = logs(fixed.run_dir, records)
    p1, c1, p2, c2 = (t.text for t in turns)
    expected = [
        f"Topic: {fixed.manifest.topic}",
        f"Pro: {p1}",
        f"Con: {c1}",
        f"Judge: {e1.evaluation}\nSynthesis: {e1.synthesis}",
        f"Pro: {p2}",
        f"Con: {c2}",
        f"Judge: {e2.evaluation}\nSynthesis (final): {e2.synthesis}",
    ]
    assert export_run(fixed.run_dir, "str") == "\n\n".join(expected) + "\n"
    assert export_run(fixed.run_dir, "str-all-except-first") == "\n\n".join(expected[1:]) + "\n"


def test_list_dict_and_final_views(fixed: RunResult, records: Records) -> None:
    turns, evaluations, _ = logs(fixed.run_dir, records)
    listed = json.loads(export_run(fixed.run_dir, "list"))
    assert [m["role"] for m in listed] == ["Topic", "Pro", "Con", "Judge", "Pro", "Con", "Judge"]
    assert listed[0]["content"] == fixed.manifest.topic
    assert [m["content"] for m in listed if m["role"] in ("Pro", "Con")] == [t.text for t in turns]
    doc = json.loads(export_run(fixed.run_dir, "dict"))
    assert (doc["format"], doc["topic"], doc["final"]) == (
        "judge_refine",
        fixed.manifest.topic,
        evaluations[-1].synthesis,
    )
    assert [(m["round"], m["seat"], m["kind"], m["phase"]) for m in doc["messages"]] == [
        (0, None, "topic", None),
        (1, "pro", "turn", "argument"),
        (1, "con", "turn", "answer"),
        (1, None, "evaluation", None),
        (2, "pro", "turn", "argument"),
        (2, "con", "turn", "answer"),
        (2, None, "evaluation", None),
    ]
    assert [m["content"] for m in doc["messages"]] == [m["content"] for m in listed]
    assert export_run(fixed.run_dir, "final") == evaluations[-1].synthesis + "\n"


def test_md_and_txt_show_turns_evaluations_motions_and_the_final_flag(
    fixed: RunResult, records: Records
) -> None:
    turns, (e1, e2), (m2,) = logs(fixed.run_dir, records)
    md = export_run(fixed.run_dir, "md")
    at = 0
    for block in (
        "## Round 1 (argument, answer)",
        f"### Pro\n\n{turns[0].text}\n",
        f"### Con\n\n{turns[1].text}\n",
        f"**Judge's evaluation.** {e1.evaluation}",
        f"**Synthesis (the motion of round 2).** {e1.synthesis}",
        "## Round 2",
        f"**Motion (the judge's synthesis of round 1).** {m2.motion}",
        f"### Pro\n\n{turns[2].text}\n",
        f"**Judge's final evaluation.** {e2.evaluation}",
        f"**Synthesis (final).** {e2.synthesis}",
    ):
        assert block in md[at:], block
        at = md.index(block, at) + len(block)
    assert "- **Closed:** final evaluation after round 2" in md
    txt = export_run(fixed.run_dir, "txt")
    assert max(map(len, txt.splitlines())) <= 78
    assert "Judge's final evaluation:" in txt.splitlines() and "Synthesis (final):" in txt.splitlines()
    doc = json.loads(export_run(fixed.run_dir, "json"))
    assert doc["rounds"][1]["before"] == [
        {"label": "Motion (the judge's synthesis of round 1)", "text": m2.motion}
    ]
    assert [n["label"] for n in doc["rounds"][1]["after"]] == [
        "Judge's final evaluation",
        "Synthesis (final)",
    ]


# -- verify: each check with a positive control -----------------------------------


def tamper(run_dir: Path, log: str, record: Record) -> list[str]:
    """Append ``record`` to ``log`` as a buggy format would; what verify says then."""
    JsonlLog(run_dir / log).append(record)
    return verify(run_dir)[0]


def turn(rid: str, round_: int, team: str, phase: str, text: str, motion: str, original: str) -> TurnRecord:
    return TurnRecord(
        id=rid,
        round=round_,
        team=team,
        role=team,
        text=text,
        phase=phase,
        alias=team.capitalize(),
        motion=motion,
        original_motion=original,
    )


@pytest.fixture
def finished(run: Run) -> RunResult:
    result = run(FORMAT, "rounds=3", "format.briefings=true")
    assert verify(result.run_dir) == ([], [])
    return result


def motions_of(run_dir: Path, records: Records) -> list[str]:
    _, _, motions = logs(run_dir, records)
    return [m.motion for m in motions]


def test_verify_catches_a_second_argument_and_a_turn_out_of_place(
    finished: RunResult, records: Records
) -> None:
    run_dir, topic = finished.run_dir, finished.manifest.topic or ""
    motion = motions_of(run_dir, records)[0]
    problems = tamper(
        run_dir,
        "shared_memory.jsonl",
        turn("r0002.pro.turn.i9", 2, "pro", "argument", "x" * 40, motion, topic),
    )
    assert "shared_memory.jsonl: r0002.pro.turn.i9 is a second argument in round 2" in problems
    assert "shared_memory.jsonl: r0002.pro.turn.i9 (round 2) follows round 3" in problems
    problems = tamper(
        run_dir, "shared_memory.jsonl", turn("r0003.pro.turn.i9", 3, "pro", "answer", "y" * 40, motion, topic)
    )
    assert "shared_memory.jsonl: r0003.pro.turn.i9 is an 'answer' by pro" in problems


def test_verify_catches_a_broken_motion_chain(finished: RunResult, records: Records) -> None:
    run_dir, topic = finished.run_dir, finished.manifest.topic or ""
    bad = MotionRecord(
        id="r0003.all.motion.i9",
        round=3,
        role="judge",
        motion="A motion no judge wrote.",
        previous="Not round two's motion.",
        original_motion=topic,
        evaluation_id="r0002.all.evaluation.i0",
    )
    problems = tamper(run_dir, "public/motions.jsonl", bad)
    assert "public/motions.jsonl: r0003.all.motion.i9 is not the next round's motion (round 3)" in problems
    assert "public/motions.jsonl: r0003.all.motion.i9 is not evaluation 2's synthesis" in problems


def test_verify_catches_a_turn_on_another_motion(finished: RunResult, records: Records) -> None:
    run_dir, topic = finished.run_dir, finished.manifest.topic or ""
    problems = tamper(
        run_dir,
        "shared_memory.jsonl",
        turn("r0003.con.turn.i9", 3, "con", "answer", "z" * 40, topic, "Another motion."),
    )
    assert "r0003.con.turn.i9: original motion differs from the run's" in problems
    assert "r0003.con.turn.i9: argued a motion other than round 3's" in problems


def test_verify_catches_a_second_final_evaluation_and_a_motion_after_it(
    finished: RunResult, records: Records
) -> None:
    run_dir, topic = finished.run_dir, finished.manifest.topic or ""
    _, evaluations, _ = logs(run_dir, records)
    last = evaluations[-1]
    after = MotionRecord(
        id="r0004.all.motion.i0",
        round=4,
        role="judge",
        motion=last.synthesis,
        previous=last.motion,
        original_motion=topic,
        evaluation_id=last.id,
    )
    assert "public/motions.jsonl: r0004.all.motion.i0 follows the final evaluation" in tamper(
        run_dir, "public/motions.jsonl", after
    )
    again = last.model_copy(update={"id": "r0003.all.evaluation.i9"})
    problems = tamper(run_dir, "public/evaluations.jsonl", again)
    assert "public/evaluations.jsonl: r0003.all.evaluation.i9 is a second final evaluation" in problems
    assert (
        "public/evaluations.jsonl: r0003.all.evaluation.i0 is final but not the last evaluation" in problems
    )


def test_verify_catches_a_run_that_completed_without_a_final_evaluation(run: Run, records: Records) -> None:
    run_dir = run(FORMAT, "rounds=2").run_dir
    lines = (run_dir / "public" / "evaluations.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "public" / "evaluations.jsonl").write_text(lines[0])  # drop the last round's evaluation
    problems = verify(run_dir)[0]
    assert "public/evaluations.jsonl: the run completed with no final evaluation" in problems


def test_verify_catches_a_briefing_in_the_transcript(finished: RunResult, records: Records) -> None:
    run_dir, topic = finished.run_dir, finished.manifest.topic or ""
    told = briefing("pro", topic)
    leaked = turn("r0003.pro.turn.i8", 3, "pro", "argument", f"As I was told: {told}", topic, topic)
    assert "shared_memory.jsonl: r0003.pro.turn.i8 holds a briefing" in tamper(
        run_dir, "shared_memory.jsonl", leaked
    )
    late = PromptRecord(
        id="r0002.con.advocate.i0.briefing",
        round=2,
        team="con",
        role="advocate",
        messages=[{"role": "system", "content": "Briefing. A late one."}],
    )
    assert "r0002.con.advocate.i0.briefing: a briefing outside round 0" in tamper(
        run_dir, "con/prompts.jsonl", late
    )


# -- exact crash points, resumed ---------------------------------------------------

ARGS = ("model=scripted", FORMAT, "rounds=3", "progress=false")


@pytest.mark.parametrize(
    ("args", "log", "record_id"),
    [
        (ARGS, "shared_memory.jsonl", "r0002.pro.turn.i0"),  # Pro's turn of round 2, before Con's
        (ARGS, "public/evaluations.jsonl", "r0002.all.evaluation.i0"),  # the evaluation, not its motion
        (ARGS, "public/motions.jsonl", "r0003.all.motion.i0"),  # the motion, not its snapshot
        (
            (*ARGS, "format.briefings=true"),
            "con/prompts.jsonl",
            "r0000.con.advocate.i0.briefing",
        ),  # mid-briefing
        (
            (*ARGS, "model.malformed_rate=1.0", "structured.max_repairs=0"),
            "events.jsonl",
            "r0002.pro.advocate.i0.schema_failure.0",
        ),  # a failed turn: it must fail the same way again, not be asked anew
    ],
    ids=["after-pro", "after-evaluation", "after-motion", "mid-briefing", "after-failed-turn"],
)
def test_resume_right_after_a_record_equals_an_uninterrupted_run(
    tmp_path: Path, args: tuple[str, ...], log: str, record_id: str
) -> None:
    reference = Outcome.of(run_in_process(args, tmp_path / "reference"))
    run_dir = crashed_copy(reference, tmp_path / "crashed", lambda d: landed(d, log, record_id))
    assert (
        record_id in (run_dir / log).read_text()
        and "r0003.all.evaluation" not in (run_dir / "public" / "evaluations.jsonl").read_text()
    )
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)
    for private in ("pro/prompts.jsonl", "con/prompts.jsonl", "events.jsonl"):

        def placeless(path: Path) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
            # the resume event takes a place in events.jsonl: compare all but places
            return [(rid, {**r, "seq": 0}) for rid, r in said(path) if r.get("event") != "resume"]

        assert placeless(run_dir / private) == placeless(reference.run_dir / private), private


def test_events_of_a_resumed_run_record_the_resume(tmp_path: Path) -> None:
    reference = Outcome.of(run_in_process(ARGS, tmp_path / "reference"))
    run_dir = crashed_copy(
        reference, tmp_path / "crashed", lambda d: landed(d, "shared_memory.jsonl", "r0002.pro.turn.i0")
    )
    resume_run(run_dir)
    events = [
        e for e in map(EventRecord.model_validate_json, (run_dir / "events.jsonl").read_text().splitlines())
    ]
    assert [e.event for e in events] == ["resume"]


def test_a_failed_turn_is_not_asked_again_on_resume(tmp_path: Path) -> None:
    args = (*ARGS, "model.malformed_rate=1.0", "structured.max_repairs=0")
    reference = Outcome.of(run_in_process(args, tmp_path / "reference"))
    run_dir = crashed_copy(
        reference,
        tmp_path / "crashed",
        lambda d: landed(d, "events.jsonl", "r0002.pro.advocate.i0.schema_failure.0"),
    )
    calls: list[tuple[object, object]] = []

    class Counting:
        def __init__(self, inner: ChatModel) -> None:
            self.inner, self.spec = inner, inner.spec

        def complete(self, request: ModelRequest) -> Completion:
            calls.append((request.tags.get("round"), request.tags.get("team")))
            return self.inner.complete(request)

        def model_files(self) -> dict[str, str]:
            return {}

    resume_run(run_dir, build=lambda cfg: Counting(build_model(cfg)))
    assert calls[0] == (2, "con") and (2, "pro") not in calls  # Con is next; Pro's failure replays
    assert_same_outcome(run_dir, reference)

"""Killed twice inside one multi-step turn, every format keeps every reply.

Issue 24: a grounded run killed after a search step's prompt landed, resumed,
and killed again after the next step's prompt, lost that step's kept reply.
The first resume had landed a search that the replayed first step then saw
in its prompt, so its request differed from the kept reply's: the model was
asked again (paid twice) and the new reply was dropped as a duplicate id.

Here the kills are chosen by record, not by timer: the model wrapper raises
``Crash`` (nothing in the harness catches it, like a SIGKILL) when the call at
a chosen position is made, after its prompt has landed and before its reply.
For each format the two positions are consecutive steps of one turn: drift's
critic loop, grounded's search steps, moderated's speech retry after a failed
check, judge_refine's con turn then the judge, two panel analysts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from test_durable_faults import Outcome, assert_same_outcome
from test_replay import Calls, Crash, events, position, replies

from harness.engine import resume_run
from harness.formats.checks import verify
from harness.models.base import ModelRequest, ProviderError
from harness.runtime.context import ModelCallError
from harness.store.memory import JsonlLog
from harness.store.records import PromptRecord, ReplyRecord, parse_record
from harness.store.rundir import read_manifest


@dataclass(frozen=True)
class Case:
    """A format's run and the turn's two steps to crash at, as (role, iteration)."""

    args: tuple[str, ...]
    first: tuple[str, int]
    then: tuple[str, int]


CASES = {
    "drift": Case(("rounds=2", "model.reject_first=1"), ("critique", 0), ("persona", 1)),
    "grounded": Case(("rounds=2",), ("search_step", 0), ("search_step", 1)),
    "moderated": Case(
        ("format=moderated", "model.factcheck_fail_rate=0.3", "format.max_strikes=5"),
        ("fact_checker", 0),
        ("speaker", 1),
    ),
    "judge_refine": Case(("format=judge_refine", "rounds=2"), ("advocate", 0), ("judge", 0)),
    "panel": Case(("format=panel", "format.judge=false", "rounds=2"), ("analyst", 0), ("analyst", 0)),
}


def crash_points(asked: list[ModelRequest], case: Case) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """The positions of the case's two consecutive steps of one turn, the latest round's."""
    step = lambda r: (r.tags["role"], r.tags["iteration"])  # noqa: E731
    pairs = [
        (position(a), position(b))
        for a, b in zip(asked, asked[1:], strict=False)
        if step(a) == case.first and step(b) == case.then and a.tags["round"] == b.tags["round"]
    ]
    assert pairs, f"the reference run has no {case.first} -> {case.then} step"
    return pairs[-1]


def crash_on(where: tuple[object, ...]) -> Calls:
    return Calls(fault=lambda n, request: Crash() if position(request) == where else None)


def prompts(run_dir: Path) -> list[PromptRecord]:
    out = []
    for path in sorted(run_dir.rglob("prompts.jsonl")):
        out += [r for r in map(parse_record, path.read_text().splitlines()) if isinstance(r, PromptRecord)]
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_a_turn_killed_twice_keeps_every_reply_and_pays_each_call_once(
    run, runs_root, grounded, name: str
) -> None:
    case = CASES[name]
    args = (*grounded, *case.args) if name == "grounded" else case.args
    reference = Calls()
    ref = run(*args, build=reference.build)
    first, then = crash_points(reference.requests, case)

    killed, killed_again, finished = crash_on(first), crash_on(then), Calls()
    with pytest.raises(Crash):
        run(*args, build=killed.build)
    (run_dir,) = [p for p in runs_root.iterdir() if p != ref.run_dir]
    with pytest.raises(Crash):
        resume_run(run_dir, build=killed_again.build)
    resume_run(run_dir, build=finished.build)

    assert read_manifest(run_dir).status == "completed"
    assert verify(run_dir)[0] == []
    assert_same_outcome(run_dir, Outcome.of(ref.run_dir))
    # each crash cut one call off before its reply; it is made once more, nothing else is
    assert (killed.made - 1) + (killed_again.made - 1) + finished.made == reference.made
    kept = replies(run_dir)
    assert len(kept) == reference.made == len({r.id for r in kept})
    assert {p.id for p in prompts(run_dir)} == {p.id for p in prompts(ref.run_dir)}
    assert events(run_dir, "replay_mismatch") == []  # every replayed request was the request first made


def test_verify_names_a_prompt_whose_reply_was_lost(run, runs_root) -> None:
    """The positive control: a completed run with one kept reply taken out
    (what the old reply path left) fails verify, naming the prompt."""
    run_dir = run("rounds=1").run_dir
    path = run_dir / "pros/replies.jsonl"
    kept = [parse_record(line) for line in path.read_text().splitlines()]
    path.unlink()
    log = JsonlLog(path)  # a fresh chain without the thinking reply: only the pairing can tell
    for record in kept:
        if record.role != "thinking":
            log.append(record)
    problems, _ = verify(run_dir)
    assert [p for p in problems if not p.startswith("snapshots/")] == [
        "pros/replies.jsonl: no reply kept for r0001.pros.thinking.i0.prompt (and no error event says why)"
    ]


def test_an_error_event_explains_a_missing_reply(run, runs_root) -> None:
    """A call that failed for good has a prompt and no reply: its error event says why."""
    calls = Calls(fault=lambda n, request: ProviderError("bad request", 400) if n == 2 else None)
    with pytest.raises(ModelCallError):
        run("rounds=1", build=calls.build)
    (run_dir,) = list(runs_root.iterdir())
    assert read_manifest(run_dir).status == "failed"
    assert [e.role for e in events(run_dir, "error")] == ["thinking"]
    assert verify(run_dir)[0] == []


def keep_persona_reply_for_another_request(run, runs_root) -> tuple[Path, ReplyRecord]:  # type: ignore[no-untyped-def]
    """A run killed after the persona's reply was kept and before its record
    landed, with that reply rewritten as the answer to another request."""
    calls = Calls(
        fault=lambda n, request: Crash() if position(request) == (1, "pros", "thinking", 0) else None
    )
    with pytest.raises(Crash):
        run("rounds=1", build=calls.build)
    (run_dir,) = list(runs_root.iterdir())
    path = run_dir / "pros/replies.jsonl"
    (persona,) = [parse_record(line) for line in path.read_text().splitlines()]
    assert isinstance(persona, ReplyRecord)
    path.unlink()
    JsonlLog(path).append(persona.model_copy(update={"request_sha": "0" * 64}))
    (run_dir / "pros/persona.jsonl").write_bytes(b"")  # the record had not landed
    return run_dir, persona


def test_a_changed_request_replays_the_kept_reply_and_says_so(run, runs_root) -> None:
    """Beneath the formats: a resumed call whose rebuilt request differs from the
    one its kept reply answered replays that reply (the run acted on it, and
    it was paid for) and records a ``replay_mismatch``."""
    run_dir, persona = keep_persona_reply_for_another_request(run, runs_root)
    again = Calls()
    resume_run(run_dir, build=again.build)
    (mismatch,) = events(run_dir, "replay_mismatch")
    assert (mismatch.data["reply_id"], mismatch.data["kept_sha"]) == (persona.id, "0" * 64)
    assert [position(r) for r in again.requests][:1] == [(1, "pros", "thinking", 0)]  # persona replayed
    assert verify(run_dir)[0] == []


def test_a_forced_resume_asks_again_and_keeps_both_replies(run, runs_root) -> None:
    """Past a changed fingerprint (``--force``) a kept reply answers only its own
    request: the call is made again, and its reply is kept beside the first."""
    run_dir, persona = keep_persona_reply_for_another_request(run, runs_root)
    again = Calls()
    resume_run(run_dir, build=again.build, force=True, overrides=["llm.temperature=0.9"])
    assert [position(r) for r in again.requests][:1] == [(1, "pros", "persona", 0)]
    ids = [r.id for r in replies(run_dir) if r.role == "persona" and r.round == 1 and r.team == "pros"]
    assert ids[:2] == [persona.id, f"{persona.id}.redo1"]
    assert events(run_dir, "replay_mismatch") == []
    assert verify(run_dir)[0] == []

"""Every reply is kept and every failed attempt is an event, across resumes.

A run killed mid-turn used to call the model again, on resume, for every
reply of the turn that had not yet become a record, replies that failed
validation included, so calls and tokens were made twice and counted once.
Each reply now lands in its seat's ``replies.jsonl`` before it is parsed,
and a resume replays it. And a failure that repeats after a resume is a new
attempt: its event lands beside the first instead of being refused as a copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from test_durable_faults import Outcome, assert_same_outcome

from harness.engine import resume_run
from harness.models import build_model
from harness.models.base import ChatModel, Completion, ModelRequest, ProviderError
from harness.runtime.context import ModelCallError
from harness.schema import ModelConfig
from harness.store.records import EventRecord, ReplyRecord
from harness.store.rundir import read_manifest

# replies that fail validation and a critic that rejects first: every path a reply can take
ARGS = ("rounds=3", "model.malformed_rate=0.4", "model.reject_first=1", "structured.max_repairs=1")


class Crash(BaseException):
    """Stands for a SIGKILL: nothing in the harness catches it."""


@dataclass
class Calls:
    """Counts the calls that reach any model it wraps; raises ``fault(n)`` if it gives one."""

    fault: Callable[[int, ModelRequest], BaseException | None] = lambda n, request: None
    made: int = 0
    requests: list[ModelRequest] = field(default_factory=list)

    def build(self, cfg: ModelConfig) -> ChatModel:
        inner, calls = build_model(cfg), self

        class Counted:
            spec = inner.spec

            def complete(self, request: ModelRequest) -> Completion:
                calls.made += 1
                calls.requests.append(request)
                if (exc := calls.fault(calls.made, request)) is not None:
                    raise exc
                return inner.complete(request)

            def model_files(self) -> dict[str, str]:
                return inner.model_files()

        return Counted()


def replies(run_dir) -> list[ReplyRecord]:  # type: ignore[no-untyped-def]
    out = []
    for path in sorted(run_dir.rglob("replies.jsonl")):
        out += [r for r in map(_parse, path.read_text().splitlines()) if isinstance(r, ReplyRecord)]
    return out


def _parse(line: str):  # type: ignore[no-untyped-def]
    from harness.store.records import parse_record

    return parse_record(line)


def events(run_dir, kind: str) -> list[EventRecord]:  # type: ignore[no-untyped-def]
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(_parse, lines) if isinstance(e, EventRecord) and e.event == kind]


@pytest.fixture
def reference(run):  # type: ignore[no-untyped-def]
    calls = Calls()
    result = run(*ARGS, build=calls.build)
    return result, calls.made, calls.requests


@pytest.mark.parametrize("crash_at", [2, 5, 9, 14, 20])
def test_a_resume_replays_every_kept_reply_and_calls_nothing_twice(run, runs_root, reference, crash_at):
    ref, ref_calls, _ = reference
    first = Calls(fault=lambda n, request: Crash() if n == crash_at else None)
    with pytest.raises(Crash):
        run(*ARGS, build=first.build)
    (run_dir,) = [p for p in runs_root.iterdir() if p != ref.run_dir]
    assert read_manifest(run_dir).status == "running"  # as a SIGKILL leaves it
    second = Calls()
    resume_run(run_dir, build=second.build)
    # the call the crash cut off is made again; no other call is
    assert (first.made - 1) + second.made == ref_calls
    assert_same_outcome(run_dir, Outcome.of(ref.run_dir))
    assert read_manifest(run_dir).counts.model_calls == read_manifest(ref.run_dir).counts.model_calls
    kept = replies(run_dir)
    assert len(kept) == ref_calls == len({r.id for r in kept})  # one per call: none lost, none twice


def position(request: ModelRequest) -> tuple[object, ...]:
    return tuple(request.tags[k] for k in ("round", "team", "role", "iteration"))


def test_a_failed_reply_is_kept_and_replayed(run, runs_root, reference):
    ref, _, asked = reference
    failures = events(ref.run_dir, "schema_failure")
    # a call whose every reply failed validation, followed by another call of
    # the same round: a crash there lands before the round's snapshot
    failed, crash_at = next(
        (f, i + 2)
        for f in failures
        for i, request in enumerate(asked[:-1])
        if position(request) == (f.round, f.team, f.role, f.iteration)
        and position(asked[i + 1]) != position(request)
        and asked[i + 1].tags["round"] == f.round
    )
    first = Calls(fault=lambda n, request: Crash() if n == crash_at else None)
    with pytest.raises(Crash):
        run(*ARGS, build=first.build)
    (run_dir,) = [p for p in runs_root.iterdir() if p != ref.run_dir]
    second = Calls()
    resume_run(run_dir, build=second.build)
    assert (failed.round, failed.team, failed.role, failed.iteration) not in map(position, second.requests)
    assert len(events(run_dir, "schema_failure")) == len(failures)
    assert_same_outcome(run_dir, Outcome.of(ref.run_dir))


def test_a_failure_that_repeats_after_a_resume_is_a_second_event(run, runs_root):
    def fatal_in_round_2(n: int, request: ModelRequest) -> BaseException | None:
        return ProviderError("bad request", 400) if request.tags["round"] == 2 else None

    broken = Calls(fault=fatal_in_round_2)
    with pytest.raises(ModelCallError):
        run("rounds=2", build=broken.build)
    (run_dir,) = runs_root.iterdir()
    assert read_manifest(run_dir).status == "failed"
    with pytest.raises(ModelCallError):
        resume_run(run_dir, build=broken.build)
    errors = events(run_dir, "error")
    assert len(errors) == 2 and len({e.id for e in errors}) == 2
    assert read_manifest(run_dir).status == "failed"


def test_transient_retries_of_each_attempt_all_land(run, runs_root):
    def always_503(n: int, request: ModelRequest) -> BaseException | None:
        return ProviderError("overloaded", 503) if request.tags["round"] == 2 else None

    broken = Calls(fault=always_503)
    args = ("rounds=2", "retry.max_attempts=3", "retry.initial_s=0", "retry.jitter_s=0")
    with pytest.raises(ModelCallError):
        run(*args, build=broken.build)
    (run_dir,) = runs_root.iterdir()
    with pytest.raises(ModelCallError):
        resume_run(run_dir, build=broken.build)
    # each run: 3 attempts of the call, 2 retries and the final error
    assert len(events(run_dir, "retry")) == 4
    assert len(events(run_dir, "error")) == 2

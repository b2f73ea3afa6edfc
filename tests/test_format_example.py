"""The worked example of docs/adding-a-format.md: a format defined in tests/
(``formats_example``), registered from outside the harness, with a record
kind and an event of its own, runs on the scripted model, stops and resumes
to an uninterrupted run's transcript, verifies (its own check with a positive
control), exports and loads into the analysis tables, the SQL store and the viewer."""

from __future__ import annotations

import dataclasses
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from html import unescape
from pathlib import Path

import pytest
import yaml
from formats_example import INTERVIEW, FollowUpRecord, InterviewOptions

from analysis import load_runs
from harness.engine import RunResult, resume_run
from harness.export.styles import export_run
from harness.formats import DRIFT, get_format, register_format
from harness.formats.checks import verify
from harness.models import build_model
from harness.models.base import ChatModel, Completion, ModelRequest
from harness.schema import Config, ConfigError
from harness.store.memory import JsonlLog
from harness.store.reader import read_run
from harness.store.records import EventRecord, PromptRecord, TurnRecord
from harness.store.rundir import read_manifest
from harness.store.sql import build_store
from harness.view import Catalog, route

Run = Callable[..., RunResult]
Records = Callable[[Path], list]
# the format's config group lives with it, in tests/conf/format/interview.yaml
CONF = Path(__file__).parent / "conf"
FORMAT = ("format=interview", f"hydra.searchpath=[file://{CONF}]")
SPEAKERS = (("host", "question"), ("guest", "answer"))  # each round's turns, in order


def turns(run_dir: Path, records: Records) -> list[TurnRecord]:
    return records(run_dir / "shared_memory.jsonl")


@pytest.fixture
def interview(run: Run) -> RunResult:
    return run(*FORMAT, "rounds=3", "run_name=interview")


def test_registered_from_the_test_folder(settings: Callable[..., Config]) -> None:
    assert get_format("interview") is INTERVIEW is register_format(INTERVIEW)  # again: a no-op
    with pytest.raises(ConfigError, match="^format 'drift': a different format is already registered"):
        register_format(dataclasses.replace(INTERVIEW, name=DRIFT.name))
    assert get_format("drift") is DRIFT
    with pytest.raises(ConfigError, match="^format.host: must be a non-empty string$"):
        settings(*FORMAT, "format.host=' '")
    # the config group and the options dataclass agree on every default
    group = yaml.safe_load((CONF / "format" / "interview.yaml").read_text())["format"]
    assert group == dataclasses.asdict(InterviewOptions()) == dataclasses.asdict(settings(*FORMAT).format)


def test_a_generated_topic_comes_from_the_harness_topic_agent(run: Run, records: Records) -> None:
    result = run(*FORMAT, "rounds=1", "topic.generate=true")
    (event,) = [e for e in records(result.run_dir / "events.jsonl") if e.event == "topic"]
    assert result.manifest.topic == event.detail != "Remote work is better for society than office work."
    assert {t.motion for t in turns(result.run_dir, records)} == {event.detail}


def test_the_host_asks_and_the_guest_answers_what_was_asked(interview: RunResult, records: Records) -> None:
    said = turns(interview.run_dir, records)
    assert [(t.round, t.team, t.phase, t.alias) for t in said] == [
        (r, seat, phase, seat.capitalize()) for r in (1, 2, 3) for seat, phase in SPEAKERS
    ]
    manifest = interview.manifest
    assert (manifest.status, manifest.stop_reason, manifest.counts.rounds_completed) == (
        "completed",
        "asked 3 questions",
        3,
    )
    assert manifest.layout is not None and [s.name for s in manifest.layout.seats] == ["host", "guest"]
    # each seat hears, as a message of its own, the turn it answers: the guest this
    # round's question, the host (from round 2) the guest's last answer
    prompts = {
        (p.round, p.team): p.messages
        for seat in ("host", "guest")
        for p in records(interview.run_dir / seat / "prompts.jsonl")
        if isinstance(p, PromptRecord)
    }
    by_place = {(t.round, t.team): t for t in said}
    assert prompts[(2, "guest")][-1]["content"].startswith(f"Host: {by_place[(2, 'host')].text[:30]}")
    assert prompts[(2, "host")][-1]["content"].startswith(f"Guest: {by_place[(1, 'guest')].text[:30]}")
    assert len(prompts[(1, "host")]) == 2  # round 1's question follows up nothing
    # the format's own field script: the scripted Host's questions end in a question mark
    assert all(t.text.endswith("?") == (t.team == "host") for t in said)


def test_its_own_record_kind_and_event_are_written_and_read_back(
    interview: RunResult, records: Records
) -> None:
    said = {(t.round, t.team): t.id for t in turns(interview.run_dir, records)}
    follow_ups = records(interview.run_dir / "host" / "follow_ups.jsonl")
    assert all(isinstance(f, FollowUpRecord) for f in follow_ups)
    # rounds 2 and 3: each question names the answer of the round before
    assert [(f.round, f.question_id, f.answer_id) for f in follow_ups] == [
        (r, said[(r, "host")], said[(r - 1, "guest")]) for r in (2, 3)
    ]
    (sign_off,) = [e for e in records(interview.run_dir / "events.jsonl") if e.event == "sign_off"]
    assert isinstance(sign_off, EventRecord) and sign_off.round == 3
    counts = interview.manifest.counts
    assert (counts.get("follow_up"), counts.get("sign_off")) == (2, 1)
    folder = read_run(interview.run_dir)  # the reader every tool uses
    assert folder.notes == [] and folder.of("host/follow_ups.jsonl") == follow_ups


def test_interrupted_mid_round_then_resumed_equals_an_uninterrupted_run(
    run: Run, runs_root: Path, interview: RunResult, records: Records
) -> None:
    class CtrlCAtRound2Answer:
        """The scripted model, interrupted (a second Ctrl-C: the call in flight
        is abandoned) when the guest is asked its round-2 answer."""

        def __init__(self, inner: ChatModel) -> None:
            self.inner, self.spec = inner, inner.spec

        def complete(self, request: ModelRequest) -> Completion:
            if (request.tags.get("round"), request.tags.get("team")) == (2, "guest"):
                raise KeyboardInterrupt
            return self.inner.complete(request)

        def model_files(self) -> dict[str, str]:
            return {}

    with pytest.raises(KeyboardInterrupt):
        run(*FORMAT, "rounds=3", build=lambda cfg: CtrlCAtRound2Answer(build_model(cfg)))
    (run_dir,) = [d for d in runs_root.iterdir() if d != interview.run_dir]
    assert read_manifest(run_dir).status == "interrupted"
    assert [(t.round, t.team) for t in turns(run_dir, records)][-1] == (2, "host")
    resumed = resume_run(run_dir)  # another process must register the format first, as this one did
    assert (resumed.manifest.status, resumed.manifest.counts.rounds_completed) == ("completed", 3)
    reference = [(t.id, t.text) for t in turns(interview.run_dir, records)]
    assert [(t.id, t.text) for t in turns(run_dir, records)] == reference
    follow_ups = [
        [(f.id, f.answer_id) for f in records(folder / "host" / "follow_ups.jsonl")]
        for folder in (run_dir, interview.run_dir)
    ]
    assert follow_ups[0] == follow_ups[1] != []  # noted once each, the replayed question's too
    assert [e.event for e in records(run_dir / "events.jsonl")].count("sign_off") == 1
    assert verify(run_dir) == ([], [])


def test_verify_runs_the_format_check_with_a_positive_control(interview: RunResult, records: Records) -> None:
    assert verify(interview.run_dir) == ([], [])
    # round 2's question again, after round 3: what a format that lost its place would write
    question = turns(interview.run_dir, records)[2]
    late = question.model_copy(update={"id": "r0002.host.turn.i9", "seq": -1, "prev_hash": None})
    JsonlLog[TurnRecord](interview.run_dir / "shared_memory.jsonl").append(late)
    expected = "shared_memory.jsonl: r0002.host.turn.i9 is out of order (round 2, after round 3)"
    assert verify(interview.run_dir)[0] == [expected]


def test_export_and_analysis_read_it_with_nothing_of_their_own(
    interview: RunResult, records: Records
) -> None:
    said = turns(interview.run_dir, records)
    md = export_run(interview.run_dir, "md")
    assert "## Round 2 (question, answer)" in md and "- **Closed:** asked 3 questions" in md
    assert f"### Host\n\n{said[0].text}\n\n### Guest\n\n{said[1].text}\n" in md
    listed = export_run(interview.run_dir, "str").rstrip("\n").split("\n\n")
    assert listed[1:] == [f"{t.alias}: {t.text}" for t in said]
    tables = load_runs(interview.run_dir, cache=False)
    assert list(tables.turns.text) == [t.text for t in said]
    assert set(tables.runs.format) == {"interview"}


def test_the_store_and_the_viewer_read_it_with_nothing_of_their_own(
    interview: RunResult, runs_root: Path, tmp_path: Path, records: Records
) -> None:
    said = turns(interview.run_dir, records)
    assert build_store(runs_root, tmp_path / "store.sqlite").added == ["interview"]
    with closing(sqlite3.connect(tmp_path / "store.sqlite")) as con:
        stored = con.execute("SELECT alias, phase, text FROM statements ORDER BY seq").fetchall()
    assert stored == [(t.alias, t.phase, t.text) for t in said]
    status, html = route(Catalog(runs_root), "/run/interview")
    assert status == 200 and all(t.text in unescape(html) for t in said)
    assert "OK: 0 violations" in unescape(route(Catalog(runs_root), "/verify/interview")[1])


def test_the_page_quotes_the_example_as_it_is() -> None:
    """docs/adding-a-format.md's python blocks are excerpts of formats_example.py and its records module."""
    page = (Path(__file__).parents[1] / "docs" / "adding-a-format.md").read_text()
    here = Path(__file__).parent
    source = "".join(
        (here / name).read_text() for name in ("formats_example.py", "formats_example_records.py")
    )
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 5
    for block in blocks:
        assert block in source, block

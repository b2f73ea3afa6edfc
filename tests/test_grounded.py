"""The grounded format on the scripted model: searches and cited turns in
order, the citation checker's marks as data or as a gate, the length limit
as a reply budget with a recorded cut, the synthesis and the judge, config
errors, what verify catches, and kill/resume (the server killed too)."""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path

import pytest
from test_durable_faults import Case, Outcome, assert_same_outcome, crash_at, run_in_process

from harness.agents.arguer import write_budget
from harness.engine import resume_run
from harness.formats.checks import verify
from harness.models import ModelRequest, build_model
from harness.models.base import Completion
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import CitedTurnRecord, DraftRecord, SearchRecord

CLAIM = 'topic.text="Job\'s suffering is deserved"'


def turns_of(run_dir: Path, records) -> list[CitedTurnRecord]:  # type: ignore[no-untyped-def]
    return [r for r in records(run_dir / "shared_memory.jsonl") if isinstance(r, CitedTurnRecord)]


def test_for_then_against_each_round_searching_and_citing_then_a_synthesis(run, records, grounded):
    result = run(*grounded, "rounds=3")
    run_dir, manifest = result.run_dir, result.manifest
    assert manifest.status == "completed" and manifest.stop_reason == "synthesis"
    turns = turns_of(run_dir, records)
    assert [(t.round, t.team, t.alias) for t in turns] == [
        (r, side, side.upper()) for r in (1, 2, 3) for side in ("for", "against")
    ]
    for turn in turns:
        searches = [s for s in records(run_dir / turn.team / "searches.jsonl") if s.id in turn.searches]
        assert (
            len(searches) == 1 and searches[0].collection == "kjv"
        )  # the scripted arguer writes once it has passages
        assert turn.hits == len(searches[0].hits) > 0
        assert 1 <= len(turn.citations) <= 2
        assert {c.status for c in turn.citations} == {"supported"}  # real spans of real passages
        assert {c.id for c in turn.citations} <= {h.id for h in searches[0].hits}
    (synthesis,) = records(run_dir / "public" / "synthesis.jsonl")
    assert synthesis.round == 4 and "FOR was strongest" in synthesis.text and not synthesis.fallback
    assert verify(run_dir)[0] == []
    # every model call's usage counted once: 2 search steps + 1 write per turn, and the synthesis
    assert manifest.counts.model_calls == 6 * 3 + 1
    assert manifest.counts.by_kind["search"] == 6


@pytest.mark.parametrize("max_searches", [1, 2])
def test_a_summary_is_one_of_the_turns_search_steps(run, records, grounded, max_searches):
    """``scripted:summarize`` asks for the summarize tool first: with one step
    that is all it gets; with two, a search follows and the turn cites its passages."""
    run_dir = run(
        *grounded, "rounds=1", "roles.for.spec=scripted:summarize", f"format.max_searches={max_searches}"
    ).run_dir
    made = records(run_dir / "for" / "searches.jsonl")
    assert [s.tool for s in made] == ["summarize", "search"][:max_searches]
    summary = made[0]
    assert summary.summary.startswith("Collection 'kjv': 31,103 passages") and summary.hits == []
    assert "Top passages on" in summary.summary
    steps = [p for p in records(run_dir / "for" / "prompts.jsonl") if ".search_step." in p.id]
    assert len(steps) == max_searches  # no step past the limit: the summary used one
    (write,) = [p for p in records(run_dir / "for" / "prompts.jsonl") if ".arguer." in p.id]
    assert f'Summary "{summary.query}":' in write.messages[-1]["content"]
    (turn,) = [t for t in turns_of(run_dir, records) if t.team == "for"]
    assert turn.searches == [s.id for s in made] and bool(turn.citations) == (max_searches == 2)
    assert [s.tool for s in records(run_dir / "against" / "searches.jsonl")] == ["search"]
    assert verify(run_dir)[0] == []


def test_searches_and_drafts_stay_in_their_seat(run, records, grounded):
    run_dir = run(*grounded, "rounds=2").run_dir
    for seat, other in (("for", "against"), ("against", "for")):
        queries = {s.query for s in records(run_dir / other / "searches.jsonl")}
        prompts = "\n".join(
            m["content"] for p in records(run_dir / seat / "prompts.jsonl") for m in p.messages
        )
        assert queries and not any(f'Search "{q}"' in prompts for q in queries)


def test_bad_citations_are_recorded_not_gated_by_default(run, records, grounded):
    run_dir = run(*grounded, "rounds=2", "model.bad_citation_rate=1.0").run_dir
    turns = turns_of(run_dir, records)
    marks = [c.status for t in turns for c in t.citations]
    assert len(turns) == 4 and marks and set(marks) <= {"unsupported", "unknown"}
    assert {"unsupported", "unknown"} == set(marks)  # both kinds are made, and told apart
    assert all(t.iteration == 0 for t in turns)  # published as written: data, not a gate
    assert verify(run_dir)[0] == []


def test_on_bad_citation_retry_sends_the_turn_back_with_the_reasons(run, records, grounded):
    run_dir = run(
        *grounded, "rounds=1", "model.bad_citation_rate=1.0", "format.on_bad_citation=retry"
    ).run_dir
    drafts = records(run_dir / "for" / "drafts.jsonl")
    assert [d.iteration for d in drafts] == [0, 1]  # max_turn_retries=1: one re-write, then published
    retry_prompt = [
        p for p in records(run_dir / "for" / "prompts.jsonl") if p.id.startswith("r0001.for.arguer.i1")
    ]
    assert "Its citations failed" in retry_prompt[0].messages[-1]["content"]
    assert (
        "no passage has this id" in retry_prompt[0].messages[-1]["content"]
        or "does not contain" in (retry_prompt[0].messages[-1]["content"])
    )
    assert turns_of(run_dir, records)[0].iteration == 1


def test_clean_citations_pass_the_gate_at_once(run, records, grounded):
    run_dir = run(*grounded, "rounds=1", "format.on_bad_citation=retry").run_dir
    assert [d.iteration for d in records(run_dir / "for" / "drafts.jsonl")] == [0]


def test_charlimit_sets_the_write_budget_and_a_recorded_cut(run, records, grounded):
    asked: list[ModelRequest] = []

    def build(cfg):  # type: ignore[no-untyped-def]
        model = build_model(cfg)
        inner = model.complete

        def complete(request: ModelRequest) -> Completion:
            asked.append(request)
            return inner(request)

        model.complete = complete  # type: ignore[method-assign]
        return model

    run_dir = run(*grounded, "rounds=1", "format.charlimit=80", build=build).run_dir
    writes = [r for r in asked if r.tags.get("role") == "arguer"]
    assert writes and {r.max_tokens for r in writes} == {write_budget(80)} and write_budget(80) < 256
    turns = turns_of(run_dir, records)
    drafts = {d.id: d for seat in ("for", "against") for d in records(run_dir / seat / "drafts.jsonl")}
    cut = [t for t in turns if t.truncated]
    assert cut, "the scripted arguer writes past 80 characters"
    for t in cut:  # ended at its last whole sentence within the limit
        assert len(t.text) <= 80 and t.text.endswith(".")
        assert drafts[t.draft_id].text.startswith(t.text) and len(drafts[t.draft_id].text) > 80
    assert verify(run_dir)[0] == []


def test_final_judge_names_the_side_the_evidence_supports(run, records, grounded):
    result = run(*grounded, "rounds=1", "format.final=judge", "model.judge_winner=against")
    (verdict,) = records(result.run_dir / "public" / "verdicts.jsonl")
    assert (verdict.by, verdict.winner, verdict.round) == ("judge", "against", 2)
    assert result.manifest.stop_reason == "verdict: against is supported"
    assert (
        not (result.run_dir / "public" / "synthesis.jsonl").exists()
        or not (result.run_dir / "public" / "synthesis.jsonl").read_text()
    )


def test_every_role_may_run_its_own_model(run, grounded):
    result = run(*grounded, "rounds=1", "roles.for.spec=scripted:a", "roles.synthesizer.spec=scripted:s")
    assert result.manifest.model_specs == {
        "for": "scripted:a",
        "against": "scripted:default",
        "synthesizer": "scripted:s",
        "topic": "scripted:default",
    }


def test_a_folder_collection_with_ids_by_file_and_position(run, records, tmp_path, search_cache):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "suffering.md").write_text(
        "Suffering deserved is punishment.\n\nJob suffering was not deserved, said the book.\n"
    )
    run_dir = run(
        "format=grounded",
        CLAIM,
        "search.transport=local",
        f"search.collection={folder}",
        f"search.cache_dir={search_cache}",
        "rounds=1",
    ).run_dir
    hits = [h.id for s in records(run_dir / "for" / "searches.jsonl") for h in s.hits]
    assert hits and all(h.startswith("suffering.md#") for h in hits)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("search.collection=/no/such/folder", "search.collection"),
        ("format.max_searches=9", "format.max_searches"),
        ("format.final=vote", "format.final"),
        ("format.on_bad_citation=ignore", "format.on_bad_citation"),
        ("format.charlimit=10", "format.charlimit"),
        ("search.k=0", "search.k"),
        ("search.transport=http", "search.transport"),
        ("chat=moderator", "chat"),
    ],
)
def test_bad_values_are_one_line_before_any_folder(run, runs_root, grounded, override, key):
    with pytest.raises(ConfigError) as err:
        run(*grounded, override)
    assert str(err.value).startswith(f"{key}:") and "\n" not in str(err.value)
    assert not runs_root.exists() or not any(runs_root.iterdir())


def test_an_empty_collection_is_one_line(run, runs_root, grounded, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.pdf").write_bytes(b"%PDF")
    with pytest.raises(ConfigError, match=r"^search\.collection: .*empty"):
        run(*grounded, f"search.collection={empty}")


def test_a_person_cannot_sit_in_a_format_without_human_seats(run):
    with pytest.raises(
        ConfigError, match=r"^roles\.pro\.spec: a person can play a seat only in format=drift or grounded"
    ):
        run("format=moderated", "roles.pro.spec=human:you")


# -- verify: each check with a positive control ------------------------------------


def forged(run_dir: Path, records, **changes) -> list[str]:  # type: ignore[no-untyped-def]
    """Append a copy of the first turn with ``changes`` (a properly chained line); verify's problems."""
    assert verify(run_dir) == ([], [])
    first = turns_of(run_dir, records)[0]
    JsonlLog(run_dir / "shared_memory.jsonl").append(
        first.model_copy(update={"id": "r0009.for.turn.x", **changes})
    )
    return verify(run_dir)[0]


def test_verify_catches_a_citation_mark_the_passage_contradicts(run, records, grounded):
    run_dir = run(*grounded, "rounds=1").run_dir
    first = turns_of(run_dir, records)[0]
    lies = [c.model_copy(update={"quote": "words this verse never had"}) for c in first.citations]
    problems = forged(run_dir, records, citations=lies)
    assert any("citations differ from its draft" in p for p in problems), problems
    assert any("the passage says otherwise" in p for p in problems), problems


def test_verify_catches_a_turn_out_of_order(run, records, grounded):
    run_dir = run(*grounded, "rounds=2").run_dir
    problems = forged(run_dir, records, round=1, team="against", side="against")
    assert any("out of order or repeated" in p for p in problems), problems


def test_verify_catches_a_cut_turn_marked_whole(run, records, grounded):
    run_dir = run(*grounded, "rounds=1", "format.charlimit=80").run_dir
    cut = next(t for t in turns_of(run_dir, records) if t.truncated)
    problems = forged(
        run_dir,
        records,
        text=cut.text,
        draft_id=cut.draft_id,
        team=cut.team,
        truncated=False,
        citations=cut.citations,
        searches=cut.searches,
    )
    assert any("truncated=False disagrees" in p for p in problems), problems


# -- kill and resume ----------------------------------------------------------------


def grounded_case(cache: Path, *args: str) -> Case:
    base = (
        "model=scripted",
        "format=grounded",
        CLAIM,
        f"search.cache_dir={cache}",
        "model.latency_s=0.01",
        "progress=false",
        "rounds=3",
    )
    return Case(
        (*base, *args),
        ("*/for/searches.jsonl", "*/against/searches.jsonl", "*/*/drafts.jsonl"),
        12,
        ("shared_memory.jsonl", "events.jsonl", "for/searches.jsonl", "against/drafts.jsonl"),
    )


@pytest.mark.parametrize(("transport", "points"), [("local", [2, 7]), ("mcp", [3, 10])])
def test_sigkill_mid_turn_then_resume_gives_the_same_debate(tmp_path, search_cache, transport, points):
    case = grounded_case(search_cache, f"search.transport={transport}")
    reference = Outcome.of(run_in_process(case.args, tmp_path / "reference"))
    run_dir = crash_at(tmp_path / "crashed", case, points, signal.SIGKILL, True, random.Random(len(points)))
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)


def test_mcp_and_local_transports_find_the_same_passages(run, records, grounded):
    local = run(*grounded, "rounds=1").run_dir
    mcp = run(*grounded, "rounds=1", "search.transport=mcp").run_dir
    for seat in ("for", "against"):
        a, b = records(local / seat / "searches.jsonl"), records(mcp / seat / "searches.jsonl")
        assert [(s.query, [h.id for h in s.hits]) for s in a] == [
            (s.query, [h.id for h in s.hits]) for s in b
        ]
    assert [t.text for t in turns_of(local, records)] == [t.text for t in turns_of(mcp, records)]


def test_a_crashing_search_server_is_restarted_and_every_fault_is_an_event(
    run, records, grounded, monkeypatch, tmp_path
):
    reference = run(*grounded, "rounds=1", "search.transport=mcp").run_dir
    monkeypatch.setenv("DRIFT_SEARCH_FAULT", "crash@2")  # each new server process crashes at its 2nd call
    faulty = run(
        *grounded,
        "rounds=1",
        "search.transport=mcp",
        "retry.initial_s=0",
        "retry.jitter_s=0",
        f"runs_root={tmp_path / 'faulty'}",
    ).run_dir
    events = records(faulty / "events.jsonl")
    retries = [e for e in events if e.event == "retry" and e.role == "search"]
    restarts = [e for e in events if e.event == "search_restart"]
    assert retries and len(restarts) == len(retries)
    assert all(e.error is not None and e.error.kind == "transient" for e in retries)
    assert [t.text for t in turns_of(faulty, records)] == [t.text for t in turns_of(reference, records)]
    assert verify(faulty)[0] == []


def test_a_dead_search_server_fails_the_run_resumably_without_hanging(run, grounded, monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFT_SEARCH_FAULT", "hang@1")
    from harness.runtime.tools import ToolCallError

    with pytest.raises(ToolCallError, match=r"role=search .*collection=kjv"):
        run(
            *grounded,
            "rounds=1",
            "search.transport=mcp",
            "search.timeout_s=1",
            "retry.max_attempts=2",
            "retry.initial_s=0",
            "retry.jitter_s=0",
            f"runs_root={tmp_path / 'dead'}",
        )
    (run_dir,) = (tmp_path / "dead").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "failed"
    monkeypatch.delenv("DRIFT_SEARCH_FAULT")
    # the transport's settings are free to change on resume: a 1 s limit was for the test
    assert resume_run(run_dir, overrides=["search.timeout_s=30"]).manifest.status == "completed"


def test_drafts_record_the_searches_they_were_written_after(run, records, grounded):
    run_dir = run(*grounded, "rounds=1").run_dir
    for seat in ("for", "against"):
        (draft,) = [d for d in records(run_dir / seat / "drafts.jsonl") if isinstance(d, DraftRecord)]
        searches = [s for s in records(run_dir / seat / "searches.jsonl") if isinstance(s, SearchRecord)]
        assert draft.searches == [s.id for s in searches]


def test_the_server_killed_mid_run_then_the_run_killed_resumes_to_the_same_debate(run, grounded, tmp_path):
    """SIGKILL the search server between two model calls (the next search
    restarts it), then crash the run at a later call; resume finishes it."""
    from harness.search.process import find_child

    args = (*grounded, "rounds=2", "search.transport=mcp", "retry.initial_s=0", "retry.jitter_s=0")
    reference = Outcome.of(run(*args, f"runs_root={tmp_path / 'reference'}").run_dir)
    calls = 0

    def build(cfg):  # type: ignore[no-untyped-def]
        model = build_model(cfg)
        inner = model.complete

        def complete(request: ModelRequest) -> Completion:
            nonlocal calls
            calls += 1
            if calls == 4:
                server = find_child("harness.search")
                assert server is not None, "the run's search server is our child"
                os.kill(server, signal.SIGKILL)
            if calls == 9:
                raise RuntimeError("crash mid-round (a bug, a power cut)")
            return inner(request)

        model.complete = complete  # type: ignore[method-assign]
        return model

    with pytest.raises(RuntimeError, match="crash mid-round"):
        run(*args, f"runs_root={tmp_path / 'crashed'}", build=build)
    (run_dir,) = (tmp_path / "crashed").iterdir()
    restarts = [
        e
        for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines())
        if e.get("event") == "search_restart"
    ]
    assert len(restarts) == 1
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)


def test_every_call_is_counted_once_when_writes_fail_validation(run, records, grounded):
    """Malformed replies: each call lands in exactly one record or schema-failure event."""
    result = run(
        *grounded,
        "rounds=2",
        "model.malformed_rate=0.4",
        "structured.max_repairs=0",
        "format.max_turn_retries=2",
    )
    kept = sum(
        1 for seat in ("for", "against", "public") for _ in records(result.run_dir / seat / "replies.jsonl")
    )
    assert kept == result.manifest.counts.model_calls > 0
    assert result.manifest.counts.schema_failures > 0
    turns = len(
        [t for t in records(result.run_dir / "shared_memory.jsonl") if isinstance(t, CitedTurnRecord)]
    )
    skipped = result.manifest.counts.get("turn_skipped")
    assert turns + skipped == 4  # every turn is published or says why not
    assert verify(result.run_dir)[0] == []


def test_a_turn_that_never_validates_is_skipped_with_an_event(run, records, grounded):
    result = run(*grounded, "rounds=1", "model.malformed_rate=1.0", "structured.max_repairs=0")
    events = [e for e in records(result.run_dir / "events.jsonl") if e.event == "turn_skipped"]
    assert [(e.round, e.team) for e in events] == [(1, "for"), (1, "against")]
    shared = result.run_dir / "shared_memory.jsonl"
    assert not shared.exists() or records(shared) == []
    kept = sum(
        1 for seat in ("for", "against", "public") for _ in records(result.run_dir / seat / "replies.jsonl")
    )
    assert kept == result.manifest.counts.model_calls


def test_out_of_attempts_a_turn_publishes_its_last_valid_draft(run, records, grounded):
    """Attempt 0's draft validates but its citations fail, so it is sent back;
    attempt 1's reply fails the schema (fault seed 5). The turn publishes
    attempt 0's draft, as it would a last attempt's badly cited one, not nothing."""
    result = run(
        *grounded,
        "rounds=1",
        "model.seed=5",
        "model.bad_citation_rate=1.0",
        "format.on_bad_citation=retry",
        "model.malformed_rate=0.5",
        "structured.max_repairs=0",
    )
    run_dir = result.run_dir
    failed = [
        e.iteration
        for e in records(run_dir / "events.jsonl")
        if e.event == "schema_failure" and e.team == "for" and e.role == "arguer"
    ]
    assert [d.iteration for d in records(run_dir / "for" / "drafts.jsonl")] == [0]
    assert 1 in failed  # the re-write's reply never validated
    turn = turns_of(run_dir, records)[0]
    assert (turn.team, turn.draft_id, turn.iteration) == ("for", "r0001.for.draft.i0", 0)
    assert result.manifest.counts.get("turn_skipped") == 0
    assert verify(run_dir)[0] == []


def test_a_rewrite_after_a_failed_reply_is_told_why_the_draft_before_it_failed(run, records, grounded):
    """Fault seed 5: FOR's attempt 0 cites badly, attempt 1's reply fails the
    schema, and attempt 2 is still shown attempt 0's draft and its reasons."""
    args = ("rounds=1", "model.seed=5", "model.bad_citation_rate=1.0", "format.on_bad_citation=retry")
    faults = ("model.malformed_rate=0.5", "structured.max_repairs=0", "format.max_turn_retries=2")
    run_dir = run(*grounded, *args, *faults).run_dir
    drafts = records(run_dir / "for" / "drafts.jsonl")
    assert [d.iteration for d in drafts] == [0, 2]
    prompt = next(
        p for p in records(run_dir / "for" / "prompts.jsonl") if p.id.startswith("r0001.for.arguer.i2")
    )
    asked = prompt.messages[-1]["content"]
    assert "Its citations failed" in asked
    assert drafts[0].text[:60] in asked


def test_a_run_resumed_just_before_its_final_gives_the_final_the_same_prompt(run, grounded, tmp_path):
    """The final reads what a resumed run still holds in memory (its window), not the whole run."""
    args = (*grounded, "rounds=6", "format.final_window=2", "memory.window_rounds=1")
    reference = Outcome.of(run(*args, f"runs_root={tmp_path / 'reference'}").run_dir)

    def build(cfg):  # type: ignore[no-untyped-def]
        model = build_model(cfg)
        inner = model.complete

        def complete(request: ModelRequest) -> Completion:
            if request.tags.get("role") == "synthesizer":
                raise RuntimeError("crash at the final")
            return inner(request)

        model.complete = complete  # type: ignore[method-assign]
        return model

    with pytest.raises(RuntimeError, match="crash at the final"):
        run(*args, f"runs_root={tmp_path / 'crashed'}", build=build)
    (run_dir,) = (tmp_path / "crashed").iterdir()
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)  # public/prompts.jsonl included: the final saw the same

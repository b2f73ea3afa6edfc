"""Routing of a drift turn: approve, reject-then-approve, and loop-lock under
each ``critic.on_loop_lock`` policy (scripted model)."""

from __future__ import annotations

import json

import pytest

from harness.models import build_model
from harness.models.base import Completion, ModelRequest


def turn(run_dir, team, kind, records):
    return [(r.round, r.iteration) for r in records(run_dir / team / f"{kind}.jsonl")]


def test_approve_first_draft_publishes_it(run, records):
    result = run("rounds=2")
    shared = records(result.run_dir / "shared_memory.jsonl")
    assert [(a.round, a.team, a.source, a.iteration) for a in shared] == [
        (1, "pros", "approved", 0),
        (1, "cons", "approved", 0),
        (2, "pros", "approved", 0),
        (2, "cons", "approved", 0),
    ]
    for team in ("pros", "cons"):
        assert turn(result.run_dir, team, "critique", records) == [(1, 0), (2, 0)]
        # the published text is the approved draft, linked by id
        drafts = {t.id: t for t in records(result.run_dir / team / "thinking.jsonl")}
        for arg in (a for a in shared if a.team == team):
            assert arg.text == drafts[arg.draft_id].draft
    counts = result.manifest.counts
    assert (counts.approvals, counts.rejections, counts.loop_locks, counts.published) == (4, 0, 0, 4)
    assert records(result.run_dir / "events.jsonl") == []


def test_reject_then_approve_loops_back_to_persona_with_feedback(run, records):
    result = run("rounds=1", "model.reject_first=2", "critic.max_iterations=3")
    run_dir = result.run_dir
    for team in ("pros", "cons"):
        # every rejection sends the turn back to the persona agent, not just thinking
        assert turn(run_dir, team, "persona", records) == [(1, 0), (1, 1), (1, 2)]
        assert turn(run_dir, team, "thinking", records) == [(1, 0), (1, 1), (1, 2)]
        critiques = records(run_dir / team / "critique.jsonl")
        assert [c.is_approved for c in critiques] == [False, False, True]
        # the critic's feedback is in the next persona and thinking prompts
        prompts = {(p.role, p.iteration): p for p in records(run_dir / team / "prompts.jsonl")}
        for i, rejected in enumerate(critiques[:2], start=1):
            for role in ("persona", "thinking"):
                text = "\n".join(m["content"] for m in prompts[(role, i)].messages)
                assert rejected.feedback in text
        first = "\n".join(m["content"] for m in prompts[("persona", 0)].messages)
        assert "rejected" not in first
    shared = records(run_dir / "shared_memory.jsonl")
    assert [(a.team, a.source, a.iteration) for a in shared] == [
        ("pros", "approved", 2),
        ("cons", "approved", 2),
    ]
    approved = records(run_dir / "pros" / "critique.jsonl")[2]
    assert shared[0].critique_id == approved.id
    counts = result.manifest.counts
    assert (counts.approvals, counts.rejections, counts.loop_locks) == (2, 4, 0)


@pytest.mark.parametrize("reject_first", [2, 5])
def test_loop_lock_publish_last(run, records, reject_first):
    result = run(
        "rounds=2",
        f"model.reject_first={reject_first}",
        "critic.max_iterations=2",
        "critic.on_loop_lock=publish_last",
    )
    run_dir = result.run_dir
    # capped at max_iterations critiques per turn, however many rejections are scripted
    assert turn(run_dir, "pros", "critique", records) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    locks = records(run_dir / "events.jsonl")
    assert [(e.event, e.round, e.team, e.data["policy"]) for e in locks] == [
        ("loop_lock", 1, "pros", "publish_last"),
        ("loop_lock", 1, "cons", "publish_last"),
        ("loop_lock", 2, "pros", "publish_last"),
        ("loop_lock", 2, "cons", "publish_last"),
    ]
    shared = records(run_dir / "shared_memory.jsonl")
    assert [(a.round, a.team, a.source) for a in shared] == [
        (1, "pros", "loop_lock"),
        (1, "cons", "loop_lock"),
        (2, "pros", "loop_lock"),
        (2, "cons", "loop_lock"),
    ]
    # the last (rejected) draft is what gets published
    last_drafts = {(t.round, t.team): t for t in records(run_dir / "pros" / "thinking.jsonl")}
    assert shared[0].draft_id == last_drafts[(1, "pros")].id
    assert shared[0].text == last_drafts[(1, "pros")].draft
    assert result.manifest.status == "completed"
    assert result.manifest.counts.loop_locks == 4
    assert result.manifest.counts.approvals == 0


def test_loop_lock_publishes_the_last_valid_draft_when_a_schema_failure_followed_it(run, records):
    # fault seed 5: pros' first draft is valid (and rejected), its second fails the schema;
    # the turn loop-locks with the first as its last draft (it published nothing before)
    result = run(
        "rounds=1",
        "model.malformed_rate=0.5",
        "model.seed=5",
        "model.reject_first=9",
        "critic.max_iterations=2",
        "structured.max_repairs=0",
        "critic.on_loop_lock=publish_last",
    )
    run_dir = result.run_dir
    events = records(run_dir / "events.jsonl")
    failed = [
        e.iteration for e in events if (e.event, e.team, e.role) == ("schema_failure", "pros", "thinking")
    ]
    drafts = records(run_dir / "pros" / "thinking.jsonl")
    published = [a for a in records(run_dir / "shared_memory.jsonl") if a.team == "pros"]
    assert [d.iteration for d in drafts] == [0] and failed == [1]
    assert [(a.source, a.draft_id, a.text) for a in published] == [
        ("loop_lock", drafts[0].id, drafts[0].draft)
    ]


def test_loop_lock_skip_turn_publishes_nothing_and_moves_on(run, records):
    result = run(
        "rounds=2", "model.reject_first=3", "critic.max_iterations=3", "critic.on_loop_lock=skip_turn"
    )
    run_dir = result.run_dir
    assert records(run_dir / "shared_memory.jsonl") == []
    events = records(run_dir / "events.jsonl")
    assert [(e.event, e.round, e.team) for e in events] == [
        ("loop_lock", 1, "pros"),
        ("loop_lock", 1, "cons"),
        ("loop_lock", 2, "pros"),
        ("loop_lock", 2, "cons"),
    ]
    assert turn(run_dir, "cons", "critique", records) == [(r, i) for r in (1, 2) for i in range(3)]
    assert result.manifest.status == "completed"
    assert result.manifest.counts.rounds_completed == 2
    assert result.manifest.counts.published == 0


def test_loop_lock_abort_stops_the_run(run, records):
    result = run("rounds=3", "model.reject_first=2", "critic.max_iterations=2", "critic.on_loop_lock=abort")
    run_dir = result.run_dir
    events = records(run_dir / "events.jsonl")
    assert [(e.event, e.round, e.team) for e in events] == [("loop_lock", 1, "pros")]
    # nothing after the locked turn: Cons never spoke, nothing was published
    assert records(run_dir / "cons" / "persona.jsonl") == []
    assert records(run_dir / "shared_memory.jsonl") == []
    assert len(records(run_dir / "pros" / "critique.jsonl")) == 2
    manifest = result.manifest
    assert manifest.stop_reason is not None and "loop_lock_abort" in manifest.stop_reason
    assert manifest.counts.rounds_completed == 0
    assert manifest.counts.loop_locks == 1


def test_reject_below_cap_never_locks(run, records):
    # reject_first = max_iterations - 1: the last allowed critique approves
    result = run("rounds=1", "model.reject_first=1", "critic.max_iterations=2", "critic.on_loop_lock=abort")
    assert records(result.run_dir / "events.jsonl") == []
    assert [a.source for a in records(result.run_dir / "shared_memory.jsonl")] == ["approved"] * 2


REVISED = "A sharper version of the draft, written by the critic, with its evidence stated."


@pytest.fixture
def revising_critic():
    """A model factory: scripted models, except the critic approves with a revised argument."""

    class Reviser:
        spec = "scripted:reviser"

        def complete(self, request: ModelRequest) -> Completion:
            text = json.dumps(
                {
                    "critique_feedback": "sound, but tighten it",
                    "is_approved": True,
                    "revised_argument": REVISED,
                }
            )
            return Completion(text, input_tokens=3, output_tokens=3, latency_s=0.0)

        def model_files(self) -> dict[str, str]:
            return {}

    return lambda cfg: Reviser() if cfg.spec == "scripted:reviser" else build_model(cfg)


@pytest.mark.parametrize(("use_revision", "source"), [(True, "revised"), (False, "approved")])
def test_critic_revision_is_published_only_when_enabled(run, records, revising_critic, use_revision, source):
    result = run(
        "rounds=1",
        "roles.critic.spec=scripted:reviser",
        f"critic.use_revision={use_revision}",
        build=revising_critic,
    )
    shared = records(result.run_dir / "shared_memory.jsonl")
    assert [a.source for a in shared] == [source, source]
    drafts = {
        t.id: t.draft for team in ("pros", "cons") for t in records(result.run_dir / team / "thinking.jsonl")
    }
    for arg in shared:
        assert arg.text == (REVISED if use_revision else drafts[arg.draft_id])
        assert arg.draft_id in drafts  # the draft it revises stays linked


def test_every_persona_version_is_recorded(run, records):
    # the scripted model evolves the persona at the planted round, keeps it otherwise
    result = run("rounds=4", "model.persona_switch_round=3")
    for team in ("pros", "cons"):
        personas = records(result.run_dir / team / "persona.jsonl")
        assert [(p.round, p.decision, p.version) for p in personas] == [
            (1, "keep", 1),
            (2, "keep", 1),
            (3, "evolve", 2),
            (4, "keep", 2),
        ]
        assert "furious" in personas[2].persona and "furious" not in personas[1].persona
        # the thinking agent drafts under the persona version of its turn
        drafts = records(result.run_dir / team / "thinking.jsonl")
        assert [d.persona_id for d in drafts] == [p.id for p in personas]

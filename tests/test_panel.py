"""The panel format on the scripted model: routing (judge, cap, no judge),
the blind first round, aliases, isolation, and what verify catches when a
prompt leaks (each check with a positive control)."""

from __future__ import annotations

import json

import pytest

from harness.cli.progress import summary_line
from harness.formats.checks import verify
from harness.models.registry import build_model
from harness.runtime.interrupt import clear_stop, request_stop
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import PromptRecord

SEATS = ["analyst_a", "analyst_b", "analyst_c", "analyst_d"]


def prompts_text(records, round_=None):
    return "\n".join(m["content"] for r in records if round_ is None or r.round == round_ for m in r.messages)


def leak(run_dir, seat, round_, text):
    """Append a prompt holding ``text`` to ``seat``'s prompt log, as a buggy format would."""
    log = JsonlLog(run_dir / seat / "prompts.jsonl")
    log.append(
        PromptRecord(
            id=f"r{round_:04d}.{seat}.analyst.i9.leak",
            round=round_,
            team=seat,
            role="analyst",
            messages=[{"role": "user", "content": f"Earlier you heard: {text}"}],
        )
    )


def test_judge_synthesizes_at_round_two(run, records):
    result = run("format=panel", "model.synthesize_rate=1.0")
    run_dir, manifest = result.run_dir, result.manifest
    decisions = records(run_dir / "public" / "decisions.jsonl")
    assert [(d.round, d.decision) for d in decisions] == [(2, "SYNTHESIZE")]
    (synthesis,) = records(run_dir / "public" / "synthesis.jsonl")
    assert (synthesis.round, synthesis.close_reason) == (2, "judge")
    assert manifest.status == "completed" and manifest.stop_reason.startswith("judge")
    assert manifest.counts.rounds_completed == 2
    shared = records(run_dir / "shared_memory.jsonl")
    assert [(p.round, p.team) for p in shared] == [(r, s) for r in (1, 2) for s in SEATS]
    assert [p.phase for p in shared] == ["blind"] * 4 + ["debate"] * 4
    assert [s.round for s in records(run_dir / "public" / "summaries.jsonl")] == [1, 2]
    assert verify(run_dir) == ([], [])


def test_judge_continues_until_the_cap_forces_synthesis(run, records):
    result = run("format=panel", "model.synthesize_rate=0.0", "rounds=10", "format.max_rounds=3")
    run_dir = result.run_dir
    decisions = records(run_dir / "public" / "decisions.jsonl")
    # no decision in round 1 (it always runs) nor at the cap (synthesis is forced)
    assert [(d.round, d.decision) for d in decisions] == [(2, "CONTINUE")]
    (synthesis,) = records(run_dir / "public" / "synthesis.jsonl")
    assert (synthesis.round, synthesis.close_reason) == (3, "cap")
    assert result.manifest.stop_reason.startswith("cap")
    assert result.manifest.counts.rounds_completed == 3
    # the summary line says why it is short of rounds=10, where it said 'completed: rounds 3/10'
    assert summary_line(result.manifest, 10).startswith(
        "completed: rounds 3/10 (cap: synthesis after round 3) |"
    )
    assert result.manifest.counts.by_kind == {
        "role_card": 4,
        "thinking": 12,
        "summary": 3,
        "decision": 1,
        "synthesis": 1,
    }
    assert verify(run_dir) == ([], [])


def test_judge_disabled_runs_every_round(run, records):
    result = run("format=panel", "format.judge=false", "rounds=12", "model.synthesize_rate=1.0")
    run_dir = result.run_dir
    assert records(run_dir / "public" / "decisions.jsonl") == []
    (synthesis,) = records(run_dir / "public" / "synthesis.jsonl")
    assert (synthesis.round, synthesis.close_reason) == (12, "rounds")
    assert result.manifest.stop_reason is None and result.manifest.status == "completed"
    assert len(records(run_dir / "shared_memory.jsonl")) == 48
    assert len(records(run_dir / "public" / "summaries.jsonl")) == 12
    # snapshots hold positions, not content: once every log has a window, their size stays flat
    sizes = [p.stat().st_size for p in sorted((run_dir / "snapshots").iterdir())]
    assert len(sizes) == 12 and max(sizes[3:]) < 1.05 * min(sizes[3:]), sizes  # only digits grow


def test_round_one_is_blind_and_later_rounds_hear_the_panel(run, records):
    result = run("format=panel", "model.synthesize_rate=0.0", "rounds=3", "format.max_rounds=3")
    run_dir = result.run_dir
    shared = records(run_dir / "shared_memory.jsonl")
    cards = {c.team: c for c in records(run_dir / "public" / "roles.jsonl")}
    (decision,) = records(run_dir / "public" / "decisions.jsonl")
    for seat in SEATS:
        prompts = records(run_dir / seat / "prompts.jsonl")
        blind = prompts_text(prompts, 1)
        for other in shared:
            if other.team != seat:
                assert other.text not in blind
        assert cards[seat].mandate not in blind  # round 1 answers the topic, not a role
        second, third = prompts_text(prompts, 2), prompts_text(prompts, 3)
        assert cards[seat].mandate in second
        for p in shared:
            if p.round == 1:
                assert p.text[:200] in second and f"[{p.alias}" in second
        assert decision.tension not in second and decision.tension in third


def test_aliases_hide_models_and_verify_catches_a_named_model(run, records):
    specs = [
        f"roles.{s}.spec=scripted:{name}"
        for s, name in zip(SEATS, ("aardvark-7", "bison-9", "cobra-3", "dingo-5"), strict=True)
    ]
    result = run("format=panel", "model.synthesize_rate=0.0", "rounds=3", *specs)
    run_dir, manifest = result.run_dir, result.manifest
    assert manifest.model_specs["analyst_b"] == "scripted:bison-9"
    for seat in SEATS:
        text = prompts_text(records(run_dir / seat / "prompts.jsonl")).lower()
        for name in ("aardvark", "bison", "cobra", "dingo"):
            assert name not in text
    assert "Analyst A" in prompts_text(records(run_dir / "analyst_b" / "prompts.jsonl"), 2)
    assert verify(run_dir) == ([], [])
    leak(run_dir, "analyst_b", 3, "a point made by Aardvark-7")
    problems, _ = verify(run_dir)
    assert any("analyst_b/prompts.jsonl" in p and "analyst_a's model" in p for p in problems), problems


def test_verify_catches_a_broken_blind_round(run, records):
    result = run("format=panel", "model.synthesize_rate=1.0")
    run_dir = result.run_dir
    first = next(
        p for p in records(run_dir / "shared_memory.jsonl") if p.team == "analyst_a" and p.round == 1
    )
    leak(run_dir, "analyst_c", 1, first.text)
    problems, _ = verify(run_dir)
    assert any("analyst_c/prompts.jsonl" in p and "blind round" in p for p in problems), problems


def test_an_analyst_echoing_its_own_template_breaks_no_blind_round(run, records):
    """Gemma 3 270M (a base model) copies template lines into its notes; every
    analyst's round-1 prompt holds that line, and that is no leak."""
    from harness.store.records import ThinkingRecord

    result = run("format=panel", "model.synthesize_rate=1.0")
    run_dir = result.run_dir
    own = prompts_text([p for p in records(run_dir / "analyst_a" / "prompts.jsonl") if p.round == 1])
    template = "- notes: your private reasoning, which no one else sees"
    assert template in own
    JsonlLog(run_dir / "analyst_a" / "thinking.jsonl").append(
        ThinkingRecord(
            id="r0001.analyst_a.thinking.i9",
            round=1,
            team="analyst_a",
            role="analyst",
            scratchpad=template,
            draft=template,
        )
    )
    assert verify(run_dir) == ([], [])


def test_private_notes_stay_private_and_verify_catches_a_leak(run, records):
    result = run("format=panel", "model.synthesize_rate=0.0", "rounds=3", "format.max_rounds=3")
    run_dir = result.run_dir
    notes = {s: [t.scratchpad for t in records(run_dir / s / "thinking.jsonl")] for s in SEATS}
    assert all("[canary:" in n for s in SEATS for n in notes[s])  # the scripted model marks them
    for seat in SEATS:
        seen = prompts_text(records(run_dir / seat / "prompts.jsonl"))
        public = prompts_text(records(run_dir / "public" / "prompts.jsonl"))
        for other in SEATS:
            for note in notes[other] if other != seat else []:
                assert note not in seen and note not in public
    leak(run_dir, "analyst_d", 3, notes["analyst_a"][1])
    problems, _ = verify(run_dir)
    assert any("analyst_d/prompts.jsonl: contains analyst_a's private text" in p for p in problems), problems


def test_disruptor_seat_questions_the_premise(run, records):
    result = run("format=panel", "format.disruptor=true", "format.analysts=3", "model.synthesize_rate=1.0")
    cards = records(result.run_dir / "public" / "roles.jsonl")
    assert [(c.team, c.disruptor, c.model is None) for c in cards] == [
        ("analyst_a", False, False),
        ("analyst_b", False, False),
        ("analyst_c", True, True),
    ]
    assert "premise" in cards[-1].mandate
    assert "premise" in prompts_text(records(result.run_dir / "analyst_c" / "prompts.jsonl"), 2)


def test_topic_and_framework_may_come_from_files(run, records, tmp_path):
    (tmp_path / "topic.txt").write_text("Should the city ban cars from its old town?\n")
    (tmp_path / "framework.txt").write_text("Criteria: air quality, shop revenue, access for the disabled.")
    result = run(
        "format=panel",
        "model.synthesize_rate=1.0",
        f"topic.text_file={tmp_path / 'topic.txt'}",
        f"topic.framework_file={tmp_path / 'framework.txt'}",
    )
    text = prompts_text(records(result.run_dir / "analyst_a" / "prompts.jsonl"), 1)
    assert "ban cars from its old town" in text and "shop revenue" in text
    saved = (result.run_dir / "config.yaml").read_text()
    assert "shop revenue" in saved and "framework_file: null" in saved  # the run keeps the text it used
    assert result.manifest.topic == "Should the city ban cars from its old town?"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["format.analysts=9"], "format.analysts"),
        (["format.analysts=3", "roles.analyst_d.spec=scripted:x"], "roles.analyst_d"),
        (["format.max_rounds=0"], "format.max_rounds"),
        (["topic.framework_file=/nonexistent/framework.txt"], "topic.framework_file"),
        (["+format.judges=2"], "format.judges"),
    ],
)
def test_bad_panel_settings_fail_in_one_line(settings, overrides, key):
    with pytest.raises(ConfigError) as caught:
        settings("format=panel", *overrides)
    assert str(caught.value).startswith(key) and "\n" not in str(caught.value)


def test_each_seat_may_run_its_own_model(run):
    result = run(
        "format=panel",
        "model.synthesize_rate=1.0",
        "format.analysts=2",
        "roles.analyst_b.spec=scripted:other",
        "roles.judge.temperature=0.1",
    )
    specs = result.manifest.model_specs
    assert specs["analyst_b"] == "scripted:other" and specs["analyst_a"] == "scripted:default"
    assert set(specs) == {
        "analyst_a",
        "analyst_b",
        "role_generator",
        "summarizer",
        "judge",
        "synthesizer",
        "topic",
    }
    layout = json.loads((result.run_dir / "manifest.json").read_text())["layout"]
    assert [s["alias"] for s in layout["seats"]] == ["Analyst A", "Analyst B"]


def test_cloned_role_cards_are_re_asked_then_replaced_by_distinct_lenses(run, records):
    """Small models copy one card n times; the panel must not seat n clones."""
    from harness.models import ModelRequest, build_model
    from harness.models.base import Completion

    asked: list[ModelRequest] = []

    class Cloner:
        spec = "scripted:cloner"

        def complete(self, request: ModelRequest) -> Completion:
            asked.append(request)
            card = {
                "name": "Urban planner",
                "expertise": "city transport systems",
                "mandate": "push on costs now",
            }
            return Completion(
                json.dumps({"roles": [card] * 4}), input_tokens=5, output_tokens=5, latency_s=0.0
            )

        def model_files(self) -> dict[str, str]:
            return {}

    result = run(
        "format=panel",
        "model.synthesize_rate=1.0",
        "roles.role_generator.spec=scripted:cloner",
        "structured.max_repairs=1",
        build=lambda cfg: Cloner() if cfg.spec == "scripted:cloner" else build_model(cfg),
    )
    assert len(asked) == 2  # the first reply, then one re-ask showing why it failed
    assert "different name" in asked[1].messages[-1]["content"]
    cards = records(result.run_dir / "public" / "roles.jsonl")
    assert all(c.fallback for c in cards) and len({c.name for c in cards}) == 4
    assert [c.usage.calls for c in cards] == [2, 0, 0, 0]  # both calls counted, once
    events = [e for e in records(result.run_dir / "events.jsonl") if e.event == "schema_failure"]
    assert [e.role for e in events] == ["role_generator"]
    assert verify(result.run_dir) == ([], [])


class StopsAt:
    """A model that asks the run to stop (as its SIGINT handler does) at its first
    call of ``role`` in ``round_``, then answers it as ``inner`` would."""

    def __init__(self, inner, round_: int, role: str) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.spec, self.round, self.role = inner, inner.spec, round_, role

    def complete(self, request):  # type: ignore[no-untyped-def]
        if request.tags.get("round") == self.round and request.tags.get("role") == self.role:
            request_stop("SIGINT")
        return self.inner.complete(request)

    def model_files(self) -> dict[str, str]:
        return {}


def test_ctrl_c_in_the_last_round_stops_the_panel_after_its_node(run, records):
    # the panel's analysts, summary and judge nodes change no graph state, so a stream of
    # the state's values yielded nothing after them: the stop went unseen until the round
    # ended, and in the last round the run completed with its synthesis
    build = lambda cfg: StopsAt(build_model(cfg), 2, "analyst")  # noqa: E731
    try:
        result = run("format=panel", "rounds=2", "model.synthesize_rate=0.0", build=build)
    finally:
        clear_stop()
    assert result.manifest.status == "interrupted" and result.manifest.counts.rounds_completed == 1
    assert records(result.run_dir / "public" / "synthesis.jsonl") == []

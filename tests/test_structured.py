"""Structured output: parse and repair, bounded re-asks with the validation
error in the prompt, ``schema_failure`` events, and each agent's documented
fallback. Unvalidated data never reaches memory or routing."""

from __future__ import annotations

import json

import pytest

from harness.agents import CritiqueOutput, PersonaOutput, ThinkingOutput
from harness.models import build_model
from harness.models.base import Completion, ModelRequest
from harness.models.scripted import ScriptedModel
from harness.models.structured import (
    CHARS_PER_TOKEN,
    TURN_ROOM,
    extract_json,
    fit_schema,
    generate_structured,
    min_tokens,
    parse_reply,
    reply_labels,
    request_schema,
)

TEAMS = ("pros", "cons")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is: {"a": 1} Hope that helps.', {"a": 1}),
        ('{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}),
        ('{"a": "cut off by max_tok', {"a": "cut off by max_tok"}),
        ('{"a": {"b": [1, 2', {"a": {"b": [1, 2]}}),
        ('{"a": "brace } and \\" quote"}', {"a": 'brace } and " quote'}),
        ('{"a": "raw\nnewline\tand tab"}', {"a": "raw\nnewline\tand tab"}),
    ],
)
def test_extract_json_repairs_common_damage(reply, expected):
    assert extract_json(reply) == expected


@pytest.mark.parametrize("reply", ["", "no json here", '{"a": tru', "[1, 2]"])
def test_extract_json_gives_up_with_value_error(reply):
    with pytest.raises(ValueError):
        extract_json(reply)


class Replies:
    """A fake model that returns canned replies in order and keeps each request."""

    spec = "fake:replies"

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> Completion:
        self.requests.append(request)
        return Completion(self.texts.pop(0), input_tokens=10, output_tokens=5, latency_s=0.01)

    def model_files(self) -> dict[str, str]:
        return {}


def ask(model: Replies, max_repairs: int):  # type: ignore[no-untyped-def]
    messages = [{"role": "user", "content": "critique this"}]
    return generate_structured(
        model.complete,
        messages,
        CritiqueOutput,
        temperature=0.5,
        max_tokens=64,
        seed=7,
        max_repairs=max_repairs,
        tags={"round": 1},
    )


def test_repair_shows_the_validation_error_and_succeeds():
    good = json.dumps({"critique_feedback": "the draft is sound", "is_approved": True})
    model = Replies('{"critique_feedback": "x"}', good)  # first lacks is_approved
    result = ask(model, max_repairs=2)
    assert result.ok and result.value == CritiqueOutput(
        critique_feedback="the draft is sound", is_approved=True
    )
    assert result.attempts == 2
    assert result.usage.calls == 2 and result.usage.input_tokens == 20
    assert len(result.errors) == 1 and "is_approved" in result.errors[0]
    first, second = model.requests
    # decoded under the schema fitted to the 64-token budget
    assert (
        first.schema
        == fit_schema(CritiqueOutput.model_json_schema(), 64)
        != CritiqueOutput.model_json_schema()
    )
    assert second.messages[0] == first.messages[0]
    assert second.messages[1] == {"role": "assistant", "content": '{"critique_feedback": "x"}'}
    assert "is_approved" in second.messages[-1]["content"]  # the error is in the re-ask
    assert first.seed != second.seed  # a re-ask may sample differently


def test_repairs_are_bounded_and_failure_returns_no_value():
    model = Replies('{"is_approved": "maybe"}', "nothing", '{"critique_feedback": 3}', "never asked")
    result = ask(model, max_repairs=2)
    assert not result.ok and result.value is None
    assert result.attempts == 3 and len(model.requests) == 3
    assert len(result.errors) == 3
    assert result.raw == '{"critique_feedback": 3}'


def test_over_long_field_fails_validation():
    model = Replies(json.dumps({"critique_feedback": "x" * 401, "is_approved": True}))
    assert not ask(model, max_repairs=0).ok


def test_malformed_replies_are_repaired_and_only_valid_records_are_stored(run, records):
    result = run("rounds=4", "model.malformed_rate=0.4", "structured.max_repairs=3")
    run_dir = result.run_dir
    repaired = [
        rec
        for team in TEAMS
        for kind in ("persona", "thinking", "critique")
        for rec in records(run_dir / team / f"{kind}.jsonl")
        if rec.usage.calls > 1
    ]
    assert repaired, "malformed_rate=0.4 should force at least one repair"
    # every reply that reached memory validated; malformed text appears only
    # as a kept failed reply in the team's prompt log, and as it came back in replies.jsonl
    malformed = 0
    for path in run_dir.rglob("*.jsonl"):
        for rec in records(path):
            if rec.kind == "reply":
                malformed += '": tru' in rec.text
                continue
            if rec.kind == "prompt" and rec.id.endswith("failed-reply"):
                continue
            # the scripted model's broken reply ends '": tru' (JSON-escaped in the dump)
            assert '\\": tru"' not in rec.model_dump_json(), rec.id
    assert result.manifest.counts.model_calls > sum(
        len(records(run_dir / t / "prompts.jsonl")) for t in TEAMS
    )
    assert malformed >= len(repaired)  # each repair followed a malformed reply, kept for replay


def test_schema_failures_fall_back_as_documented(run, records):
    # nothing ever validates: persona keeps the default, thinking yields no
    # draft, the critic is never asked, and the turn loop-locks with nothing to publish
    result = run(
        "rounds=1",
        "model.malformed_rate=1.0",
        "structured.max_repairs=1",
        "critic.max_iterations=2",
        "critic.on_loop_lock=publish_last",
    )
    run_dir = result.run_dir
    events = records(run_dir / "events.jsonl")
    failures = [e for e in events if e.event == "schema_failure"]
    assert [(e.team, e.role, e.iteration) for e in failures] == [
        (team, role, i) for team in TEAMS for i in range(2) for role in ("persona", "thinking")
    ]
    for e in failures:
        assert e.error is not None and e.error.kind == "validation"
        assert "2 attempts" in e.detail
        assert e.usage.calls == 2  # the failed calls still cost tokens
        # the last bad reply is kept, in the team's own folder (it may be private)
        kept = {p.id: p for p in records(run_dir / e.team / "prompts.jsonl")}[e.data["reply_id"]]
        assert kept.role == e.role and kept.messages[0]["role"] == "assistant"
        assert ": tru" in kept.messages[0]["content"]
    for team in TEAMS:
        personas = records(run_dir / team / "persona.jsonl")
        assert {p.decision for p in personas} == {"fallback"}
        assert {p.version for p in personas} == {1}
        assert "argues" in personas[0].persona  # the default persona text
        assert records(run_dir / team / "thinking.jsonl") == []
        critiques = records(run_dir / team / "critique.jsonl")
        assert [(c.is_approved, c.fallback, c.draft_id) for c in critiques] == [(False, True, "none")] * 2
        prompts = records(run_dir / team / "prompts.jsonl")
        assert {p.role for p in prompts} == {"persona", "thinking"}  # critic not called
        assert all(p.iteration in (0, 1) for p in prompts)
    assert [e.event for e in events].count("loop_lock") == 2
    assert records(run_dir / "shared_memory.jsonl") == []
    assert result.manifest.counts.schema_failures == 8
    assert result.manifest.status == "completed"


def test_persona_fallback_keeps_the_previous_persona(run, records):
    result = run("rounds=6", "model.malformed_rate=0.5", "structured.max_repairs=0")
    checked = 0
    for team in TEAMS:
        personas = records(result.run_dir / team / "persona.jsonl")
        for before, now in zip(personas, personas[1:], strict=False):
            if now.decision == "fallback":
                assert (now.persona, now.version) == (before.persona, before.version)
                assert "schema failure" in now.rationale
                checked += 1
    assert checked, "seeded malformed_rate=0.5 should hit at least one persona fallback"


@pytest.fixture
def broken_critic():
    """A model factory: every model is scripted; ``scripted:broken`` always emits bad JSON."""

    def build(cfg):  # type: ignore[no-untyped-def]
        if cfg.spec == "scripted:broken":
            return ScriptedModel(cfg.spec, malformed_rate=1.0)
        return build_model(cfg)

    return build


@pytest.mark.parametrize(("policy", "published"), [("reject", []), ("approve", ["approved", "approved"])])
def test_critic_schema_failure_policy(run, records, broken_critic, policy, published):
    result = run(
        "rounds=1",
        "roles.critic.spec=scripted:broken",
        f"critic.on_schema_failure={policy}",
        "critic.max_iterations=2",
        "critic.on_loop_lock=skip_turn",
        build=broken_critic,
    )
    run_dir = result.run_dir
    for team in TEAMS:
        critiques = records(run_dir / team / "critique.jsonl")
        assert critiques and all(c.fallback for c in critiques)
        assert {c.is_approved for c in critiques} == {policy == "approve"}
        assert {c.model for c in critiques} == {"scripted:broken"}
        assert critiques[0].feedback == "critic reply failed validation"
    shared = records(run_dir / "shared_memory.jsonl")
    assert [a.source for a in shared] == published
    if policy == "approve":  # the draft itself is published, never the broken reply
        drafts = {t.id: t.draft for team in TEAMS for t in records(run_dir / team / "thinking.jsonl")}
        assert all(a.text == drafts[a.draft_id] for a in shared)
    failures = [e for e in records(run_dir / "events.jsonl") if e.event == "schema_failure"]
    assert failures and {e.role for e in failures} == {"critique"}


def test_generated_topic_falls_back_to_the_configured_text(run, records, broken_critic):
    result = run("rounds=1", "topic.generate=true", "roles.topic.spec=scripted:broken", build=broken_critic)
    events = records(result.run_dir / "events.jsonl")
    topic = [e for e in events if e.event == "topic"]
    assert len(topic) == 1 and topic[0].data["generated"] is False
    assert topic[0].detail == "Remote work is better for society than office work."
    assert result.manifest.topic == topic[0].detail
    assert [e.role for e in events if e.event == "schema_failure"] == ["topic"]


def test_generated_topic_is_used_and_recorded(run, records):
    result = run("rounds=1", "topic.generate=true")
    (event,) = [e for e in records(result.run_dir / "events.jsonl") if e.event == "topic"]
    assert event.data["generated"] is True
    assert event.detail != "Remote work is better for society than office work."
    assert result.manifest.topic == event.detail
    prompt = records(result.run_dir / "pros" / "prompts.jsonl")[0]
    assert f"Motion: {event.detail}" in prompt.messages[1]["content"]


def test_persona_output_rejects_unknown_decision():
    with pytest.raises(ValueError):
        PersonaOutput.model_validate({"decision": "fallback", "persona": "p", "rationale": "r"})


@pytest.mark.parametrize(
    "overrides",
    [
        ("topic.generate=true", "roles.topic.spec=scripted:broken"),
        ("memory.log_prompts=false", "model.malformed_rate=1.0"),
    ],
)
def test_schema_failure_points_only_at_a_kept_reply(run, records, broken_critic, overrides):
    result = run("rounds=1", "critic.max_iterations=1", *overrides, build=broken_critic)
    logs = [*(f"{team}/prompts.jsonl" for team in TEAMS), "public/prompts.jsonl"]
    kept = {p.id for name in logs for p in records(result.run_dir / name)}
    failures = [e for e in records(result.run_dir / "events.jsonl") if e.event == "schema_failure"]
    assert failures
    for e in failures:
        assert e.data.get("reply_id") is None or e.data["reply_id"] in kept, e.data


def string_limits(schema: dict) -> dict[str, tuple[int, int]]:  # type: ignore[type-arg]
    return {
        k: (v.get("minLength", 0), v["maxLength"])
        for k, v in schema["properties"].items()
        if "maxLength" in v
    }


def test_a_budget_that_fits_leaves_the_schema_alone():
    schema = ThinkingOutput.model_json_schema()
    assert fit_schema(schema, 4096) == schema


@pytest.mark.parametrize("max_tokens", [64, 128, 256])
def test_strings_are_cut_to_their_share_of_the_budget(max_tokens):
    # Gemma 3 270M spent all 256 tokens inside the 300-char scratchpad, three times running
    schema = ThinkingOutput.model_json_schema()
    declared, fitted = string_limits(schema), string_limits(fit_schema(schema, max_tokens))
    for name, (least, most) in fitted.items():
        assert least <= most <= declared[name][1]
    chars = sum(most for _, most in fitted.values())
    assert chars < declared["scratchpad"][1] + declared["argument"][1]
    assert chars / CHARS_PER_TOKEN < max_tokens  # the strings fit the budget, with the JSON around them
    if fitted["argument"][1] > TURN_ROOM:  # room for the turn: both fields are cut alike
        assert fitted["scratchpad"][1] / fitted["argument"][1] == pytest.approx(300 / 500, abs=0.05)


@pytest.mark.parametrize("max_tokens", [64, 96, 128])
def test_a_tight_budget_gives_the_turn_room_before_the_scratchpad(max_tokens):
    # At 96 tokens the scratchpad's share left the argument 114 characters, shorter than
    # SmolLM2's usual first sentence: most thinking replies were cut with no sentence ended.
    schema = ThinkingOutput.model_json_schema()
    fitted = string_limits(fit_schema(schema, max_tokens))
    assert fitted["argument"][1] == TURN_ROOM or fitted["scratchpad"][1] == fitted["scratchpad"][0]
    assert fitted["argument"][1] > 500 * fitted["scratchpad"][1] / 300  # more than its proportional share
    assert sum(most for _, most in fitted.values()) / CHARS_PER_TOKEN < max_tokens


def test_an_optional_or_private_field_makes_no_turn_room():
    # the critic's revision is optional, its feedback unpublished: both are cut alike
    fitted = fit_schema(CritiqueOutput.model_json_schema(), 96)["properties"]
    revised = next(o for o in fitted["revised_argument"]["anyOf"] if o.get("type") == "string")
    assert revised["maxLength"] / fitted["critique_feedback"]["maxLength"] == pytest.approx(
        500 / 400, abs=0.05
    )


def test_the_fit_shapes_decoding_not_validation():
    long = {"scratchpad": "s" * 290, "argument": "a" * 490}
    assert parse_reply(json.dumps(long), ThinkingOutput).argument == "a" * 490


def test_no_cut_goes_below_a_minimum_and_the_minimum_budget_is_named():
    schema = ThinkingOutput.model_json_schema()
    floor = min_tokens(schema)
    assert string_limits(fit_schema(schema, 10)) == {"scratchpad": (20, 20), "argument": (40, 40)}
    assert string_limits(fit_schema(schema, floor)) != string_limits(schema)
    assert 20 < floor < 64


def test_a_budget_below_the_formats_least_reply_is_refused_before_any_folder(run, runs_root):
    from harness.schema import ConfigError

    with pytest.raises(ConfigError) as caught:
        run("llm.max_tokens=40")
    assert str(caught.value) == (
        "llm.max_tokens: 40 tokens cannot hold a valid CritiqueOutput reply; format drift needs at least 57"
    )
    with pytest.raises(ConfigError, match=r"^roles\.critic\.max_tokens: 50 tokens"):
        run("roles.critic.max_tokens=50")
    assert not runs_root.exists()
    # at the least, a run goes (the scripted model writes to the fitted schema)
    assert run("llm.max_tokens=57", "rounds=1").manifest.status == "completed"


@pytest.mark.parametrize("max_tokens", [64, 4096])
def test_a_request_schema_is_the_fitted_schema_and_its_own_copy(max_tokens):
    expected = fit_schema(ThinkingOutput.model_json_schema(), max_tokens)
    first = request_schema(ThinkingOutput, max_tokens)
    assert first == expected
    first["properties"]["argument"]["maxLength"] = 1  # a backend that edits its request's schema
    first["required"].clear()
    assert request_schema(ThinkingOutput, max_tokens) == expected


THINK_PROMPT = (
    "Motion: remote work.\nDebate so far:\n- speaker: a quoted line that names no field of the reply\n"
    "Write JSON with:\n- scratchpad: your private reasoning; test the argument against the strongest objection\n"
    "- argument: the argument to publish, two to four sentences with a concrete reason"
)
REASONED = "Commuting costs each worker an hour a day, which is time lost to work and family."


def think(model: Replies, max_repairs: int):  # type: ignore[no-untyped-def]
    messages = [
        {"role": "system", "content": "You are a debater."},
        {"role": "user", "content": THINK_PROMPT},
    ]
    return generate_structured(
        model.complete,
        messages,
        ThinkingOutput,
        temperature=0.5,
        max_tokens=256,
        seed=7,
        max_repairs=max_repairs,
        tags={"round": 1},
    )


@pytest.mark.parametrize(
    ("echo", "label"),
    [
        (
            "The argument to publish, two to four sentences with a concrete reason.",
            "the argument to publish, two",
        ),
        ("the argument to publish", "the argument to publish"),  # the schema's own description
        # spaced apart (SmolLM2's fact-checker justified a verdict with "one or two  sentences")
        (
            "The argument  to publish, two to four sentences with a\nconcrete reason.",
            "the argument to publish, two",
        ),
    ],
)
def test_a_field_filled_with_its_label_is_repaired(echo, label):
    scratch = "Objection: people like offices. Answer: they can still go in."
    model = Replies(
        json.dumps({"scratchpad": scratch, "argument": echo + " " * 20}),  # valid by length and type
        json.dumps({"scratchpad": scratch, "argument": REASONED}),
    )
    result = think(model, max_repairs=1)
    assert result.ok and result.value.argument == REASONED and result.attempts == 2
    assert result.errors[0].startswith("argument: repeats the field's label") and label in result.errors[0]
    assert "repeats the field's label" in model.requests[1].messages[-1]["content"]  # shown in the re-ask


def test_a_reply_that_only_echoes_labels_fails_after_its_repairs():
    echo = json.dumps(
        {
            "scratchpad": "your private reasoning; test the argument against the strongest objection",
            "argument": REASONED,
        }
    )
    result = think(Replies(echo, echo), max_repairs=1)
    assert not result.ok and result.attempts == 2
    assert all(e.startswith("scratchpad: repeats") for e in result.errors)


def test_a_long_field_that_merely_contains_a_label_passes():
    scratch = "Not a label: the argument to publish should rest on costs that every reader knows."
    argument = f"{REASONED} Offices also cost rent, and the argument to publish is this one."
    model = Replies(json.dumps({"scratchpad": scratch, "argument": argument}))
    assert think(model, max_repairs=0).ok


def test_only_the_prompts_lines_for_the_replys_fields_are_labels():
    messages = [{"role": "user", "content": THINK_PROMPT}]
    labels = reply_labels(ThinkingOutput, messages)
    assert "the argument to publish, two to four sentences with a concrete reason" in labels
    assert "the argument to publish" in labels and "private reasoning and stress tests" in labels
    assert not any("quoted line" in label for label in labels)  # "- speaker:" is not a field

"""The scripted model's field script (harness.models.script): rules added from
outside drive its replies (a fixed value, a rate honoured over many seeds, a
value derived from the prompt, a canary), scoped by role and schema, ahead
of the built-in ones; the model.* keys reach the built-in rules' settings."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import CONF_DIR
from pydantic import BaseModel, Field

from harness.agents.judge import JudgeOutput
from harness.models import build_model
from harness.models.base import ModelRequest
from harness.models.script import (
    PLUGIN_RULES,
    Derived,
    FieldRule,
    Fixed,
    Rate,
    ReplyField,
    Text,
    deriver,
    register_rules,
)
from harness.models.scripted import ScriptedModel
from harness.models.scripted_rules import SETTINGS
from harness.schema import ModelConfig

SEEDS = range(2000)


class Mood(BaseModel):
    stance: str = Field(min_length=1)
    mood: str = Field(min_length=1)
    tone: str = Field(min_length=1)
    sources: list[str]


MOOD = Mood.model_json_schema()


def reply(model: ScriptedModel, schema: dict[str, Any], seed: int = 0, **tags: Any) -> dict[str, Any]:
    prompt = tags.pop("prompt", "x")
    tags = {"round": 1, "team": "pros", "role": "plugin", "iteration": 0, "side": "for", **tags}
    request = ModelRequest(
        messages=[{"role": "user", "content": prompt}], schema=schema, seed=seed, tags=tags
    )
    return json.loads(model.complete(request).text)


@pytest.fixture
def registered() -> Iterator[None]:
    """Rules registered by a test are gone after it."""
    saved = list(PLUGIN_RULES)
    yield
    PLUGIN_RULES[:] = saved


def test_a_registered_fixed_value_and_rate_drive_the_reply(registered):
    register_rules(
        FieldRule("plugin.stance", ("stance",), Fixed("firm")),
        FieldRule("plugin.mood", ("mood",), Rate("calm", "angry", rate=0.3), on="string"),
    )
    model = ScriptedModel(seed=4)
    replies = [reply(model, MOOD, seed) for seed in SEEDS]
    assert {r["stance"] for r in replies} == {"firm"}
    calm = sum(r["mood"] == "calm" for r in replies) / len(replies)
    assert {r["mood"] for r in replies} == {"calm", "angry"} and abs(calm - 0.3) < 0.05
    # a field no rule writes keeps the default: a 12-word sentence
    assert all(len(r["tone"].split()) == 12 for r in replies)


def test_an_enum_rate_applies_only_where_its_option_is_offered():
    enum = {"title": "Pick", "type": "object", "properties": {"pick": {"enum": ["a", "b", "c"]}}}
    rule = FieldRule("plugin.pick", ("pick",), Rate("c", "a", rate=0.8), on="enum", option="c")
    picks = [reply(ScriptedModel(script=[rule]), enum, seed)["pick"] for seed in SEEDS]
    assert set(picks) == {"a", "c"} and abs(picks.count("c") / len(picks) - 0.8) < 0.05
    other = {**enum, "properties": {"pick": {"enum": ["a", "b"]}}}  # no "c": a seeded choice
    assert {reply(ScriptedModel(script=[rule]), other, seed)["pick"] for seed in range(50)} == {"a", "b"}


def test_a_derived_value_reads_the_prompt_and_a_canary_tags_private_text():
    @deriver("test.passage_ids")
    def passage_ids(field: ReplyField) -> list[str]:
        return [w.strip("[]") for w in field.prompt.split() if w.startswith("[")]

    script = [
        FieldRule("plugin.sources", ("sources",), Derived("test.passage_ids")),
        FieldRule("plugin.tone", ("tone",), Text(5), on="string", canary=True),
    ]
    out = reply(ScriptedModel(script=script), MOOD, prompt="see [kjv.1] and [kjv.2]", round=3, iteration=1)
    assert out["sources"] == ["kjv.1", "kjv.2"]
    words, canary = out["tone"].rsplit(" ", 1)
    assert len(words.split()) == 5 and canary == "[canary:pros:tone:3.1]"


def test_rules_are_scoped_by_role_and_schema_and_a_models_own_come_first():
    script = [
        FieldRule("plugin.host_stance", ("stance",), Fixed("asks"), role="host"),
        FieldRule("plugin.other_schema", ("stance",), Fixed("never"), schema="SomethingElse"),
        FieldRule("plugin.winner", ("winner",), Fixed("CONTINUE")),  # before the built-in rules
    ]
    model = ScriptedModel(script=script, judge_winner="pro")
    assert reply(model, MOOD, role="host")["stance"] == "asks"
    assert reply(model, MOOD, role="guest")["stance"] not in ("asks", "never")
    verdict = {"title": "V", "type": "object", "properties": {"winner": {"enum": ["pro", "con"]}}}
    assert reply(model, verdict)["winner"] == "pro"  # not an option: the built-in rule writes it


def test_the_model_keys_reach_the_built_in_rules_settings():
    """Every setting is a model.* key with the same default, and build_model passes it in."""
    fields = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    conf = yaml.safe_load((CONF_DIR / "model" / "scripted.yaml").read_text())
    assert all(fields[key] == conf[key] == default for key, default in SETTINGS.items())
    model = build_model(ModelConfig(spec="scripted:x", synthesize_rate=0.3, judge_winner="con"))
    assert isinstance(model, ScriptedModel)
    assert model.settings == {**SETTINGS, "synthesize_rate": 0.3, "judge_winner": "con"}
    schema = JudgeOutput.model_json_schema()
    decisions = [reply(model, schema, seed, role="judge")["decision"] for seed in SEEDS]
    assert abs(decisions.count("SYNTHESIZE") / len(decisions) - 0.3) < 0.05


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        (
            FieldRule("bad", ("x",), Rate("a", "b", setting="nope")),
            "rule 'bad': unknown model setting 'nope'",
        ),
        (FieldRule("bad", ("x",), Derived("nope")), "rule 'bad': no deriver 'nope' is registered"),
        (FieldRule("bad", ("x",), Text(), on="float"), "rule 'bad': on must be one of"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_rule_is_one_line_naming_it(rule, error):
    with pytest.raises(ValueError, match=f"^scripted: {error}") as info:
        ScriptedModel(script=[rule])
    assert "\n" not in str(info.value)


def test_an_unknown_setting_is_refused():
    with pytest.raises(TypeError, match="unknown setting 'synthesise_rate'"):
        ScriptedModel(synthesise_rate=0.3)

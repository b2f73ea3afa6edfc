"""A planted persona (``personas.<seat>``, issue 36): the seat's persona taken
as given from ``from_round`` on, recorded with no model call; the scripted
model argues in the register of the persona its prompt shows, so a switch
planted in the prompt reaches the text; bad keys fail in one line."""

from __future__ import annotations

import json

import pytest

from harness.models.scripted_style import SWITCHED
from harness.schema import ConfigError

HOSTILE = (
    "A furious contrarian who mocks every opposing claim as absurd, ridiculous nonsense and never concedes."
)


def lines(path):  # type: ignore[no-untyped-def]
    return [json.loads(line) for line in path.read_text().splitlines()]


def switched_share(text: str) -> float:
    words = text.split()
    return sum(w in SWITCHED for w in words) / len(words)


def test_a_planted_persona_replaces_the_agents_from_its_round_and_switches_the_text(run):
    plain = run("rounds=4", "seed=3").run_dir
    planted = run(
        "rounds=4", "seed=3", f"personas.cons.text='{HOSTILE}'", "personas.cons.from_round=3"
    ).run_dir
    personas = lines(planted / "cons" / "persona.jsonl")
    assert [(p["round"], p["decision"]) for p in personas] == [
        (1, "keep"),
        (2, "keep"),
        (3, "planted"),
        (4, "planted"),
    ]
    assert [p["version"] for p in personas[2:]] == [2, 2]  # a new text bumps the version once
    assert {p["persona"] for p in personas[2:]} == {HOSTILE}
    asked = {(p["round"], p["role"]) for p in lines(planted / "cons" / "prompts.jsonl")}
    assert (2, "persona") in asked and (3, "persona") not in asked and (4, "persona") not in asked
    # before its round, and on the other seat, the run is the plain one; from it, the seat's register switches
    before, after = (lines(d / "shared_memory.jsonl") for d in (plain, planted))
    for old, new in zip(before, after, strict=True):
        same = new["round"] < 3 or new["team"] == "pros"
        assert (old["text"] == new["text"]) is same, (new["round"], new["team"])
        share = switched_share(new["text"])
        assert share > 0.5 if not same else share == 0


def test_the_persona_file_is_read_into_the_config(settings, tmp_path):
    path = tmp_path / "persona.txt"
    path.write_text(HOSTILE + "\n")
    cfg = settings(f"personas.pros.file={path}")
    assert (cfg.personas["pros"].text, cfg.personas["pros"].file) == (HOSTILE, None)
    assert not cfg.personas["cons"].planted


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["+personas.judge.text=x"], "personas.judge: no such seat in format 'drift'; its seats: pros, cons"),
        (["personas.cons.file=/no/such.txt"], "personas.cons.file: cannot read /no/such.txt"),
        (["personas.cons.text=''"], "personas.cons.text: is empty"),
        (["personas.cons.text=x", "personas.cons.from_round=0"], "personas.cons.from_round: must be >= 1"),
        (["personas.cons.text=x", "experiment=control_no_persona"], "personas: only format=drift"),
    ],
)
def test_bad_planted_persona_keys_fail_in_one_line(settings, overrides, message):
    with pytest.raises(ConfigError) as err:
        settings(*overrides)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)

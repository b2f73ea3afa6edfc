"""Every probe checker on hand-made replies: one that follows the
instruction and one that does not, plus the parameter checks that keep a bad
probe out of a run."""

from __future__ import annotations

import pytest
import yaml
from conftest import CONF_DIR

from harness.probes.checkers import CHECKERS, Asker, param_problem, run_checker

PROS = Asker(team="pros", alias="PROS")

# checker, params, a reply that passes, a reply that fails
CASES = [
    ("max_words", {"n": 5}, "We hold our ground firmly.", "We hold our ground firmly and well."),
    ("min_words", {"n": 4}, "Remote work saves hours.", "Remote work wins."),
    ("max_sentences", {"n": 2}, "It helps. It saves time", "It helps. It saves time. It is fair."),
    ("ends_with_question", {}, 'We agree, but do you?"', "We agree? Surely not."),
    ("starts_with", {"word": "Indeed"}, "Indeed, the data agrees.", "The data agrees, indeed."),
    ("uses_word", {"word": "evidence"}, "The Evidence is clear.", "The evidentiary record is clear."),
    ("avoids_word", {"word": "I"}, "We think It works; it is so.", "We think I'm right."),
    ("avoids_text", {"text": "!"}, "We win.", "We win!"),
    ("mentions_team", {}, "The pros side stands firm.", "Our side stands firm, prose aside."),
    ("no_digits", {}, "About twenty million people.", "About 20 million people."),
    ("all_lowercase", {}, "we stand firm, always.", "We stand firm."),
]


def test_every_checker_has_a_case():
    assert {c[0] for c in CASES} == set(CHECKERS)
    assert len(CHECKERS) >= 10


@pytest.mark.parametrize(("name", "params", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_checker_passes_and_fails(name, params, good, bad):
    assert param_problem(name, params) is None
    assert run_checker(name, params, good, PROS) is True
    assert run_checker(name, params, bad, PROS) is False


def test_edge_cases():
    assert not run_checker("all_lowercase", {}, "123 !", PROS)  # no letters: nothing written in lowercase
    assert run_checker("mentions_team", {}, "Team PROS rests.", PROS)
    assert not run_checker("avoids_word", {"word": "I"}, "i think so", PROS)  # any case
    assert run_checker("max_sentences", {"n": 1}, "Dr. Smith", PROS) is False  # '.' before a space ends one
    assert run_checker("ends_with_question", {}, "Really?)", PROS)
    assert not run_checker("starts_with", {"word": "Indeed"}, "", PROS)


@pytest.mark.parametrize(
    ("name", "params", "key", "says"),
    [
        ("no_such", {}, "checker", "unknown checker 'no_such'"),
        ("max_words", {}, "params", "needs ['n']"),
        ("max_words", {"n": 5, "m": 1}, "params", "not ['m']"),
        ("max_words", {"n": "5"}, "params", "n must be int"),
        ("max_words", {"n": True}, "params", "n must be int"),
        ("max_words", {"n": 0}, "params", "n must be >= 1"),
        ("uses_word", {"word": " "}, "params", "word must be non-empty"),
        ("no_digits", {"n": 1}, "params", "takes no parameters"),
    ],
)
def test_bad_params_are_named(name, params, key, says):
    problem = param_problem(name, params)
    assert problem is not None and problem[0] == key and says in problem[1]


def test_the_shipped_set_names_known_checkers_with_valid_params():
    catalog = yaml.safe_load((CONF_DIR / "probes" / "default.yaml").read_text())["catalog"]
    assert len(catalog) >= 10
    for name, spec in catalog.items():
        assert param_problem(spec["checker"], spec.get("params", {})) is None, name
        assert spec["instruction"].format(**spec.get("params", {}))

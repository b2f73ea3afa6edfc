"""The control conditions (issue 11): each preset composes, runs, passes
``verify``, and takes away exactly what it names — the opponent, the
critic's pressure, or the contest."""

from __future__ import annotations

import pytest

from harness.agents.critique import APPROVED_UNREAD
from harness.formats.checks import verify
from harness.schema import ConfigError


def texts(records, path):
    return [r.text for r in records(path)]


def test_monologue_has_one_team_and_the_same_critic(run, records):
    debate = run("rounds=3", "seed=4", "model.reject_first=1")
    alone = run("rounds=3", "seed=4", "model.reject_first=1", "experiment=control_monologue")
    shared = records(alone.run_dir / "shared_memory.jsonl")
    assert {a.team for a in shared} == {"pros"} and len(shared) == 3
    assert not (alone.run_dir / "cons").exists()
    assert alone.manifest.counts.rejections == 3  # the critic still rejects once per turn
    # with no opponent the pros team's prompts quote no cons argument
    prompts = (alone.run_dir / "pros" / "prompts.jsonl").read_text()
    assert "cons]" not in prompts and "cons]" in (debate.run_dir / "pros" / "prompts.jsonl").read_text()
    assert verify(alone.run_dir)[0] == []


def test_no_critic_approves_every_draft_unread_with_no_call(run, records):
    debate = run("rounds=2", "seed=4", "model.reject_first=1")
    control = run("rounds=2", "seed=4", "model.reject_first=1", "experiment=control_no_critic")
    critiques = [c for team in ("pros", "cons") for c in records(control.run_dir / team / "critique.jsonl")]
    assert len(critiques) == 4 and all(c.is_approved and c.feedback == APPROVED_UNREAD for c in critiques)
    assert all(c.model is None and c.usage.calls == 0 for c in critiques)
    counts, base = control.manifest.counts, debate.manifest.counts
    assert counts.rejections == 0 and base.rejections == 4
    # persona + thinking per turn, no critic call: 4 turns x 2 calls
    assert counts.model_calls == 8
    assert verify(control.run_dir)[0] == []


def test_cooperative_keeps_the_sides_and_asks_for_agreement(run, records):
    control = run("rounds=2", "seed=4", "experiment=control_cooperative")
    seats = {s.name: s.stance for s in control.manifest.layout.seats}
    assert seats["pros"].startswith("FOR the motion") and seats["cons"].startswith("AGAINST the motion")
    assert all("agreement" in stance for stance in seats.values())
    for team in ("pros", "cons"):
        prompts = (control.run_dir / team / "prompts.jsonl").read_text()
        assert "toward an agreement" in prompts
    assert len(records(control.run_dir / "shared_memory.jsonl")) == 4
    assert verify(control.run_dir)[0] == []


@pytest.mark.parametrize(
    ("overrides", "key"),
    [(["control=rivalry"], "control:"), (["control=no_critic"], "control:")],
)
def test_a_bad_control_is_one_line_naming_the_key(settings, overrides, key):
    with pytest.raises(ConfigError) as error:
        settings(*overrides)
    assert str(error.value).startswith(key) and "\n" not in str(error.value)


@pytest.mark.parametrize("control", ["monologue", "no_critic", "cooperative", "no_persona"])
@pytest.mark.parametrize("fmt", ["panel", "moderated", "judge_refine", "grounded"])
def test_a_control_on_a_format_without_what_it_takes_away_is_refused(settings, fmt, control):
    # no_critic ran unchanged on them and was paired as a control; the others failed on an option by accident
    with pytest.raises(ConfigError) as error:
        settings(f"format={fmt}", f"experiment=control_{control}")
    assert str(error.value).startswith(f"control={control}: format={fmt} has no ")
    assert "\n" not in str(error.value)


def test_a_monologue_of_the_cons_team_starts_with_cons(run, records):
    result = run("rounds=2", "experiment=control_monologue", "format.teams=[cons]")
    assert [a.team for a in records(result.run_dir / "shared_memory.jsonl")] == ["cons", "cons"]

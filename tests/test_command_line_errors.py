"""A key the config has no place for, as each command meets it, in process:
one line naming the key and what is there, never Hydra's advice to add a
``+`` that the schema then refuses in turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.errors import one_line
from harness.plan import main as plan_main

# what Hydra's command line prints for ``key=1`` where the composed config has no ``key``
HYDRA_REFUSAL = (
    "Could not override '{key}'.\nTo append to your config use +{key}={value}\n"
    "Key '{last}' is not in struct\n    full_key: {key}\n    object_type=dict\n"
)


def refusal(key: str, value: str = "1") -> str:
    return HYDRA_REFUSAL.format(key=key, value=value, last=key.split(".")[1])


DRIFT_ROLES = "no such role in format 'drift'; its roles: pros, cons, critic, topic"


@pytest.mark.parametrize(
    ("argv", "key", "says"),
    [
        ([], "roles.nope.spec", f"roles.nope: {DRIFT_ROLES}"),
        (["format=judge_refine"], "roles.pros.spec", "roles.pros: no such role in format 'judge_refine'"),
        (
            [],
            "roles.critic.bogus",
            "roles.critic.bogus: no such key; roles.critic holds: spec, temperature, max_tokens,",
        ),
        ([], "personas.nope.text", "personas.nope: no such seat in format 'drift'; its seats: pros, cons"),
        (
            [],
            "personas.pros.nope",
            "personas.pros.nope: no such key; personas.pros holds: text, file, from_round",
        ),
        (["format=panel"], "personas.pros.text", "personas: only format=drift"),
    ],
)
def test_a_role_or_seat_the_format_lacks_is_one_line_naming_what_it_has(
    argv: list[str], key: str, says: str
) -> None:
    line = one_line(refusal(key, "a:b" if key.endswith(".spec") else "1"), argv)
    assert line.startswith(says) and "+" not in line, line


def test_a_forks_role_is_its_parents_formats(tmp_path: Path) -> None:
    """A fork keeps its parent's format, so its roles are the parent's, not the default format's."""
    (tmp_path / "config.yaml").write_text("format: {name: panel}\n")
    argv = [f"fork.parent={tmp_path}", "fork.at_round=1"]
    line = one_line(refusal("roles.nope.spec", "a:b"), argv)
    assert line.startswith("roles.nope: no such role in format 'panel'; its roles: analyst_a,"), line
    # a role the parent has, typed without the '+' a fork needs for it: Hydra's advice stands
    line = one_line(refusal("roles.judge.temperature"), argv)
    assert "+roles.judge.temperature=1" in line, line


def test_a_mapping_of_any_keys_keeps_hydras_advice() -> None:
    line = one_line(refusal("roles.critic.kwargs.base_url"), [])
    assert "+roles.critic.kwargs.base_url=1" in line, line


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("rounds2=3", "rounds2: no such key in the config"),
        ("roles.nope.spec=a:b", f"roles.nope: {DRIFT_ROLES}"),
        ("critic.nope=1", "critic.nope: no such key; critic holds: name,"),
        ("format.nope=1", "format.nope: not an option of format=drift; its options: name,"),
    ],
)
def test_the_plan_says_a_key_with_no_place_as_the_run_does(
    override: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        plan_main(["model=scripted", override])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {says}") and err.count("\n") == 1 and "+" not in err, err


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("roles.critic.temperature=5", "roles.critic.temperature: must be in [0, 2], got 5.0"),
        ("roles.critic.max_tokens=8", "roles.critic.max_tokens: must be >= 16, got 8"),
        ("roles.critic.spec=nocolon", "roles.critic.spec: expected 'provider:name', got 'nocolon'"),
        ("critic.max_iterations=-2", "critic.max_iterations: must be >= 1, got -2"),
        ("memory.window_rounds=-1", "memory.window_rounds: must be >= 0, got -1"),
        ("memory.max_chars_per_item=10", "memory.max_chars_per_item: must be >= 50, got 10"),
        ("structured.max_repairs=-1", "structured.max_repairs: must be >= 0, got -1"),
        ("retry.max_attempts=0", "retry.max_attempts: must be >= 1, got 0"),
        ("retry.max_s=-1", "retry.max_s: must be >= 0, got -1.0"),
        ("model.reject_first=-1", "model.reject_first: must be >= 0, got -1"),
    ],
)
def test_a_value_out_of_range_is_said_with_the_value_given(settings, override: str, says: str) -> None:  # type: ignore[no-untyped-def]
    from harness.schema import ConfigError

    with pytest.raises(ConfigError) as caught:
        settings(override)
    assert str(caught.value) == says


SMOKE_LINE = (
    "sweep=smoke: a sweep's grid over model, llm.temperature, critic, rounds; "
    "without -m one run is made and the grid is ignored; add -m"
)


def test_a_sweep_preset_without_m_is_one_line_not_one_run_of_the_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``harness.run sweep=smoke`` ran the default experiment (SmolLM2, 3 rounds), none
    of the preset's 4 scripted cells; ``harness.plan sweep=smoke`` planned that one run."""
    import sys

    from harness.run import cli as run_cli

    argv = ["model=scripted", "progress=false", "sweep=smoke", f"runs_root={tmp_path / 'runs'}"]
    monkeypatch.setattr(sys, "argv", ["harness.run", *argv])
    with pytest.raises(SystemExit) as done:
        run_cli()
    assert (done.value.code, capsys.readouterr().err) == (2, f"error: {SMOKE_LINE}\n")
    assert not (tmp_path / "runs").exists()
    with pytest.raises(SystemExit) as done:
        plan_main(argv)
    assert (done.value.code, capsys.readouterr().err) == (2, f"error: {SMOKE_LINE}\n")


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["interviews.rounds=1"], "interviews.rounds: must be a list, got 1: 'interviews.rounds=[1]'"),
        (
            ["probes.enabled=true", "probes.use=short_answer"],
            "probes.use: must be a list, got 'short_answer': 'probes.use=[short_answer]'",
        ),
        (["format.teams=pros"], "format.teams: must be a list, got 'pros': 'format.teams=[pros]'"),
    ],
)
def test_a_value_where_a_list_goes_says_the_list_to_type(settings, overrides: list[str], says: str) -> None:  # type: ignore[no-untyped-def]
    """``interviews.rounds=1`` was OmegaConf's 'Invalid value assigned: AnyNode is not a ListConfig'."""
    from harness.schema import ConfigError

    with pytest.raises(ConfigError) as caught:
        settings(*overrides)
    assert str(caught.value).startswith(says), str(caught.value)

"""A run starts from one resolved config: the format is looked up once (by
validation) and each role's model settings are computed once, then passed
down; ``recording`` writes how a run ended."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.formats
from harness.config import resolve
from harness.engine import resume_run, run_debate
from harness.engine.execute import recording
from harness.runtime.context import ModelCallError
from harness.runtime.interrupt import SecondSignal
from harness.schema import Config
from harness.store.records import ErrorInfo, RunCounts
from harness.store.rundir import read_manifest


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts ``get_format`` lookups (wherever a module holds it) and ``Config.role_model`` calls."""
    counts: Counter[str] = Counter()
    original, role_model = harness.formats.get_format, Config.role_model

    def get_format(name: str) -> harness.formats.Format:
        counts["get_format"] += 1
        return original(name)

    def counted_role_model(self: Config, role: str) -> tuple:
        counts["role_model"] += 1
        return role_model(self, role)

    for module in list(sys.modules.values()):
        if getattr(module, "get_format", None) is original:
            monkeypatch.setattr(module, "get_format", get_format)
    monkeypatch.setattr(Config, "role_model", counted_role_model)
    yield counts


def test_a_run_looks_its_format_up_once_and_its_role_models_once(make_cfg, lookups) -> None:
    from omegaconf import OmegaConf

    cfg = make_cfg("rounds=2")
    raw = OmegaConf.to_container(cfg, resolve=True)
    run = resolve(cfg)
    assert lookups["get_format"] == 1
    assert set(run.models) == set(run.fmt.model_roles(run.cfg))
    lookups.clear()
    result = run_debate(run, raw)  # type: ignore[arg-type]
    assert result.manifest.status == "completed"
    # the engine reads the resolved format and role models; it looks nothing up again
    assert lookups == Counter()


def test_a_resume_looks_its_format_up_once(run, lookups) -> None:
    made = run("rounds=2")
    lookups.clear()
    resumed = resume_run(made.run_dir, overrides=["rounds=3"])
    assert resumed.manifest.status == "completed" and resumed.manifest.counts.rounds_completed == 3
    assert lookups["get_format"] == 1  # by validation, in load_config


def test_no_engine_module_names_get_format() -> None:
    engine = Path(harness.formats.__file__).parents[1] / "engine"
    assert [p.name for p in engine.glob("*.py") if "get_format" in p.read_text()] == []


@pytest.mark.parametrize(
    ("raised", "status", "entry", "error_type"),
    [
        (SecondSignal(), "interrupted", ("interrupt", "second signal"), "KeyboardInterrupt"),
        (
            KeyboardInterrupt(),  # one Ctrl-C that came before the run's stop handler was set
            "interrupted",
            ("interrupt", "Ctrl-C before the stop handler was set"),
            "KeyboardInterrupt",
        ),
        (RuntimeError("boom"), "failed", ("fail", "RuntimeError: boom"), "RuntimeError"),
        (
            ModelCallError("gave up", ErrorInfo(kind="fatal", type="Timeout", message="gave up")),
            "failed",
            ("fail", "gave up"),
            "Timeout",
        ),
    ],
)
def test_recording_writes_how_a_run_ended_and_raises_on(run, raised, status, entry, error_type) -> None:
    made = run("rounds=1")
    manifest, state = made.manifest, {"round": 2, "done": False}
    before = len(manifest.history)

    class Snapshots:
        def totals(self) -> RunCounts:
            return RunCounts(model_calls=7)

        def sync(self) -> None:
            pass

    with pytest.raises(type(raised)), recording(made.run_dir, manifest, state, Snapshots(), 1):  # type: ignore[arg-type]
        assert read_manifest(made.run_dir).status == "running"
        raise raised
    kept = read_manifest(made.run_dir)
    assert kept.status == status and kept.error is not None and kept.error.type == error_type
    assert [(h.action, h.detail) for h in kept.history[before:]] == [entry]
    assert kept.counts.model_calls == 7 and kept.counts.rounds_completed == 1 and kept.ended_at is not None
    if isinstance(raised, ModelCallError):
        assert raised.run_dir == made.run_dir  # so the command can say how to resume it


# Configs of every format and model preset, role overrides and probes: the section-by-section
# check must make exactly the Config the whole merge makes.
SECTION_CASES = [
    ["format=panel"],
    ["format=moderated", "model.factcheck_fail_rate=0.3"],
    ["format=judge_refine"],
    ["format=grounded"],
    ["experiment=control_monologue"],
    [
        "probes.enabled=true",
        "roles.critic.temperature=0.2",
        "llm.temperature=1.0",
        "replicates=4",
        "replicate=3",
    ],
    ["model=openai"],
    ["model=anthropic"],
]


@pytest.mark.parametrize("overrides", SECTION_CASES, ids=lambda o: o[0])
def test_the_section_check_makes_the_config_the_whole_merge_makes(make_cfg, overrides) -> None:
    from harness.formats.sections import _whole, structured_config

    cfg = make_cfg(*overrides)
    fresh = structured_config(cfg)
    assert fresh == _whole(cfg) and repr(fresh) == repr(_whole(cfg))
    fresh.topic.text = "changed in place"  # each config gets its own copy of a kept section
    assert structured_config(cfg) == _whole(cfg)


@pytest.mark.parametrize(
    ("override", "error"),
    [
        ("llm.temperature=hot", "llm.temperature: Value 'hot' of type 'str' could not be converted to Float"),
        ("+llm.nope=1", "llm.nope: no such key; llm holds: temperature, max_tokens"),
        ("+nope=1", "nope: no such key in the config"),
        ("+nope={a:1}", "nope: no such key in the config"),  # a mapping no section takes
        # a key of no role's (harness.resume's overrides merge as '+' does)
        ("+roles.critic.nope=1", "roles.critic.nope: no such key; roles.critic holds: spec, temperature, .*"),
        ("rounds=x", "rounds: Value 'x' of type 'str' could not be converted to Integer"),
    ],
)
def test_a_config_the_schema_refuses_fails_in_the_whole_merges_words(make_cfg, override, error) -> None:
    from harness.formats.sections import structured_config
    from harness.schema import ConfigError

    with pytest.raises(ConfigError, match=f"^{error}$"):
        structured_config(make_cfg(override))


def test_a_formats_options_are_checked_once_and_each_config_gets_its_own_copy(make_cfg) -> None:
    from harness.formats import validated
    from harness.schema import _structured

    cfg = make_cfg("format=moderated")
    first, fmt = validated(cfg)
    second, _ = validated(cfg)
    assert first.format == second.format == _structured(fmt.options, dict(cfg.format), "format.")
    assert first.format is not second.format  # a later check may set a field of its own copy


# Every kind of value a top-level field may be given, and those the merge refuses or changes.
TOP_SAMPLES = [0, 7, -3, 2**40, True, False, None, 0.5, [1], {"a": 1}]
TOP_SAMPLES += ["", "x", "run-3_b", "3", "true", "null", "???", "${seed}"]


def test_a_top_level_value_taken_as_it_is_is_what_its_merge_makes() -> None:
    from omegaconf import OmegaConf

    from harness.formats.sections import _as_merged, _field_node, _hints, _top_fields

    taken = set()
    for name in _top_fields():
        for value in TOP_SAMPLES:
            if _as_merged(name, value):
                merged = getattr(OmegaConf.to_object(OmegaConf.merge(_field_node(name), {name: value})), name)
                assert merged == value and type(merged) is type(value), (name, value)
                taken.add(str(_hints()[name]))
    # each scalar field type of Config's top level takes some value as it is; no other type any
    assert taken == {"<class 'int'>", "<class 'str'>", "<class 'bool'>", "str | None"}

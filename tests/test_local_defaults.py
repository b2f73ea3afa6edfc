"""Fast local decoding by default (issue 27 item 6): a fresh local run decodes
with lazy grammar and the prefix cache; a run made before the change resumes
with the modes it was made with, read from its config.yaml or its fingerprint,
without a fingerprint mismatch. The local model is a scripted stand-in: what is
checked is the model config each run builds its models from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import ModelConfig
from harness.engine.resuming import ResumeError, resume_run
from harness.models.base import ChatModel
from harness.models.scripted import ScriptedModel
from harness.store.fingerprint import read_fingerprint, write_fingerprint

OLD = ("full", False)  # the modes every run used before the change
NEW = ("lazy", True)
MODES = ("grammar_mode", "prefix_cache")


class StandIn:
    """A model factory that answers like the scripted model and notes the modes it was asked for."""

    def __init__(self) -> None:
        self.modes: set[tuple[str, bool]] = set()

    def __call__(self, cfg: ModelConfig) -> ChatModel:
        self.modes.add((cfg.grammar_mode, cfg.prefix_cache))
        return ScriptedModel(cfg.spec)


def rewrite(
    run_dir: Path, config: Callable[[dict[str, Any]], None], recorded: Callable[[dict[str, Any]], None]
) -> None:
    """Edit the run's config.yaml model section and its fingerprint's, as an older harness wrote them."""
    path = run_dir / "config.yaml"
    raw = yaml.safe_load(path.read_text())
    config(raw["model"])
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    parts = read_fingerprint(run_dir)
    recorded(parts["config"]["model"])
    write_fingerprint(run_dir, parts)


def drop_modes(section: dict[str, Any]) -> None:
    for key in MODES:
        section.pop(key, None)


def old_modes(section: dict[str, Any]) -> None:
    section.update(zip(MODES, OLD, strict=True))


def keep(section: dict[str, Any]) -> None:
    pass


def test_a_fresh_local_run_decodes_lazily_with_the_prefix_cache(settings) -> None:
    for group in ("smollm2", "gemma3_270m"):
        model = settings(f"model={group}").model
        assert (model.grammar_mode, model.prefix_cache) == NEW, group
    # a local seat on another model group gets the schema's defaults: the same
    critic, _, _ = settings("roles.critic.spec=local:smollm2").role_model("critic")
    assert (critic.grammar_mode, critic.prefix_cache) == NEW


# How an older harness left a run folder, with the overrides that made it:
OLDER_RUNS = {
    # keys existed, conf/model/smollm2.yaml said full/false: config.yaml has them
    "local, keys written": (
        ["model=smollm2", "model.grammar_mode=full", "model.prefix_cache=false"],
        keep,
        keep,
    ),
    # before the keys existed: neither config.yaml nor the fingerprint names them
    "local, before the keys": (["model=smollm2"], drop_modes, drop_modes),
    # a scripted run: config.yaml never had them, the fingerprint kept the schema's full/false
    "scripted": (["model=scripted"], keep, old_modes),
}


@pytest.mark.parametrize("overrides, config, recorded", OLDER_RUNS.values(), ids=OLDER_RUNS.keys())
def test_an_older_run_resumes_with_the_modes_it_was_made_with(run, overrides, config, recorded) -> None:
    made = run(*overrides, "rounds=1", build=StandIn())
    rewrite(made.run_dir, config, recorded)
    resumed_with = StandIn()
    result = resume_run(made.run_dir, overrides=["rounds=2"], build=resumed_with)
    assert resumed_with.modes == {OLD}
    assert result.manifest.status == "completed" and result.manifest.counts.rounds_completed == 2
    actions = [entry.action for entry in result.manifest.history]
    assert "resume" in actions and "resume_forced" not in actions  # no fingerprint change


def test_a_new_local_run_resumes_lazily_and_a_changed_mode_still_needs_force(run) -> None:
    built = StandIn()
    made = run("model=smollm2", "rounds=1", build=built)
    assert built.modes == {NEW}
    resumed_with = StandIn()
    resume_run(made.run_dir, overrides=["rounds=2"], build=resumed_with)
    assert resumed_with.modes == {NEW}

    older = run("model=smollm2", "rounds=1", build=StandIn())
    rewrite(older.run_dir, drop_modes, drop_modes)
    with pytest.raises(ResumeError, match=r"model\.grammar_mode: 'full' -> 'lazy'"):
        resume_run(older.run_dir, overrides=["rounds=2", "model.grammar_mode=lazy"], build=StandIn())

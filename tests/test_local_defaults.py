"""Fast local decoding by default (issue 27 item 6): a fresh local run decodes
with lazy grammar and the prefix cache, resumes with them, and a resume that
asks for another mode is a fingerprint change. The local model is a scripted
stand-in: what is checked is the model config each run builds its models from."""

from __future__ import annotations

import pytest

from harness.engine.resuming import ResumeError, resume_run
from harness.models.base import ChatModel
from harness.models.scripted import ScriptedModel
from harness.schema import ModelConfig

NEW = ("lazy", True)


class StandIn:
    """A model factory that answers like the scripted model and notes the modes it was asked for."""

    def __init__(self) -> None:
        self.modes: set[tuple[str, bool]] = set()

    def __call__(self, cfg: ModelConfig) -> ChatModel:
        self.modes.add((cfg.grammar_mode, cfg.prefix_cache))
        return ScriptedModel(cfg.spec)


def test_a_fresh_local_run_decodes_lazily_with_the_prefix_cache(settings) -> None:
    for group in ("smollm2", "gemma3_270m"):
        model = settings(f"model={group}").model
        assert (model.grammar_mode, model.prefix_cache) == NEW, group
    # a local seat on another model group gets the schema's defaults: the same
    critic, _, _ = settings("roles.critic.spec=local:smollm2").role_model("critic")
    assert (critic.grammar_mode, critic.prefix_cache) == NEW


def test_a_new_local_run_resumes_lazily_and_a_changed_mode_still_needs_force(run) -> None:
    built = StandIn()
    made = run("model=smollm2", "rounds=1", build=built)
    assert built.modes == {NEW}
    resumed_with = StandIn()
    resume_run(made.run_dir, overrides=["rounds=2"], build=resumed_with)
    assert resumed_with.modes == {NEW}
    with pytest.raises(ResumeError, match=r"model\.grammar_mode: 'lazy' -> 'full'"):
        resume_run(made.run_dir, overrides=["rounds=3", "model.grammar_mode=full"], build=StandIn())

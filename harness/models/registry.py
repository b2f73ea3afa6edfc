"""The one registry: a ``provider:name`` spec in, a ``ChatModel`` out.

``check_model`` runs before any folder is made or weight loaded and fails
with one line; ``build_model`` imports backends lazily.
"""

from __future__ import annotations

from harness.models.base import ChatModel, ModelConfigError
from harness.schema import ModelConfig


def check_model(cfg: ModelConfig, key: str = "model.spec", knobs: str | None = None) -> None:
    """Validate a spec without loading anything heavy; ``knobs`` is where the
    reasoning knobs were set (``roles.critic``), if not beside the spec."""
    provider, _, name = cfg.spec.partition(":")
    if provider in ("scripted", "human"):
        return
    if provider == "local":
        from harness.models.local import LOCAL_MODELS

        if name not in LOCAL_MODELS and not name.endswith(".gguf"):
            raise ModelConfigError(
                f"{key}: unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}"
            )
        return
    from harness.models.remote import check_reasoning, check_remote

    check_remote(cfg.spec, cfg.kwargs, key)
    check_reasoning(provider, cfg.reasoning_effort, cfg.thinking_budget, knobs or key.rsplit(".", 1)[0])


def build_model(cfg: ModelConfig) -> ChatModel:
    provider = cfg.spec.split(":", 1)[0]
    if provider == "scripted":
        from harness.models.scripted import ScriptedModel
        from harness.models.scripted_rules import SETTINGS

        return ScriptedModel(
            cfg.spec,
            latency_s=cfg.latency_s,
            reject_first=cfg.reject_first,
            malformed_rate=cfg.malformed_rate,
            error_rate=cfg.error_rate,
            seed=cfg.seed,
            persona_switch_round=cfg.persona_switch_round,
            persona_drift_rate=cfg.persona_drift_rate,
            # the field script's settings: model.synthesize_rate, model.judge_winner, ...
            **{key: getattr(cfg, key) for key in SETTINGS},
        )
    if provider == "human":  # a person at the terminal (chat mode)
        from harness.models.human import HumanModel

        return HumanModel(cfg.spec)
    if provider == "local":
        from harness.models.local import LlamaCppModel

        return LlamaCppModel(
            cfg.spec,
            n_ctx=cfg.n_ctx,
            n_threads=cfg.n_threads,
            n_gpu_layers=cfg.n_gpu_layers,
            grammar_mode=cfg.grammar_mode,
            prefix_cache=cfg.prefix_cache,
            prompt_style=cfg.prompt_style,
        )
    from harness.models.remote import LangChainModel

    return LangChainModel(
        cfg.spec,
        kwargs=cfg.kwargs,
        structured_mode=cfg.structured_mode,
        timeout_s=cfg.timeout_s,
        concurrency=cfg.concurrency,
        max_concurrency=cfg.max_concurrency,
        rpm=cfg.rpm,
        tpm=cfg.tpm,
        reasoning_effort=cfg.reasoning_effort,
        thinking_budget=cfg.thinking_budget,
    )


__all__ = ["ChatModel", "ModelConfigError", "build_model", "check_model"]

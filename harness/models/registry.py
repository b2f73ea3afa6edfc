"""The one registry: a ``provider:name`` spec in, a ``ChatModel`` out.

Each backend's factory registers itself with ``@provider``: it imports its
backend lazily and takes its own arguments from the ``ModelConfig``, so a
new backend is one decorated function. A provider no factory names is one of
LangChain's (``REMOTE``). ``check_model`` runs a provider's check before any
folder is made or weight loaded, and fails with one line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.models.base import ChatModel, ModelConfigError
from harness.schema import ModelConfig

Factory = Callable[[ModelConfig], ChatModel]
# (config, the key its spec was set at, where its reasoning knobs were set if elsewhere)
Check = Callable[[ModelConfig, str, str | None], None]
REMOTE = "*"  # the factory of every provider no other one names


@dataclass(frozen=True)
class Provider:
    build: Factory
    check: Check


PROVIDERS: dict[str, Provider] = {}


def no_check(cfg: ModelConfig, key: str, knobs: str | None) -> None:
    """A backend with nothing to check before it is built."""


def provider(name: str, check: Check = no_check) -> Callable[[Factory], Factory]:
    """Register the decorated factory for specs ``name:...``, with ``check``."""

    def register(factory: Factory) -> Factory:
        PROVIDERS[name] = Provider(factory, check)
        return factory

    return register


def fields(cfg: ModelConfig, *names: str) -> dict[str, Any]:
    """The ``ModelConfig`` fields a backend takes, under the same names."""
    return {name: getattr(cfg, name) for name in names}


@provider("scripted")
def scripted(cfg: ModelConfig) -> ChatModel:
    from harness.models.scripted import ScriptedModel
    from harness.models.scripted_rules import SETTINGS

    knobs = ("latency_s", "reject_first", "malformed_rate", "error_rate", "seed")
    drift = ("persona_switch_round", "persona_drift_rate")
    # SETTINGS: the field script's (model.synthesize_rate, model.judge_winner, ...)
    return ScriptedModel(cfg.spec, **fields(cfg, *knobs, *drift, *SETTINGS))


@provider("human")
def human(cfg: ModelConfig) -> ChatModel:
    """A person at the terminal (chat mode)."""
    from harness.models.human import HumanModel

    return HumanModel(cfg.spec)


def check_local(cfg: ModelConfig, key: str, knobs: str | None) -> None:
    from harness.models.local import LOCAL_MODELS

    name = cfg.spec.partition(":")[2]
    if name not in LOCAL_MODELS and not name.endswith(".gguf"):
        raise ModelConfigError(
            f"{key}: unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}"
        )


@provider("local", check=check_local)
def local(cfg: ModelConfig) -> ChatModel:
    from harness.models.local import LlamaCppModel

    knobs = (
        "n_ctx",
        "n_threads",
        "n_gpu_layers",
        "grammar_mode",
        "prefix_cache",
        "prompt_style",
        "repeat_penalty",
    )
    return LlamaCppModel(cfg.spec, **fields(cfg, *knobs))


def check_langchain(cfg: ModelConfig, key: str, knobs: str | None) -> None:
    """The provider is LangChain's, its package installed (else the one line says which
    to install), its API key set, and its reasoning knob one it takes."""
    from harness.models.remote import check_reasoning, check_remote

    check_remote(cfg.spec, cfg.kwargs, key)
    reasoning = (cfg.reasoning_effort, cfg.thinking_budget)
    check_reasoning(cfg.spec.partition(":")[0], *reasoning, knobs or key.rsplit(".", 1)[0])


@provider(REMOTE, check=check_langchain)
def langchain(cfg: ModelConfig) -> ChatModel:
    from harness.models.remote import LangChainModel

    client = ("kwargs", "structured_mode", "timeout_s", "reasoning_effort", "thinking_budget")
    limits = ("concurrency", "max_concurrency", "rpm", "tpm")
    return LangChainModel(cfg.spec, **fields(cfg, *client, *limits))


def lookup(spec: str) -> Provider:
    """The provider of ``spec`` (``provider:name``): its own factory, else LangChain's."""
    return PROVIDERS.get(spec.partition(":")[0]) or PROVIDERS[REMOTE]


def check_model(cfg: ModelConfig, key: str = "model.spec", knobs: str | None = None) -> None:
    """Validate a spec without loading anything heavy; ``knobs`` is where the
    reasoning knobs were set (``roles.critic``), if not beside the spec."""
    lookup(cfg.spec).check(cfg, key, knobs)


def build_model(cfg: ModelConfig) -> ChatModel:
    return lookup(cfg.spec).build(cfg)


__all__ = ["PROVIDERS", "ChatModel", "ModelConfigError", "build_model", "check_model", "provider"]

"""Models: one contract (``ChatModel``), one registry (``build_model``)."""

from harness.models.base import (
    ChatModel,
    Completion,
    ModelConfigError,
    ModelRequest,
    ProviderError,
)
from harness.models.registry import build_model, check_model

__all__ = [
    "ChatModel",
    "Completion",
    "ModelConfigError",
    "ModelRequest",
    "ProviderError",
    "build_model",
    "check_model",
]

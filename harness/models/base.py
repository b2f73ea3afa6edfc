"""The one model contract: a request in, a completion out.

Every backend (scripted, llama.cpp, any LangChain provider) implements
``ChatModel.complete``. Structured output, repair and retries live above this
layer (``harness.models.structured``, ``harness.models.retry``), so backends stay thin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Message = dict[str, str]  # {"role": "system"|"user"|"assistant", "content": str}
StructuredMode = Literal["json_schema", "json_object", "prompt"]


@dataclass(frozen=True)
class ModelRequest:
    """What one call asks for.

    ``schema`` is the JSON schema the reply must match (``None`` for free
    text). ``tags`` carry round/team/role/iteration; real models ignore them,
    the scripted model uses them to script rejections and faults.
    """

    messages: list[Message]
    schema: dict[str, Any] | None = None
    schema_name: str = "output"
    temperature: float = 0.7
    max_tokens: int = 256
    seed: int = 0
    tags: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Completion:
    """One reply. Reasoning tokens are counted inside ``output_tokens`` and
    cache reads/writes inside ``input_tokens``; ``cost_usd`` is set from the
    price table by the engine (None: unknown), ``billed_usd`` by a backend
    whose provider reported its own figure."""

    text: str
    input_tokens: int
    output_tokens: int
    latency_s: float
    reasoning_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0
    billed_usd: float | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model built from a ``provider:name`` spec by ``build_model``.

    A model whose calls never wait on anything outside this process's Python (no
    server, no sleep, no native code) says so with ``waits = False``: a sweep's cell
    then keeps its run slot through the call (``harness.slots``). Unset, it waits."""

    spec: str

    def complete(self, request: ModelRequest) -> Completion: ...

    def model_files(self) -> dict[str, str]:
        """Local weight files this model reads, as {path: sha256} (empty if remote)."""
        ...


def waits(model: ChatModel) -> bool:
    """Whether a call of ``model`` may wait (``ChatModel``'s ``waits``; True unless it says not)."""
    return bool(getattr(model, "waits", True))


class ProviderError(Exception):
    """An error from a model backend, with an HTTP-like status when known.

    ``harness.models.retry`` classifies these: 429 is a rate limit, 5xx and 408 are
    transient, anything else is fatal.
    """

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ModelConfigError(ValueError):
    """A spec or model setting that cannot work (unknown provider, missing key)."""

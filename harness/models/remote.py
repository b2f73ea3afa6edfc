"""Any provider LangChain's ``init_chat_model`` knows (``openai:gpt-4o``,
``anthropic:...``, ``ollama:...``), including OpenAI-compatible local servers
through ``model.kwargs.base_url``. SDKs are imported only when used.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
import time
from typing import Any

from harness.models.base import Completion, ModelConfigError, ModelRequest, StructuredMode
from harness.models.limiter import Limiter, estimate_tokens, key_for, limiter_for

# The environment variable each hosted provider reads its key from.
API_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "azure_openai": "AZURE_OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "google_genai": "GOOGLE_API_KEY",
    "mistralai": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "together": "TOGETHER_API_KEY",
    "fireworks": "FIREWORKS_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "xai": "XAI_API_KEY",
    "cohere": "COHERE_API_KEY",
    "perplexity": "PPLX_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}


# Providers whose LangChain class takes ``max_retries`` and ``timeout``. Their
# SDK clients retry by themselves (openai: twice), hiding faults from the one
# retry policy and its events; they are set to 0 retries here.
CLIENT_RETRY_PROVIDERS = frozenset(
    {
        "openai",
        "azure_openai",
        "anthropic",
        "mistralai",
        "groq",
        "google_genai",
        "fireworks",
        "together",
        "deepseek",
        "xai",
    }
)
# The drift-harness extra that installs each hosted provider's LangChain package.
PROVIDER_EXTRAS = {
    "openai": "openai",
    "azure_openai": "openai",
    "anthropic": "anthropic",
    "google_genai": "google",
}
# Reasoning knobs each provider's LangChain class takes (validated in check_remote).
EFFORT_PROVIDERS = frozenset({"openai", "azure_openai"})
THINKING_PROVIDERS = frozenset({"anthropic", "google_genai"})
# Providers that take a per-call ``seed`` (OpenAI's API and servers copying it).
SEED_PROVIDERS = frozenset({"openai", "azure_openai"})


def client_kwargs(provider: str, kwargs: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
    """What ``init_chat_model`` gets: the user's kwargs over no client retries and the timeout."""
    if provider not in CLIENT_RETRY_PROVIDERS:
        return dict(kwargs)
    defaults: dict[str, Any] = {"max_retries": 0}
    if timeout_s is not None:
        defaults["timeout"] = timeout_s
    return {**defaults, **kwargs}


def known_providers() -> dict[str, str]:
    """{provider: python module} from LangChain's own table."""
    try:
        from langchain.chat_models.base import _BUILTIN_PROVIDERS
    except ImportError:  # langchain moved it; fall back to the common ones
        return {"openai": "langchain_openai", "anthropic": "langchain_anthropic"}
    return {name: entry[0] for name, entry in _BUILTIN_PROVIDERS.items()}


def check_remote(spec: str, kwargs: dict[str, Any], key: str) -> None:
    """Fail early, in one line, on an unknown provider, missing SDK or missing key."""
    provider = spec.split(":", 1)[0]
    providers = known_providers()
    if provider not in providers:
        raise ModelConfigError(
            f"{key}: unknown provider {provider!r} in {spec!r}; "
            f"known: local, scripted, {', '.join(sorted(providers))}"
        )
    module = providers[provider].split(".")[0]
    if importlib.util.find_spec(module) is None:
        package = module.replace("_", "-")
        extra = PROVIDER_EXTRAS.get(provider)
        install = f"pip install 'drift-harness[{extra}]'" if extra else f"pip install {package}"
        raise ModelConfigError(f"{key}: {spec!r} needs the package {package} ({install})")
    env = API_KEY_ENV.get(provider)
    if env and not os.environ.get(env) and kwargs.get("api_key") is None:
        raise ModelConfigError(
            f"{key}: {spec!r} needs {env} in the environment (or {key.rsplit('.', 1)[0]}.kwargs.api_key)"
        )


def reasoning_kwargs(provider: str, effort: str | None, thinking_budget: int | None) -> dict[str, Any]:
    """A role's reasoning knob as its provider's LangChain class takes it."""
    if effort is not None:
        return {"reasoning_effort": effort}
    if thinking_budget is None:
        return {}
    if provider == "anthropic":  # extended thinking: the budget is part of max_tokens
        if thinking_budget == 0:
            return {"thinking": {"type": "disabled"}}
        return {"thinking": {"type": "enabled", "budget_tokens": thinking_budget}}
    return {"thinking_budget": thinking_budget}  # google_genai


def check_reasoning(provider: str, effort: str | None, thinking_budget: int | None, key: str) -> None:
    """A knob the provider has no use for is refused, not silently dropped."""
    if effort is not None and provider not in EFFORT_PROVIDERS:
        raise ModelConfigError(
            f"{key}.reasoning_effort: {provider} takes no reasoning_effort "
            f"(use {key}.thinking_budget for {', '.join(sorted(THINKING_PROVIDERS))})"
        )
    if thinking_budget is not None and provider not in THINKING_PROVIDERS:
        raise ModelConfigError(
            f"{key}.thinking_budget: {provider} takes no thinking budget "
            f"(use {key}.reasoning_effort for {', '.join(sorted(EFFORT_PROVIDERS))})"
        )
    if provider == "anthropic" and thinking_budget is not None and 0 != thinking_budget < 1024:
        raise ModelConfigError(
            f"{key}.thinking_budget: Anthropic takes 0 (off) or >= 1024, got {thinking_budget}"
        )


def pick_mode(provider: str, kwargs: dict[str, Any], mode: str) -> StructuredMode:
    """How to ask this provider for JSON.

    OpenAI proper takes a ``json_schema`` response format; OpenAI-compatible
    servers (``base_url`` set, e.g. llama-cpp-python's) often reject it but take
    ``json_object`` (with the schema beside it, which llama-cpp-python's server
    decodes under); other providers get the schema in the prompt and the
    reply is parsed and repaired by ``harness.models.structured``.
    """
    if mode != "auto":
        return mode  # type: ignore[return-value]
    if provider in ("openai", "azure_openai"):
        return "json_object" if kwargs.get("base_url") else "json_schema"
    if provider == "ollama":
        return "json_schema"
    return "prompt"


class LangChainModel:
    """Adapter from the harness contract to a LangChain chat model."""

    def __init__(
        self,
        spec: str,
        *,
        kwargs: dict[str, Any],
        structured_mode: str = "auto",
        timeout_s: float | None = None,
        concurrency: float = 8,
        max_concurrency: float = 64,
        rpm: int | None = None,
        tpm: int | None = None,
        reasoning_effort: str | None = None,
        thinking_budget: int | None = None,
    ):
        self.spec = spec
        self.provider, self.name = spec.split(":", 1)
        # null values in config mean "not set" (they exist so CLI overrides need no '+')
        self.kwargs = {k: v for k, v in kwargs.items() if v is not None}
        self.mode = pick_mode(self.provider, self.kwargs, structured_mode)
        self.client_kwargs = {
            **reasoning_kwargs(self.provider, reasoning_effort, thinking_budget),
            **client_kwargs(self.provider, self.kwargs, timeout_s),
        }
        self._chats: dict[tuple[float, int], Any] = {}
        # one limiter per endpoint, shared with every other model of the process
        api_key = _api_key(self.provider, self.kwargs)
        endpoint = key_for(self.provider, self.kwargs.get("base_url"), api_key, self.name)
        self.limiter: Limiter = limiter_for(
            endpoint, initial=concurrency, maximum=max_concurrency, rpm=rpm, tpm=tpm
        )

    def model_files(self) -> dict[str, str]:
        return {}

    def _chat(self, temperature: float, max_tokens: int) -> Any:
        key = (temperature, max_tokens)
        if key not in self._chats:
            self._chats[key] = shared_chat(
                self.provider, self.name, temperature, max_tokens, self.client_kwargs
            )
        return self._chats[key]

    def _format_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        if request.schema is None or self.mode == "prompt":
            return {}
        if self.provider == "ollama":
            return {"format": request.schema if self.mode == "json_schema" else "json"}
        if self.mode == "json_object":
            # the schema rides along: llama-cpp-python's server compiles it into a
            # grammar (without it a small model writes any JSON at all, seen on
            # SmolLM2: 13 of 13 moderated speeches failed); other servers ignore it
            return {"response_format": {"type": "json_object", "schema": request.schema}}
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.schema},
            }
        }

    def _compat_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        """ChatOpenAI sends ``max_tokens`` as ``max_completion_tokens``, which
        OpenAI-compatible servers (llama-cpp-python's among them) ignore, so
        they generate up to the context size; send ``max_tokens`` as well."""
        if self.provider not in ("openai", "azure_openai") or not self.kwargs.get("base_url"):
            return {}
        return {"extra_body": {"max_tokens": request.max_tokens, **(self.kwargs.get("extra_body") or {})}}

    def _seed_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        # the per-call seed, so a server that samples by seed replays a call exactly
        return {"seed": request.seed} if self.provider in SEED_PROVIDERS else {}

    def _call_kwargs(self, chat: Any, request: ModelRequest) -> tuple[dict[str, Any], bool]:
        """What ``chat.invoke`` is given beside the messages, and whether the
        reply format rides in ``extra_body``.

        The OpenAI SDK walks every node of a named parameter against its types
        on each request (the reply schema: ~175 nodes, 1.3 ms of CPU a call on
        the simulator) and sends ``extra_body`` as it is, so a ChatOpenAI's
        ``response_format`` goes there: the same JSON body. LangChain then
        calls the SDK's ``create``, not ``parse``: a reply cut by
        ``max_tokens`` comes back as a reply (``parse`` raised it, and
        ``_length_cut`` took the same text and tokens out), and a content
        filter's stop still raises (``_filtered``). A model LangChain sends to
        the Responses API keeps the named parameter, which LangChain routes on."""
        kwargs = {
            **self._format_kwargs(request),
            **self._compat_kwargs(request),
            **self._seed_kwargs(request),
        }
        if self.provider not in SEED_PROVIDERS or "response_format" not in kwargs:
            return kwargs, False
        if getattr(chat, "_use_responses_api", lambda payload: True)({}):
            return kwargs, False
        extra = (
            kwargs.get("extra_body") or self.kwargs.get("extra_body") or {}
        )  # the call's replaces the model's
        kwargs["extra_body"] = {"response_format": kwargs.pop("response_format"), **extra}
        return kwargs, True

    def complete(self, request: ModelRequest) -> Completion:
        chat = self._chat(request.temperature, request.max_tokens)
        started = time.perf_counter()
        try:
            # the slot reports this attempt's outcome (429, 5xx, success) to the limiter
            with self.limiter.slot(tokens=estimate_tokens(request.messages, request.max_tokens)):
                started = time.perf_counter()  # the provider's time, not the wait for a slot
                kwargs, in_body = self._call_kwargs(chat, request)
                reply = chat.invoke(request.messages, **kwargs)
                if in_body:
                    _filtered(reply)
        except Exception as exc:
            cut = _length_cut(exc)
            if cut is None:
                raise
            text, input_tokens, output_tokens = cut
            return Completion(text, int(input_tokens), int(output_tokens), time.perf_counter() - started)
        return completion_of(reply, time.perf_counter() - started)


def _filtered(reply: Any) -> None:
    """Raise what the OpenAI SDK's ``parse`` raised for a structured reply a
    content filter stopped."""
    if (getattr(reply, "response_metadata", None) or {}).get("finish_reason") == "content_filter":
        from openai import ContentFilterFinishReasonError

        raise ContentFilterFinishReasonError()


def completion_of(reply: Any, latency_s: float) -> Completion:
    """A LangChain ``AIMessage`` as a harness completion, with the token details
    LangChain normalises across providers (reasoning inside output, cache
    reads and writes inside input) and the provider's own cost if it sent one."""
    usage = getattr(reply, "usage_metadata", None) or {}
    details_in = usage.get("input_token_details") or {}
    details_out = usage.get("output_token_details") or {}
    return Completion(
        text=reply.content if isinstance(reply.content, str) else text_of(reply.content),
        input_tokens=int(usage.get("input_tokens", 0)),
        output_tokens=int(usage.get("output_tokens", 0)),
        latency_s=latency_s,
        reasoning_tokens=int(details_out.get("reasoning", 0) or 0),
        cache_read_tokens=int(details_in.get("cache_read", 0) or 0),
        cache_write_tokens=int(details_in.get("cache_creation", 0) or 0),
        billed_usd=billed_cost(getattr(reply, "response_metadata", None) or {}),
    )


def text_of(content: Any) -> str:
    """The text blocks of a list-of-blocks reply (thinking blocks are not the answer)."""
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return str(content)


def billed_cost(metadata: dict[str, Any]) -> float | None:
    """The cost a provider reported for the call itself (OpenRouter's ``usage.cost``), if any."""
    usage = metadata.get("token_usage") or metadata.get("usage") or {}
    cost = usage.get("cost") if isinstance(usage, dict) else None
    return float(cost) if isinstance(cost, (int, float)) else None


def _api_key(provider: str, kwargs: dict[str, Any]) -> str | None:
    """The key this model sends (``kwargs.api_key`` over the environment), for the limiter's key hash."""
    key = kwargs.get("api_key")
    if key is None:
        return os.environ.get(API_KEY_ENV.get(provider, ""), None)
    reveal = getattr(key, "get_secret_value", None)
    return str(reveal() if callable(reveal) else key)


def _length_cut(exc: BaseException) -> tuple[str, int, int] | None:
    """The partial reply inside openai's ``LengthFinishReasonError``, if that is what ``exc`` is.

    With a ``response_format`` set, the OpenAI SDK raises instead of returning a
    reply cut off by ``max_tokens``. A cut-off reply is a structured-output
    problem, not a provider failure: hand it to the repair step.
    """
    if type(exc).__name__ != "LengthFinishReasonError":
        return None
    completion = getattr(exc, "completion", None)
    choices = getattr(completion, "choices", None)
    if not choices:
        return None
    text = getattr(choices[0].message, "content", None) or ""
    usage = getattr(completion, "usage", None)
    return (
        text,
        getattr(usage, "prompt_tokens", 0) or 0,
        getattr(usage, "completion_tokens", 0) or 0,
    )


# One LangChain chat model per distinct set of settings in the process: the cells
# of a sweep share them (and their HTTP client's connection pool) instead of each
# building its own, which cost a cell milliseconds of CPU apiece (an SDK client
# and its SSL context). A chat model holds no per-request state. The environment
# is part of the key: an SDK reads its key, base URL and proxies from it when built.
_SHARED_CHATS: dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()


def shared_chat(provider: str, name: str, temperature: float, max_tokens: int, client: dict[str, Any]) -> Any:
    settings = [provider, name, temperature, max_tokens, client, sorted(os.environ.items())]
    key = json.dumps(settings, sort_keys=True, default=repr)
    with _SHARED_LOCK:
        if key not in _SHARED_CHATS:
            from langchain.chat_models import init_chat_model

            _SHARED_CHATS[key] = init_chat_model(
                name, model_provider=provider, temperature=temperature, max_tokens=max_tokens, **client
            )
        return _SHARED_CHATS[key]

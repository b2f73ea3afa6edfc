"""Structured-config schema: every value is checked here, before any folder is
made or model loaded. Each section's ``check()`` raises ``ConfigError`` with
one line naming the key.

This module checks only its own keys. The ``format.*`` keys (the chosen
format's options dataclass) and ``roles.*`` (against the roles that format
has) are checked one layer up, in ``harness.formats.validate``, which
``harness.config.validate`` calls: the schema sits below the formats, the
models and the store, which all read it.

The sections that stand alone (topic, search, probes, interviews, prices, tracing,
budget) and ``ConfigError`` live in ``harness.schema_sections``, redaction in
``harness.redact``; every name is re-exported here.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

# Redaction and the sections that stand alone have their own modules; their
# names are re-exported from here (the "X as X" ones only that), where
# harness.config, the store, the formats and the frozen analysis files import them.
from harness.redact import PLACEHOLDER_KEYS as PLACEHOLDER_KEYS
from harness.redact import REDACTED as REDACTED
from harness.redact import is_secret as is_secret
from harness.redact import redact as redact
from harness.schema_sections import SAFE_NAME as _SAFE_NAME
from harness.schema_sections import SEARCH_TRANSPORTS as SEARCH_TRANSPORTS
from harness.schema_sections import (
    BudgetConfig,
    ConfigError,
    ForkConfig,
    InterviewsConfig,
    PlantedPersona,
    PricesConfig,
    ProbesConfig,
    SearchConfig,
    TopicConfig,
    TracingConfig,
)
from harness.schema_sections import InterviewItem as InterviewItem
from harness.schema_sections import ProbeSpec as ProbeSpec
from harness.schema_sections import read_text as read_text
from harness.schema_sections import read_topics as read_topics
from harness.schema_sections import require as _require

LOOP_LOCK_POLICIES = ("publish_last", "skip_turn", "abort")
SCHEMA_FAILURE_POLICIES = ("reject", "approve")
# control conditions (conf/experiment/control_*.yaml): what each one takes away
CONTROLS = ("monologue", "no_critic", "cooperative", "no_persona")
# what each control takes away: a format without it refuses the control (harness.formats)
CONTROL_TAKES = {
    "monologue": "opponent",
    "no_critic": "critic",
    "cooperative": "contest between teams",
    "no_persona": "persona agent",
}
STRUCTURED_MODES = ("auto", "json_schema", "json_object", "prompt")
GRAMMAR_MODES = ("full", "lazy")
PROMPT_STYLES = ("chat", "completion")
REASONING_EFFORTS = ("minimal", "low", "medium", "high")


# The keys only a local:* model takes: each at the value that asks nothing of another model,
# and what an API model uses instead. Whatever moves a config's model off local:* (a plan's
# dry passes) puts these back to that value (harness.plan.dry).
LOCAL_ONLY: dict[str, tuple[Any, str]] = {
    "prompt_style": ("chat", ""),
    "repeat_penalty": (None, " (an API model: model.kwargs.frequency_penalty)"),
}


@dataclass
class ModelConfig:
    """One model, selected for all roles by the ``model`` group."""

    spec: str = "local:smollm2"
    # llama.cpp settings (local:* specs)
    n_ctx: int = 2048
    n_threads: int | None = None
    n_gpu_layers: int = 0
    # local:* decoding (docs/decoding.md): lazy checks only the sampled token
    # against the JSON grammar (same tokens as full at temperature 0, a different
    # distribution above it, faster); prefix_cache restores each agent's system
    # prompt + header from a saved KV state. Both were full/false before issue 27
    grammar_mode: str = "lazy"
    prefix_cache: bool = True
    # local:* only: chat (the model's chat template) or completion (a base model: the
    # messages as a document with a worked example reply; harness.models.completion_frame)
    prompt_style: str = "chat"
    # local:* only: llama.cpp's repeat penalty over the reply's last 64 tokens; null: 1.0, none.
    # SmolLM2 otherwise often loops one sentence to the cap (docs/models.md)
    repeat_penalty: float | None = None
    # how to ask for JSON: auto picks per provider (see harness.models.registry)
    structured_mode: str = "auto"
    # passed through to LangChain's init_chat_model (base_url, api_key, ...)
    kwargs: dict[str, Any] = field(default_factory=dict)
    # scripted:* fault injection, all seeded by `seed`
    latency_s: float = 0.0
    reject_first: int = 0
    malformed_rate: float = 0.0
    error_rate: float = 0.0
    seed: int = 0
    persona_switch_round: int | None = None  # plant a persona change (validity tests)
    persona_drift_rate: float = 0.0  # drift gradually: this share more switched words each round
    # the scripted field script's settings (harness.models.scripted_rules.SETTINGS), read by its rules
    synthesize_rate: float = 0.5  # a scripted judge's chance of SYNTHESIZE at each decision
    factcheck_fail_rate: float = 0.2  # a scripted fact-checker's chance of failing a speech
    judge_winner: str = "random"  # a scripted judge's verdict: pro, con or random
    bad_citation_rate: float = 0.0  # a scripted arguer's share of citations that fail the check
    # per-call timeout for remote providers; Config.role_model copies it from retry.timeout_s
    timeout_s: float | None = None
    # remote providers: one adaptive limiter per endpoint, shared by every call of the
    # process (harness.models.limiter): calls in flight start at `concurrency` and move
    # (AIMD) up to `max_concurrency`; rpm/tpm: the provider's limits, if known
    concurrency: int = 8
    max_concurrency: int = 64
    rpm: int | None = None
    tpm: int | None = None
    # reasoning models (docs/costs.md): OpenAI's reasoning_effort; Anthropic's extended
    # thinking and Gemini's thinking_budget, in tokens. Their tokens are output tokens.
    reasoning_effort: str | None = None
    thinking_budget: int | None = None

    def check(self, key: str = "model") -> None:
        _require(":" in self.spec, f"{key}.spec", f"expected 'provider:name', got {self.spec!r}")
        self._check_local(key)
        self._check_scripted(key)
        self._check_remote(key)

    def _check_local(self, key: str) -> None:
        """llama.cpp's settings, and the decoding keys only a local:* model takes."""
        _require(self.n_ctx >= 256, f"{key}.n_ctx", f"must be >= 256, got {self.n_ctx}")
        _require(
            self.n_threads is None or self.n_threads >= 1,
            f"{key}.n_threads",
            f"must be >= 1, got {self.n_threads}",
        )
        for name, allowed in (
            ("grammar_mode", GRAMMAR_MODES),
            ("prompt_style", PROMPT_STYLES),
            ("structured_mode", STRUCTURED_MODES),
        ):
            value = getattr(self, name)
            _require(value in allowed, f"{key}.{name}", f"must be one of {allowed}, got {value!r}")
        _require(
            self.repeat_penalty is None or self.repeat_penalty > 0,
            f"{key}.repeat_penalty",
            f"must be > 0 (1.0: none), got {self.repeat_penalty}",
        )
        for name, (neutral, hint) in LOCAL_ONLY.items():
            value = getattr(self, name)
            _require(
                value == neutral or self.spec.startswith("local:"),
                f"{key}.{name}",
                f"{value!r} is for local:* models only, got spec {self.spec!r}{hint}",
            )

    def _check_scripted(self, key: str) -> None:
        """The scripted model's faults and field-script settings."""
        _require(self.latency_s >= 0, f"{key}.latency_s", f"must be >= 0, got {self.latency_s}")
        _require(self.reject_first >= 0, f"{key}.reject_first", f"must be >= 0, got {self.reject_first}")
        for name in (
            "malformed_rate",
            "error_rate",
            "synthesize_rate",
            "factcheck_fail_rate",
            "bad_citation_rate",
            "persona_drift_rate",
        ):
            value = getattr(self, name)
            _require(0 <= value <= 1, f"{key}.{name}", f"must be in [0, 1], got {value}")
        _require(
            self.judge_winner in ("pro", "con", "for", "against", "random"),
            f"{key}.judge_winner",
            f"must be pro, con, for, against or random, got {self.judge_winner!r}",
        )

    def _check_remote(self, key: str) -> None:
        """A provider's limits and reasoning knobs."""
        for name in ("concurrency", "max_concurrency", "rpm", "tpm"):
            value = getattr(self, name)
            _require(value is None or value >= 1, f"{key}.{name}", f"must be >= 1, got {value}")
        _require(
            self.concurrency <= self.max_concurrency,
            f"{key}.concurrency",
            f"must be <= {key}.max_concurrency ({self.max_concurrency}), got {self.concurrency}",
        )
        _require(
            self.reasoning_effort in (None, *REASONING_EFFORTS),
            f"{key}.reasoning_effort",
            f"must be null or one of {REASONING_EFFORTS}, got {self.reasoning_effort!r}",
        )
        _require(
            self.thinking_budget is None or self.thinking_budget >= -1,
            f"{key}.thinking_budget",
            f"must be null, -1 (Gemini: dynamic), 0 (off) or a token count, got {self.thinking_budget}",
        )


@dataclass
class RoleOverride:
    """Per-role changes on top of ``model`` (null keeps the shared value)."""

    spec: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    reasoning_effort: str | None = None
    thinking_budget: int | None = None

    def check(self, key: str) -> None:
        if self.spec is not None:
            _require(":" in self.spec, f"{key}.spec", f"expected 'provider:name', got {self.spec!r}")
        if self.temperature is not None:
            _require(
                0 <= self.temperature <= 2, f"{key}.temperature", f"must be in [0, 2], got {self.temperature}"
            )
        if self.max_tokens is not None:
            _require(self.max_tokens >= 16, f"{key}.max_tokens", f"must be >= 16, got {self.max_tokens}")
        _require(
            self.reasoning_effort in (None, *REASONING_EFFORTS),
            f"{key}.reasoning_effort",
            f"must be null or one of {REASONING_EFFORTS}, got {self.reasoning_effort!r}",
        )


@dataclass
class LLMConfig:
    temperature: float = 0.7
    max_tokens: int = 256

    def check(self) -> None:
        _require(
            0 <= self.temperature <= 2,
            "llm.temperature",
            f"must be in [0, 2], got {self.temperature}",
        )
        _require(self.max_tokens >= 16, "llm.max_tokens", f"must be >= 16, got {self.max_tokens}")


@dataclass
class CriticConfig:
    name: str = "balanced"
    strictness: str = "Approve only arguments that are specific and logically sound."
    max_iterations: int = 3
    on_loop_lock: str = "publish_last"
    on_schema_failure: str = "reject"
    use_revision: bool = True
    # control_no_critic: every draft is approved unread, with no model call
    approve_all: bool = False
    # a published turn whose word 5-grams are this share of one earlier turn's is a copy
    copy_threshold: float = 0.5
    # reject a copied draft (false: record copies, as drift to measure, and publish them)
    reject_copies: bool = False

    def check(self) -> None:
        _require(
            self.max_iterations >= 1, "critic.max_iterations", f"must be >= 1, got {self.max_iterations}"
        )
        _require(
            0 < self.copy_threshold <= 1,
            "critic.copy_threshold",
            f"must be in (0, 1], got {self.copy_threshold}",
        )
        _require(
            self.on_loop_lock in LOOP_LOCK_POLICIES,
            "critic.on_loop_lock",
            f"must be one of {LOOP_LOCK_POLICIES}, got {self.on_loop_lock!r}",
        )
        _require(
            self.on_schema_failure in SCHEMA_FAILURE_POLICIES,
            "critic.on_schema_failure",
            f"must be one of {SCHEMA_FAILURE_POLICIES}, got {self.on_schema_failure!r}",
        )


FSYNC_POLICIES = ("record", "round")


@dataclass
class MemoryConfig:
    window_rounds: int = 2  # how many past rounds of the transcript an agent sees
    max_chars_per_item: int = 600  # each transcript item is clipped to this
    log_prompts: bool = True  # keep each prompt in the team's prompts.jsonl
    fsync: str = (
        "record"  # when log lines reach the disk: each "record", or each "round" (docs/run-folders.md)
    )

    def check(self) -> None:
        _require(self.window_rounds >= 0, "memory.window_rounds", f"must be >= 0, got {self.window_rounds}")
        _require(self.fsync in FSYNC_POLICIES, "memory.fsync", f"must be record or round, got {self.fsync!r}")
        _require(
            self.max_chars_per_item >= 50,
            "memory.max_chars_per_item",
            f"must be >= 50, got {self.max_chars_per_item}",
        )


@dataclass
class StructuredConfig:
    max_repairs: int = 2  # extra attempts, each shown the validation error
    # a reply text field copying this many consecutive words of its prompt's
    # instructions or its schema (or writing field names for text) is invalid
    # and repaired (harness.models.echo); 0: off, as every run before issue 30
    echo_words: int = 8

    def check(self) -> None:
        _require(self.max_repairs >= 0, "structured.max_repairs", f"must be >= 0, got {self.max_repairs}")
        _require(
            self.echo_words == 0 or self.echo_words >= 3,
            "structured.echo_words",
            f"must be 0 (off) or >= 3 words, got {self.echo_words}",
        )


@dataclass
class RetryConfig:
    max_attempts: int = 5
    initial_s: float = 0.5
    max_s: float = 30.0
    jitter_s: float = 0.5
    # one remote call's limit; a call past it is a transient error, retried
    # like any other (null: wait as long as the provider's client does)
    timeout_s: float | None = 600.0

    def check(self) -> None:
        _require(self.max_attempts >= 1, "retry.max_attempts", f"must be >= 1, got {self.max_attempts}")
        for name in ("initial_s", "max_s", "jitter_s"):
            value = getattr(self, name)
            _require(value >= 0, f"retry.{name}", f"must be >= 0, got {value}")
        _require(
            self.timeout_s is None or self.timeout_s > 0,
            "retry.timeout_s",
            f"must be > 0 or null, got {self.timeout_s}",
        )


@dataclass
class Config:
    version: str = "1"
    seed: int = 0
    rounds: int = 3
    runs_root: str = "research_runs"
    topic: TopicConfig = field(default_factory=TopicConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    roles: dict[str, RoleOverride] = field(default_factory=dict)
    llm: LLMConfig = field(default_factory=LLMConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    # the chosen format's options (``Format.options``), checked in validate()
    format: Any = field(default_factory=lambda: {"name": "drift"})
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    structured: StructuredConfig = field(default_factory=StructuredConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    probes: ProbesConfig = field(default_factory=ProbesConfig)
    interviews: InterviewsConfig = field(default_factory=InterviewsConfig)
    prices: PricesConfig = field(default_factory=PricesConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    fork: ForkConfig = field(default_factory=ForkConfig)  # a fork's parent and round (docs/forks.md)
    progress: bool = True
    experiment_name: str = "default"
    replicates: int = 1  # sweeps: cells per grid point (see harness.sweep)
    replicate: int = 0  # this cell's replicate; its seed was derived from it
    resume: str | None = None  # a run folder: continue it (its own config wins)
    run_name: str | None = None  # the run folder's name; a sweep sets it per cell
    chat: str | None = None  # a seat a person plays at the terminal (chat mode): roles.<chat>.spec=human:you
    # which control condition this run is (set by the experiment=control_* presets), or None
    control: str | None = None
    # planted personas (harness.schema_sections.PlantedPersona), by seat: empty, none
    personas: dict[str, PlantedPersona] = field(default_factory=dict)

    def check(self) -> None:
        _require(self.rounds >= 1, "rounds", f"must be >= 1, got {self.rounds}")
        _require(self.seed >= 0, "seed", f"must be >= 0, got {self.seed}")
        _require(self.replicates >= 1, "replicates", f"must be >= 1, got {self.replicates}")
        self.check_control()
        _require(
            0 <= self.replicate < self.replicates,
            "replicate",
            f"must be in [0, replicates={self.replicates}), got {self.replicate}",
        )
        _require(
            bool(_SAFE_NAME.match(self.version)) and ".." not in self.version,
            "version",
            f"must be letters, digits, '.', '_' or '-' with no '..', got {self.version!r}",
        )
        _require(bool(self.runs_root), "runs_root", "must not be empty")
        _require(
            self.run_name is None or (bool(_SAFE_NAME.match(self.run_name)) and ".." not in self.run_name),
            "run_name",
            f"must be one safe folder name, got {self.run_name!r}",
        )
        _require(
            self.topic.generate or bool(self.topic.text),
            "topic.text",
            "is empty; set it or topic.generate=true",
        )
        self.model.check()
        for role, override in self.roles.items():
            override.check(f"roles.{role}")
        for part in (
            self.llm,
            self.critic,
            self.memory,
            self.structured,
            self.retry,
            self.search,
            self.budget,
            self.fork,
        ):
            part.check()
        self.probes.check()
        self.interviews.check()
        for seat, planted in self.personas.items():
            planted.check(f"personas.{seat}")

    def check_control(self) -> None:
        """A control condition needs the settings its preset makes."""
        _require(
            self.control in (None, *CONTROLS),
            "control",
            f"must be null or one of {CONTROLS}, got {self.control!r}",
        )
        _require(
            self.control != "no_critic" or self.critic.approve_all,
            "control",
            "no_critic needs critic.approve_all=true (use experiment=control_no_critic)",
        )
        _require(  # format is the drift format's options by now (harness.formats.validate)
            self.control != "no_persona" or getattr(self.format, "persona", True) is False,
            "control",
            "no_persona needs format.persona=false (use experiment=control_no_persona)",
        )

    def check_roles(self, known: tuple[str, ...]) -> None:
        """Every role given a value must be one the format has."""
        for role, override in self.roles.items():
            if role in known or override == RoleOverride():
                continue  # a preset may declare roles a smaller panel does not use
            raise ConfigError(
                f"roles.{role}: no such role in format {self.format.name!r}; its roles: {', '.join(known)}"
            )

    def role_model(self, role: str) -> tuple[ModelConfig, float, int]:
        """The model config, temperature and max_tokens one role runs with."""
        override = self.roles.get(role, RoleOverride())
        base = {f.name: getattr(self.model, f.name) for f in fields(self.model)}
        if override.spec is not None:
            base["spec"] = override.spec
        base["kwargs"] = {**self.model.kwargs, **override.kwargs}
        for knob in ("reasoning_effort", "thinking_budget"):  # a role's own reasoning knob wins
            if getattr(override, knob) is not None:
                base[knob] = getattr(override, knob)
        base["timeout_s"] = self.retry.timeout_s
        temperature = self.llm.temperature if override.temperature is None else override.temperature
        max_tokens = self.llm.max_tokens if override.max_tokens is None else override.max_tokens
        return ModelConfig(**base), temperature, max_tokens


def _structured(schema: type, data: Any, prefix: str = "") -> Any:
    """``data`` merged onto the dataclass ``schema``; OmegaConf errors become one line."""
    try:
        merged = OmegaConf.merge(_schema_node(schema), data)  # merge copies it first
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        if (section := _value_for_section(schema, data)) is not None:
            raise ConfigError(
                f"{prefix}{section}: a section of keys, not a value (got {data[section]!r}); "
                f"set one of its keys ({section}.<key>=...)"
            ) from None
        key = getattr(exc, "full_key", None) or "config"
        # a key with no place: named with what is there, not OmegaConf's "not in 'RoleOverride'"
        if (found := keys_at(schema, key.split("."))) is not None:
            parent = ".".join(key.split(".")[: found[0]])
            where = f"; {prefix}{parent} holds: {', '.join(found[1])}" if parent else " in the config"
            raise ConfigError(f"{prefix}{key}: no such key{where}") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if (
            "is not a ListConfig" in first
        ):  # interviews.rounds=1: OmegaConf says "AnyNode is not a ListConfig"
            given = (
                OmegaConf.select(OmegaConf.create(data), key) if isinstance(data, dict | DictConfig) else None
            )
            first = f"must be a list, got {given!r}: '{prefix}{key}=[{given}]' (quoted for the shell)"
        raise ConfigError(f"{prefix}{key}: {first}") from None


def _value_for_section(schema: type, data: Any) -> str | None:
    """The first key of ``data`` given a plain value where ``schema`` holds a section
    (``topic=foo``): OmegaConf's merge error for it names no key."""
    if not isinstance(data, dict | DictConfig):
        return None
    hints, optional = _hints(schema), {f.name for f in dataclasses.fields(schema) if f.default is None}
    for key, value in data.items():
        if value is None and key in optional:
            continue  # a section that may be null
        if dataclasses.is_dataclass(hints.get(str(key))) and not isinstance(value, dict | DictConfig):
            return str(key)
    return None


def keys_at(schema: Any, path: list[str]) -> tuple[int, list[str]] | None:
    """Where ``path`` (a dotted key's parts, below the dataclass ``schema``)
    leaves the keys the schema holds: the depth of the first part it has no
    place for, and the keys there; None if each part has one, or reaches a
    mapping or a value (what a mapping may hold is its owner's to check). A
    mapping of sections (``roles``: a ``RoleOverride`` by role) is walked
    through: any name, then the section's keys."""
    node: Any = schema
    named = False  # the part is a mapping's key, of any name
    for depth, part in enumerate(path):
        if named:
            node, named = typing.get_args(node)[1], False
            continue
        if not dataclasses.is_dataclass(node):
            return None
        hints = _hints(typing.cast(type, node))
        if part not in hints:
            return depth, list(hints)
        node = hints[part]
        named = typing.get_origin(node) is dict and dataclasses.is_dataclass(typing.get_args(node)[1])
    return None


@functools.cache
def _hints(schema: type) -> dict[str, Any]:
    """A dataclass's fields and their types, ``X | None`` as ``X`` (cached: a sweep checks every cell's keys)."""
    names = {f.name for f in dataclasses.fields(schema)}
    return {name: _bare(hint) for name, hint in typing.get_type_hints(schema).items() if name in names}


def _bare(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if len(args) == 1 and typing.get_origin(hint) in (typing.Union, types.UnionType) else hint


@functools.cache  # a schema's node tree, built once a process (10 ms a cell, each cell validates)
def _schema_node(schema: type) -> DictConfig:
    return OmegaConf.structured(schema)  # shared by every cell: merge copies it, nothing writes it

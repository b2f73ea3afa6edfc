"""The run context: what every node of every format shares.

``RunContext.ask`` is the single path from an agent to a model: it logs the
prompt to the asking team's folder, calls the model through the retry policy,
validates and repairs the reply, records retries and schema failures as
events, and counts tokens. A fatal error becomes one ``ModelCallError`` line
naming role, round and model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from harness.config import Config
from harness.memory import RunMemory
from harness.models.base import ChatModel, Completion, Message, ModelRequest
from harness.records import (
    ErrorInfo,
    EventKind,
    EventRecord,
    PromptRecord,
    RunCounts,
    record_id,
)
from harness.retry import call_with_retry, error_info
from harness.structured import StructuredResult, generate_structured

M = TypeVar("M", bound=BaseModel)


class ModelCallError(RuntimeError):
    """A model call that failed for good; ``info`` is the error as data."""

    def __init__(self, message: str, info: ErrorInfo) -> None:
        super().__init__(message)
        self.info = info


@dataclass
class RoleModel:
    """A model bound to one role's sampling settings."""

    role: str
    model: ChatModel
    temperature: float
    max_tokens: int

    @property
    def spec(self) -> str:
        return self.model.spec


def call_seed(seed: int, *parts: object) -> int:
    """Per-call seed derived from the run seed and the call's position, so a
    replayed call after resume samples exactly as the original would have."""
    digest = hashlib.sha256("|".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass
class RunContext:
    cfg: Config
    memory: RunMemory
    roles: dict[str, RoleModel]
    counts: RunCounts = field(default_factory=RunCounts)
    on_step: Callable[[str], None] = lambda label: None

    def event(
        self,
        kind: EventKind,
        *,
        round_: int,
        team: str | None,
        role: str,
        iteration: int = 0,
        detail: str = "",
        error: ErrorInfo | None = None,
        n: int = 0,
        **data: Any,
    ) -> EventRecord:
        rid = record_id(round_, team, role, iteration, kind, n)
        return self.memory.events.append(
            EventRecord(
                id=rid,
                round=round_,
                team=team,  # type: ignore[arg-type]
                role=role,
                iteration=iteration,
                event=kind,
                detail=detail,
                error=error,
                data=data,
            )
        )

    def ask(
        self,
        role: str,
        agent: str,
        messages: list[Message],
        schema_cls: type[M],
        *,
        round_: int,
        team: str | None,
        iteration: int,
    ) -> StructuredResult[M]:
        """One structured call for ``agent`` (persona, thinking, critique...) of ``role``."""
        bound = self.roles[role]
        tags = {"round": round_, "team": team, "role": agent, "iteration": iteration}
        self.on_step(f"{team or ''} {agent}".strip())
        if team is not None and self.cfg.memory.log_prompts:
            self.memory.team(team).prompts.append(
                PromptRecord(
                    id=record_id(round_, team, agent, iteration, "prompt"),
                    round=round_,
                    team=team,  # type: ignore[arg-type]
                    role=agent,
                    iteration=iteration,
                    model=bound.spec,
                    messages=messages,
                )
            )
        retries = 0

        def on_retry(attempt: int, exc: BaseException, wait: float) -> None:
            nonlocal retries
            retries += 1
            self.counts.retries += 1
            self.event(
                "retry", round_=round_, team=team, role=agent, iteration=iteration,
                detail=f"attempt {attempt} failed; retrying in {wait:.2f}s",
                error=error_info(exc), n=retries, model=bound.spec,
            )  # fmt: skip

        def call(request: ModelRequest) -> Completion:
            try:
                return call_with_retry(lambda: bound.model.complete(request), self.cfg.retry, on_retry)
            except Exception as exc:  # classified fatal, or retries exhausted
                info = error_info(exc)
                self.event(
                    "error", round_=round_, team=team, role=agent, iteration=iteration,
                    detail="model call failed", error=info, model=bound.spec,
                )  # fmt: skip
                raise ModelCallError(
                    f"role={agent} team={team} round={round_} model={bound.spec}: "
                    f"{info.type}: {info.message}",
                    info,
                ) from exc

        result = generate_structured(
            bound.model,
            call,
            messages,
            schema_cls,
            temperature=bound.temperature,
            max_tokens=bound.max_tokens,
            seed=call_seed(self.cfg.seed, round_, team, agent, iteration),
            max_repairs=self.cfg.structured.max_repairs,
            tags=tags,
        )
        self.counts.model_calls += result.usage.calls
        self.counts.input_tokens += result.usage.input_tokens
        self.counts.output_tokens += result.usage.output_tokens
        if not result.ok:
            self.counts.schema_failures += 1
            self.event(
                "schema_failure", round_=round_, team=team, role=agent, iteration=iteration,
                detail=f"no valid {schema_cls.__name__} after {result.attempts} attempts",
                error=ErrorInfo(kind="validation", type="SchemaError", message=result.errors[-1]),
                model=bound.spec, raw=result.raw[:1000],
            )  # fmt: skip
        return result

"""How an agent asks: once per record, and never again after a resume.

Every agent's record has a deterministic id. ``once`` returns the record
that already landed under that id (a resumed run replays the node that made
it), or makes it and appends it; ``ask_once`` is the common case, where
making it is one structured call through ``AgentContext.ask``. ``Call`` says
who asks and where: the model role that answers, the agent, and the call's
round, team and iteration, from which its record's envelope follows.
``SeatAgent`` and ``PublicAgent`` hold what the two kinds of agent ask with.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from harness.agents.transcript import render, window
from harness.models.base import Message
from harness.models.structured import StructuredResult
from harness.runtime.context import AgentContext
from harness.store.memory import JsonlLog, SeatMemory
from harness.store.records import Envelope, Usage, record_id

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R", bound=Envelope)
B = TypeVar("B", bound=Envelope | None)


@dataclass(frozen=True)
class Call:
    """One agent's model call: ``role`` answers (``roles.<role>``), ``agent`` names the
    prompt and reply ids; ``kind`` is its record id's kind (the agent's name if empty),
    ``id`` the record's whole id where it has one of its own (a probe's)."""

    role: str
    agent: str
    round: int
    team: str | None = None
    iteration: int = 0
    kind: str = ""
    id: str = ""

    @property
    def rid(self) -> str:
        return self.id or record_id(self.round, self.team, self.kind or self.agent, self.iteration)

    def ask(
        self, ctx: AgentContext, messages: list[Message], schema: type[M], max_tokens: int | None = None
    ) -> StructuredResult[M]:
        return ctx.ask(
            self.role,
            self.agent,
            messages,
            schema,
            round_=self.round,
            team=self.team,
            iteration=self.iteration,
            max_tokens=max_tokens,
        )

    def envelope(self, ctx: AgentContext, usage: Usage, role: str = "") -> dict[str, Any]:
        """The record's envelope fields; its ``role`` is the agent's unless given (a
        turn's record names the model role that answered, so usage adds up per role)."""
        return {
            "id": self.rid,
            "round": self.round,
            "team": self.team,
            "role": role or self.agent,
            "iteration": self.iteration,
            "model": ctx.spec(self.role),
            "usage": usage,
        }


class SeatAgent:
    """An agent of one seat: what it may reach, and its view of the run."""

    def __init__(self, ctx: AgentContext, view: SeatMemory) -> None:
        self.ctx = ctx
        self.view = view

    def debate(self, round_: int) -> str:
        """The shared transcript's last ``memory.window_rounds`` rounds, as a prompt shows them."""
        mem = self.ctx.cfg.memory
        return render(window(self.view.shared, round_, mem.window_rounds), mem.max_chars_per_item)


class PublicAgent(Generic[R]):
    """An agent with no seat: its context is ``public/``'s and it writes one log."""

    def __init__(self, ctx: AgentContext, log: JsonlLog[R]) -> None:
        self.ctx = ctx
        self.log = log


def once(log: JsonlLog[R], rid: str, make: Callable[[], B]) -> R | B:
    """The record ``rid`` of ``log``: the one that landed before a resume, else
    ``make()``'s, appended; ``make`` returning None appends nothing."""
    if (landed := log.get(rid)) is not None:
        return landed  # replay after resume: the record already landed, reuse it
    record = make()
    return record if record is None else log.append(cast(R, record))


def ask_once(
    ctx: AgentContext,
    log: JsonlLog[R],
    call: Call,
    messages: list[Message],
    schema: type[M],
    build: Callable[[StructuredResult[M]], B],
    max_tokens: int | None = None,
) -> R | B:
    """``once`` for one structured call: ``build`` turns its result into the record
    (None: nothing lands, as when a turn's reply never validated)."""
    return once(log, call.rid, lambda: build(call.ask(ctx, messages, schema, max_tokens)))

"""Contexts: what the engine's nodes and the agents may reach.

``RunContext`` belongs to the engine and holds the whole run memory. Agents
get an ``AgentContext`` instead, built for one seat: the config, the models,
the event log, and that seat's own prompt log, so no attribute path leads
from an agent to another seat's files. Roles with no seat get one built for
``public/``, whose prompt log is public.

``AgentContext.ask`` is the single path from an agent to a model: it logs the
prompt to the asking seat's folder (or ``public/``), calls the model through the retry policy,
validates and repairs the reply, and records retries and schema failures as
events. A fatal error becomes one ``ModelCallError`` line naming role, round
and model.

The event log is ``harness.runtime.events``; the bound role model, the call's
seed and request hash are ``harness.runtime.calls``. Both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from harness.models.base import Completion, Message, ModelRequest, waits
from harness.models.echo import config_texts
from harness.models.retry import call_with_retry, error_info
from harness.models.sentences import Cut
from harness.models.structured import StructuredResult, generate_structured, usage_of
from harness.runtime.budget import BudgetExhausted, Budgets, Held

# The event log and what one call is made with have their own modules; their
# names are re-exported from here, where the formats and agents import them.
from harness.runtime.calls import RoleModel as RoleModel
from harness.runtime.calls import StepHook as StepHook
from harness.runtime.calls import call_seed as call_seed
from harness.runtime.calls import request_sha as request_sha
from harness.runtime.events import ATTEMPT_EVENTS as ATTEMPT_EVENTS
from harness.runtime.events import EventLog as EventLog
from harness.runtime.events import redo_id as redo_id
from harness.runtime.gate import gate
from harness.runtime.interrupt import RunStopped
from harness.runtime.otel import traced_agent, traced_call
from harness.schema import Config
from harness.slots import waiting
from harness.store.copies import find_copy, find_repeat
from harness.store.memory import JsonlLog, RunMemory
from harness.store.records import ErrorInfo, PromptRecord, Published, ReplyRecord, SeatInfo, record_id

M = TypeVar("M", bound=BaseModel)

Side = Literal["for", "against"]


@dataclass(frozen=True)
class Seat:
    """One place at the table.

    ``name`` is the folder and the ``team`` of its records; ``alias`` is how
    the other seats and the export call it; ``role`` is the model role that
    answers for it (``roles.<role>.spec``); ``side`` is the side it argues,
    if the format has sides.
    """

    name: str
    alias: str
    role: str
    stance: str
    logs: tuple[str, ...]
    side: Side | None = None

    def info(self) -> SeatInfo:
        return SeatInfo(
            name=self.name, alias=self.alias, role=self.role, stance=self.stance, logs=list(self.logs)
        )


class ModelCallError(RuntimeError):
    """A model call that failed for good; ``info`` is the error as data."""

    def __init__(self, message: str, info: ErrorInfo) -> None:
        super().__init__(message)
        self.info = info
        self.run_dir: Path | None = None  # the run it failed, once the engine recorded it so


def _sent(bound: RoleModel, request: ModelRequest, held: Held) -> Completion:
    """One attempt of a call; a paused sweep holds it at the gate first (retries too).
    Past the gate it is checked again against its budgets: a limit ``ctl`` lowered while
    it waited (a pause, a retry's backoff) stops it unsent, as it would a new call."""
    with gate().through(bound.spec):
        held.recheck()
        return traced_call(bound.model, request)


@dataclass
class AgentContext:
    """What one seat's agents (or the seatless roles) can reach; see the module docstring."""

    cfg: Config
    roles: dict[str, RoleModel]
    events: EventLog
    prompts: JsonlLog[PromptRecord] | None
    step: StepHook
    side: str | None = None  # the seat's side, passed to models as a tag
    replies: JsonlLog[ReplyRecord] | None = None  # None: a context that keeps no replies (a unit test's)
    forced: bool = False  # a ``--force`` resume: a kept reply answers only the very request it was for
    budgets: Budgets = field(default_factory=Budgets)  # the run's and its sweep's, passed by every call
    # the config's instruction texts for the echo check, found once (a run's config does not
    # change) and shared by the run's contexts (``RunContext.for_seat``)
    instructions: dict[int, tuple[str, ...]] = field(default_factory=dict, repr=False)

    def spec(self, role: str) -> str:
        return self.roles[role].spec

    def _log_prompt(
        self, agent: str, tags: dict[str, Any], suffix: str, messages: list[Message]
    ) -> str | None:
        """Keep ``messages`` in the team's prompt log; its id, or None if not kept.

        A prompt logged before a crash and rebuilt otherwise on resume is kept
        beside the first (``redo_id``): the log holds every prompt really sent."""
        if self.prompts is None or not self.cfg.memory.log_prompts:
            return None
        rid = record_id(tags["round"], tags["team"], agent, tags["iteration"], suffix)
        n = 0
        while (stored := self.prompts.get(redo_id(rid, n))) is not None and stored.messages != messages:
            n += 1
        self.prompts.append(
            PromptRecord(
                id=redo_id(rid, n),
                round=tags["round"],
                team=tags["team"],
                role=agent,
                iteration=tags["iteration"],
                model=tags["model"],
                messages=messages,
            )
        )
        return redo_id(rid, n)

    def _kept(self, rid: str) -> list[ReplyRecord]:
        """The replies kept at this position: the first, then any a forced resume asked again."""
        kept: list[ReplyRecord] = []
        while self.replies is not None and (reply := self.replies.get(redo_id(rid, len(kept)))):
            kept.append(reply)
        return kept

    def _replayed(self, kept: list[ReplyRecord], sha: str, where: dict[str, Any]) -> Completion | None:
        """The kept reply this call replays, if an earlier attempt of the run got one.

        The reply to this very request (``sha``) replays. So does the last one
        kept here when the request rebuilt now differs, unless the resume was
        forced: the run acted on that reply, so replaying it keeps the run's
        path and pays for nothing twice (a node that read a record landed
        after it first ran rebuilds another prompt). The difference is an event.
        """
        reply = next((k for k in kept if k.request_sha == sha), None)
        if reply is None and kept and not self.forced:
            reply = kept[-1]
            self.events.emit(
                "replay_mismatch",
                **where,
                model=reply.model,
                reply_id=reply.id,
                kept_sha=reply.request_sha,
                request_sha=sha,
                detail="the request rebuilt on resume differs from the one the kept reply answered; "
                "the kept reply was replayed",
            )
        if reply is None:
            return None
        u = reply.usage
        return Completion(
            reply.text,
            u.input_tokens,
            u.output_tokens,
            u.latency_s,
            u.reasoning_tokens,
            u.cache_read_tokens,
            u.cache_write_tokens,
            u.cost_usd,
            u.billed_usd,
        )

    def _keep(self, rid: str, sha: str, request: ModelRequest, completion: Completion, spec: str) -> None:
        """Keep a reply before it is parsed, so a reply that fails validation replays too.
        ``rid`` is free: a forced resume that asked again keeps its reply beside the first."""
        if self.replies is None:
            return
        t = request.tags
        self.replies.append(
            ReplyRecord(
                id=rid,
                round=t["round"],
                team=t["team"],
                role=t["role"],
                iteration=t["iteration"],
                model=spec,
                attempt=t["attempt"],
                request_sha=sha,
                text=completion.text,
                usage=usage_of(completion),
            )
        )

    @contextmanager
    def _budgeted(self, bound: RoleModel, request: ModelRequest, where: dict[str, Any]) -> Iterator[Held]:
        """Hold the call's worst case on every budget; a budget it could cross
        stops the run before the call, with an event saying which and why."""
        usd, tokens = bound.worst_case(request)
        try:
            with self.budgets.call(usd, tokens) as held:
                yield held
        except BudgetExhausted as exc:
            self.events.emit("budget", **where, detail=str(exc), model=bound.spec)
            raise

    def _caller(
        self, bound: RoleModel, agent: str, tags: dict[str, Any]
    ) -> Callable[[ModelRequest], Completion]:
        """One request through the retry policy; retries and failures become events."""
        where = {"round_": tags["round"], "team": tags["team"], "role": agent, "iteration": tags["iteration"]}
        retries = 0

        def on_retry(attempt: int, exc: BaseException, wait: float) -> None:
            nonlocal retries
            retries += 1
            self.events.emit(
                "retry",
                **where,
                detail=f"attempt {attempt} failed; retrying in {wait:.2f}s",
                error=error_info(exc),
                n=retries,
                model=bound.spec,
            )

        def call(request: ModelRequest) -> Completion:
            attempt = request.tags["attempt"]
            rid = record_id(tags["round"], tags["team"], agent, tags["iteration"], "reply", attempt)
            sha = request_sha(request)
            kept = self._kept(rid)
            if (replayed := self._replayed(kept, sha, where)) is not None:  # after a resume: no second call
                return replayed
            with self._budgeted(bound, request, where) as held:
                if attempt == 0:  # logged just before the call it shows, so a replayed call logs nothing new
                    self._log_prompt(agent, tags, "prompt", request.messages)
                # the cell's run slot is lent out while it waits on the model, retries too;
                # a model that never waits keeps it (two thread switches a call saved)
                try:
                    with waiting() if waits(bound.model) else nullcontext():
                        completion = call_with_retry(
                            lambda: _sent(bound, request, held), self.cfg.retry, on_retry
                        )
                except RunStopped:  # stopped at the gate (a stop, or a budget checked again): no call made
                    raise
                except Exception as exc:  # classified fatal, or retries exhausted
                    info = error_info(exc)
                    self.events.emit(
                        "error", **where, detail="model call failed", error=info, model=bound.spec
                    )
                    raise ModelCallError(
                        f"role={agent} team={tags['team']} round={tags['round']} model={bound.spec}: "
                        f"{info.type}: {info.message}",
                        info,
                    ) from exc
                completion = bound.priced(completion)
                held.pay(completion.cost_usd, completion.input_tokens + completion.output_tokens)
            self._keep(redo_id(rid, len(kept)), sha, request, completion, bound.spec)
            return completion

        return call

    @traced_agent  # an invoke_agent span when the run is traced (tracing.otel)
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
        max_tokens: int | None = None,
    ) -> StructuredResult[M]:
        """One structured call for ``agent`` (persona, thinking, critique...) of ``role``;
        ``max_tokens`` lowers the role's reply budget for this call (a grounded turn's limit)."""
        bound = self.roles[role]
        tags = {"round": round_, "team": team, "role": agent, "iteration": iteration, "model": bound.spec}
        self.step.fn(f"{team or ''} {agent}".strip())
        echo_words = self.cfg.structured.echo_words
        result = generate_structured(
            self._caller(bound, agent, tags),
            messages,
            schema_cls,
            temperature=bound.temperature,
            max_tokens=bound.max_tokens if max_tokens is None else min(max_tokens, bound.max_tokens),
            seed=call_seed(self.cfg.seed, round_, team, agent, iteration),
            max_repairs=self.cfg.structured.max_repairs,
            echo_words=echo_words,
            instructions=self._config_texts(echo_words),  # harness-written
            tags={
                **{k: v for k, v in tags.items() if k != "model"},
                **({"side": self.side} if self.side else {}),
            },
        )
        at: dict[str, Any] = {"round_": round_, "team": team, "role": agent, "iteration": iteration}
        self._record_cuts(result.cuts, at, bound.spec)
        if not result.ok:
            self._record_failure(result, schema_cls, at, tags, bound.spec)
        return result

    def _config_texts(self, n: int) -> tuple[str, ...]:
        if not n:
            return ()
        if n not in self.instructions:
            self.instructions[n] = config_texts(self.cfg, n)
        return self.instructions[n]

    def _record_cuts(self, cuts: list[Cut], at: dict[str, Any], spec: str) -> None:
        """A ``cut`` event for each field a cap cut or left unfinished (ended at its last sentence)."""
        for n, cut in enumerate(cuts):
            dropped = (
                f"{cut.dropped_chars} characters after its last sentence dropped"
                if cut.dropped_chars
                else "no sentence ended before it: a private field, kept as cut"
            )
            self.events.emit(
                "cut",
                **at,
                n=n,
                detail=f"{cut.field}: cut by {cut.cap}; {dropped}",
                model=spec,
                **asdict(cut),
            )

    def _record_failure(
        self,
        result: StructuredResult[M],
        schema_cls: type[M],
        at: dict[str, Any],
        tags: dict[str, Any],
        spec: str,
    ) -> None:
        """A ``schema_failure`` event. A seat's failed reply may hold private text: it goes
        to the seat's own folder and the event (readable by all) only points at it. A
        call for no seat is public, so its reply may ride along too."""
        raw = result.raw[:2000]
        reply_id = self._log_prompt(at["role"], tags, "failed-reply", [{"role": "assistant", "content": raw}])
        where: dict[str, Any] = (
            {"reply_id": reply_id} if reply_id else {"raw": raw} if at["team"] is None else {}
        )
        self.events.emit(
            "schema_failure",
            **at,
            detail=f"no valid {schema_cls.__name__} after {result.attempts} attempts",
            error=ErrorInfo(kind="validation", type="SchemaError", message=result.errors[-1]),
            usage=result.usage,
            model=spec,
            **where,
        )


@dataclass
class RunContext:
    """The engine's context: the whole run memory. Never handed to an agent."""

    cfg: Config
    memory: RunMemory
    roles: dict[str, RoleModel]
    seats: tuple[Seat, ...] = ()
    step: StepHook = field(default_factory=StepHook)
    tools: Any = None  # what the format's ``open_tools`` opened for the run (a search session)
    forced: bool = False  # resumed with ``--force`` past a changed fingerprint
    budgets: Budgets = field(default_factory=Budgets)
    from_round: int = 0  # the round of the snapshot the run goes on from (0: its start)
    # its agents' contexts' instruction texts (``AgentContext.instructions``): one config, found once
    instructions: dict[int, tuple[str, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.events = EventLog(self.memory.events)
        self._recheck_copies()
        # every format publishes through it; a copy first, then a repeat (both checks are cheap)
        self.memory.shared.on_append += [self._check_copy, self._check_repeat]

    def _recheck_copies(self) -> None:
        """A resume checks the turns that landed after its snapshot again: a kill between
        a turn's append and its ``copy`` or ``repeat`` event loses the event, and the turn
        then replays as landed. An event already written has the same id, so none is
        written twice."""
        landed = list(self.memory.shared)  # a fresh run's is empty
        for i, turn in enumerate(landed):
            if turn.round > self.from_round:
                self._check_copy(turn, landed[:i])
                self._check_repeat(turn)

    def _check_repeat(self, turn: Published) -> None:
        """A ``repeat`` event when ``turn`` writes one of its own sentences again."""
        if (repeat := find_repeat(turn.text)) is None:
            return
        detail = f"{turn.id} writes {repeat.sentence!r} {repeat.times} times"
        self._turn_event(
            "repeat", turn, detail, sentence=repeat.sentence, times=repeat.times, share=repeat.share
        )

    def _check_copy(self, turn: Published, earlier: list[Published] | None = None) -> None:
        """A ``copy`` event when ``turn`` repeats an earlier published turn (by default
        those still in memory: ``turn`` was just appended, so all of them are earlier)."""
        if earlier is None:
            earlier = [r for r in self.memory.shared if r.id != turn.id]
        if (copy := find_copy(turn.text, earlier, self.cfg.critic.copy_threshold)) is None:
            return
        data = {"copies": copy.id, "seat": copy.seat, "round": copy.round, "similarity": copy.similarity}
        self._turn_event("copy", turn, f"{turn.id} repeats {copy.names()}", **data)

    def _turn_event(self, name: str, turn: Published, detail: str, **data: Any) -> None:
        """An event about a published turn, at its round, seat and draft iteration."""
        self.events.emit(
            name,
            round_=turn.round,
            team=turn.team,
            role=turn.role,
            iteration=turn.iteration,
            detail=detail,
            turn=turn.id,  # the event's id follows the turn's draft iteration; this is the turn's own
            **data,
        )

    def for_seat(self, name: str) -> AgentContext:
        """The context of one seat's agents: its own prompt log, nothing wider."""
        view = self.memory.seat(name)
        side = next((s.side for s in self.seats if s.name == name), None)
        replies = view.logs.get("replies")
        return AgentContext(
            self.cfg,
            self.roles,
            self.events,
            view.prompts,
            self.step,
            side,
            replies,
            self.forced,
            self.budgets,
            self.instructions,
        )

    def for_public(self) -> AgentContext:
        """The context of the roles with no seat; their prompts go to ``public/``."""
        public = self.memory.public
        return AgentContext(
            self.cfg,
            self.roles,
            self.events,
            public.get("prompts"),
            self.step,
            replies=public.get("replies"),
            forced=self.forced,
            budgets=self.budgets,
            instructions=self.instructions,
        )

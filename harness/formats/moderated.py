"""The moderated format (after Deb8flow): Pro and Con speak in stages, a
fact-checker reviews every speech before it is published, strikes can
disqualify a side, and a judge gives the verdict.

    python -m harness.run format=moderated
    python -m harness.run format=moderated format.exchanges=25      # 52 speeches: a drift study
    python -m harness.run format=moderated format.fact_check=grounded search.collection=kjv

Speeches: Pro opening, then ``format.exchanges`` times Con rebuttal and Pro
counter, then Con closing. Each speech is one round of the run (snapshotted,
resumable). A failed fact-check sends the same speaker back with the
checker's reasons and is a strike for its side; at ``format.max_strikes`` the
side is disqualified, the moderator gives the verdict and the debate ends.
A speech that fails ``format.max_speech_retries`` + 1 checks hits the cap
(a ``speech_cap`` event) and ``format.on_speech_cap`` applies:
``publish_last`` (publish the last draft, ``source: cap``), ``skip``
(publish nothing for that stage) or ``abort`` (end the debate with no
verdict). The state holds counters only; drafts live in each seat's
``drafts`` log, checks and the verdict in ``public/``.

The fact-checker judges from the model alone (``format.fact_check=ungrounded``),
or rules on each claim from passages of ``search.collection`` (``grounded``:
``harness.agents.grounded_checker``, its searches in ``public/searches``).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START

from harness.agents import FactCheckerAgent, SpeakerAgent, TopicAgent, VerdictAgent
from harness.agents.grounded_checker import MAX_CLAIMS, GroundedFactCheckerAgent
from harness.agents.speaker import speaker_system
from harness.agents.verdict import CRITERIA
from harness.formats.base import PROMPTS, Format, FormatOptions, Seat
from harness.formats.fact_checks import check_fact_check_marks, check_grounded_strikes, check_strikes
from harness.formats.graphs import SharedStateGraph as StateGraph
from harness.formats.moderated_checks import (
    check_drafts_stay_private,
    check_speech_sources,
    check_stage_order,
)
from harness.formats.searching import check_collection, open_search
from harness.probes.isolation import check_interviews
from harness.runtime.context import EventLog, RunContext
from harness.schema import Config, ConfigError
from harness.store.memory import SeatMemory
from harness.store.records import (
    DraftRecord,
    FactCheckRecord,
    SpeechRecord,
    VerdictRecord,
    record_id,
)

STAGES = ("opening", "rebuttal", "counter", "closing")
SPEECH_CAP_POLICIES = ("publish_last", "skip", "abort")
FACT_CHECKS = ("ungrounded", "grounded")
SEAT_LOGS = ("drafts", PROMPTS)


@dataclass
class ModeratedOptions(FormatOptions):
    name: str = "moderated"
    exchanges: int = 1  # rebuttal/counter pairs between the opening and the closing
    max_strikes: int = 3  # failed fact-checks that disqualify a side
    max_speech_retries: int = 2  # re-speeches after a failed check, per speech
    on_speech_cap: str = "publish_last"
    criteria: list[str] = field(default_factory=lambda: ["evidence", "rebuttal", "clarity"])
    checked_stages: list[str] = field(default_factory=lambda: list(STAGES))  # the fact-checker reviews these
    judge_window: int = 8  # the judge reads this many last speeches
    fact_check: str = "ungrounded"  # ungrounded: the model alone; grounded: search.collection's passages
    max_claims: int = 2  # claims a grounded fact-check extracts, searches and rules on, per speech

    def check(self) -> None:
        for key in ("exchanges", "max_strikes", "judge_window"):
            if getattr(self, key) < 1:
                raise ConfigError(f"format.{key}: must be >= 1, got {getattr(self, key)}")
        if self.max_speech_retries < 0:
            raise ConfigError(f"format.max_speech_retries: must be >= 0, got {self.max_speech_retries}")
        if self.on_speech_cap not in SPEECH_CAP_POLICIES:
            raise ConfigError(
                f"format.on_speech_cap: must be one of {', '.join(SPEECH_CAP_POLICIES)}, got {self.on_speech_cap!r}"
            )
        unknown = [c for c in self.criteria if c not in CRITERIA]
        if unknown or not self.criteria or len(set(self.criteria)) != len(self.criteria):
            raise ConfigError(
                f"format.criteria: expected distinct criteria from {', '.join(CRITERIA)}, got {self.criteria}"
            )
        if self.fact_check not in FACT_CHECKS:
            raise ConfigError(
                f"format.fact_check: must be one of {', '.join(FACT_CHECKS)}, got {self.fact_check!r}"
            )
        if not 1 <= self.max_claims <= MAX_CLAIMS:
            raise ConfigError(f"format.max_claims: must be in [1, {MAX_CLAIMS}], got {self.max_claims}")
        unknown = [s for s in self.checked_stages if s not in STAGES]
        if unknown:
            raise ConfigError(
                f"format.checked_stages: unknown stage(s) {unknown}; stages: {', '.join(STAGES)}"
            )


def seats(options: ModeratedOptions) -> tuple[Seat, ...]:
    return (
        Seat(name="pro", alias="Pro", role="pro", stance="FOR the motion", logs=SEAT_LOGS, side="for"),
        Seat(
            name="con", alias="Con", role="con", stance="AGAINST the motion", logs=SEAT_LOGS, side="against"
        ),
    )


def plan(options: ModeratedOptions) -> list[tuple[str, str]]:
    """(seat, stage) of each speech, in order; speech k is round k."""
    middle = [("con", "rebuttal"), ("pro", "counter")] * options.exchanges
    return [("pro", "opening"), *middle, ("con", "closing")]


def planned_rounds(cfg: Config) -> int:
    return len(plan(cfg.format))


class ModeratedState(TypedDict):
    topic: str
    round: int  # the speech being made
    attempt: int  # of this speech
    draft_id: str | None  # the attempt's draft, once written
    check_id: str | None  # its fact-check, once done
    strikes: dict[str, int]
    opened: bool  # positions and warnings recorded
    done: bool
    stop_reason: str | None


def initial_state(cfg: Config) -> ModeratedState:
    topic = "" if cfg.topic.generate else (cfg.topic.text or "")
    return ModeratedState(
        topic=topic,
        round=1,
        attempt=0,
        draft_id=None,
        check_id=None,
        strikes={"pro": 0, "con": 0},
        opened=False,
        done=False,
        stop_reason=None,
    )


class ModeratedNodes:
    """The moderated debate's nodes and routers, bound to one run context."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.options: ModeratedOptions = ctx.cfg.format
        self.plan = plan(self.options)
        self.aliases = {s.name: s.alias for s in ctx.seats}
        self.shared = ctx.memory.shared
        public, logs = ctx.for_public(), ctx.memory.public
        self.factchecks, self.verdicts = logs["factchecks"], logs["verdicts"]
        self.fact_checker: FactCheckerAgent | GroundedFactCheckerAgent = (
            GroundedFactCheckerAgent(
                public, self.factchecks, logs["searches"], ctx.tools, self.options.max_claims
            )
            if self.options.fact_check == "grounded"
            else FactCheckerAgent(public, self.factchecks)
        )
        self.judge_agent = VerdictAgent(public, self.verdicts)
        # each speaker gets its own seat's context and view, nothing wider
        self.speakers = {
            s.name: SpeakerAgent(ctx.for_seat(s.name), ctx.memory.seat(s.name)) for s in ctx.seats
        }

    def at(self, state: ModeratedState) -> tuple[str, str]:
        return self.plan[state["round"] - 1]

    def draft(self, round_: int, seat: str, attempt: int) -> DraftRecord | None:
        return self.ctx.memory.seat(seat).logs["drafts"].get(record_id(round_, seat, "draft", attempt))

    def check_of(self, state: ModeratedState) -> FactCheckRecord | None:
        return self.factchecks.get(state["check_id"]) if state["check_id"] else None

    def last_attempt(self, state: ModeratedState) -> int | None:
        """The stage's last attempt that wrote a valid speech. At the cap, a reply that
        failed the schema after it leaves ``draft_id`` None, but that speech is still
        the last one the seat made: without it ``publish_last`` published nothing."""
        seat, _ = self.at(state)
        tried = range(state["attempt"], -1, -1)
        return next((a for a in tried if self.draft(state["round"], seat, a) is not None), None)

    # -- nodes ---------------------------------------------------------------

    def topic(self, state: ModeratedState) -> dict:
        return {"topic": TopicAgent(self.ctx.for_public())()}

    def open(self, state: ModeratedState) -> dict:
        """Record each side's position, and warn if the judge also debates."""
        events, motion = self.ctx.events, state["topic"]
        positions = {s.name: f"{s.stance}: {motion}" for s in self.ctx.seats}
        events.emit("positions", round_=0, team=None, role="moderator", detail=motion, positions=positions)
        judge = self.ctx.roles["judge"].spec
        shared = [s.name for s in self.ctx.seats if self.ctx.roles[s.role].spec == judge]
        if shared:
            events.emit(
                "warning",
                round_=0,
                team=None,
                role="moderator",
                model=judge,
                detail=f"the judge's model {judge} also speaks for {', '.join(shared)}",
                seats=shared,
            )
        return {"opened": True}

    def speak(self, state: ModeratedState) -> dict:
        round_, attempt = state["round"], state["attempt"]
        seat, stage = self.at(state)
        failed = None
        if attempt > 0:
            before = self.draft(round_, seat, attempt - 1)
            check = self.factchecks.get(record_id(round_, seat, "fact_check", attempt - 1))
            failed = (before, check) if before is not None and check is not None else None
        recent = self.shared.since_round(max(1, round_ - self.cfg.memory.window_rounds))
        draft = self.speakers[seat](state["topic"], stage, round_, attempt, recent, failed)
        return {"draft_id": draft.id if draft is not None else None, "check_id": None}

    def check(self, state: ModeratedState) -> dict:
        seat, _ = self.at(state)
        draft = self.draft(state["round"], seat, state["attempt"])
        assert draft is not None, "a check follows a draft"
        record = self.fact_checker(state["topic"], self.aliases[seat], draft, state["strikes"][seat])
        if record.verdict == "pass":
            return {"check_id": record.id}
        self.ctx.events.emit(
            "strike",
            round_=record.round,
            team=seat,
            role="fact_checker",
            iteration=record.iteration,
            detail=f"{self.aliases[seat]}: strike {record.strike} of {self.options.max_strikes}",
            strike=record.strike,
            fact_check_id=record.id,
        )
        return {"check_id": record.id, "strikes": {**state["strikes"], seat: record.strike}}

    def retry(self, state: ModeratedState) -> dict:
        return {"attempt": state["attempt"] + 1, "draft_id": None, "check_id": None}

    def cap(self, state: ModeratedState) -> dict:
        seat, stage = self.at(state)
        policy = self.options.on_speech_cap
        self.ctx.events.emit(
            "speech_cap",
            round_=state["round"],
            team=seat,
            role="moderator",
            iteration=state["attempt"],
            detail=f"{stage} by {self.aliases[seat]}: {state['attempt'] + 1} attempts failed; {policy}",
            policy=policy,
        )
        if policy == "abort":
            reason = f"abort: {self.aliases[seat]}'s {stage} failed {state['attempt'] + 1} attempts"
            return {"round": state["round"] + 1, "done": True, "stop_reason": reason}
        return {}

    def publish(self, state: ModeratedState) -> dict:
        round_, attempt = state["round"], self.last_attempt(state)
        seat, stage = self.at(state)
        draft = self.draft(round_, seat, attempt) if attempt is not None else None
        assert attempt is not None and draft is not None, "only a draft is published"
        check = self.factchecks.get(record_id(round_, seat, "fact_check", attempt))
        source = "unchecked" if check is None else "passed" if check.verdict == "pass" else "cap"
        self.shared.append(
            SpeechRecord(
                id=record_id(round_, seat, "speech", 0),
                round=round_,
                team=seat,
                role="speaker",
                iteration=attempt,
                model=draft.model,
                text=draft.text,
                phase=stage,
                alias=self.aliases[seat],
                draft_id=draft.id,
                fact_check_id=check.id if check else None,
                source=source,  # type: ignore[arg-type]
            )
        )
        return {}

    def advance(self, state: ModeratedState) -> dict:
        return {"round": state["round"] + 1, "attempt": 0, "draft_id": None, "check_id": None}

    def disqualify(self, state: ModeratedState) -> dict:
        seat, _ = self.at(state)
        winner = next(s for s in self.aliases if s != seat)
        n = state["strikes"][seat]
        why = f"{self.aliases[seat]} reached {n} failed fact-checks (max_strikes={self.options.max_strikes})"
        self.verdicts.append(
            VerdictRecord(
                id=record_id(state["round"], None, "verdict", 0),
                round=state["round"],
                role="moderator",
                by="moderator",
                winner=winner,
                disqualified=seat,
                justification=f"{why}; {self.aliases[winner]} wins.",
            )
        )
        self.ctx.events.emit("disqualify", round_=state["round"], team=seat, role="moderator", detail=why)
        reason = f"disqualified: {seat} after {n} strikes; winner {winner}"
        return {"round": state["round"] + 1, "done": True, "stop_reason": reason}

    def verdict(self, state: ModeratedState) -> dict:
        round_ = state["round"]
        first = max(1, round_ - self.options.judge_window + 1)
        verdict = self.judge_agent(
            state["topic"],
            round_,
            self.shared.since_round(first),
            self.factchecks.since_round(first),
            state["strikes"],
            self.aliases,
        )
        reason = f"verdict: {verdict.winner} wins" if verdict.winner else "verdict: no valid judgement"
        return {"round": round_ + 1, "done": True, "stop_reason": reason}

    # -- routers -------------------------------------------------------------

    def route_start(self, state: ModeratedState) -> Literal["topic", "open", "speak"]:
        if not state["topic"]:
            return "topic"
        return "speak" if state["opened"] else "open"

    def route_after_speak(self, state: ModeratedState) -> Literal["check", "publish", "retry", "cap"]:
        if state["draft_id"] is None:  # no valid reply: another attempt, no strike
            return "retry" if state["attempt"] < self.options.max_speech_retries else "cap"
        _, stage = self.at(state)
        return "check" if stage in self.options.checked_stages else "publish"

    def route_after_check(self, state: ModeratedState) -> Literal["publish", "disqualify", "retry", "cap"]:
        check = self.check_of(state)
        if check is None or check.verdict == "pass":
            return "publish"
        seat, _ = self.at(state)
        if state["strikes"][seat] >= self.options.max_strikes:
            return "disqualify"
        return "retry" if state["attempt"] < self.options.max_speech_retries else "cap"

    def route_after_cap(self, state: ModeratedState) -> Literal["publish", "advance", "verdict", "end"]:
        if state["done"]:
            return "end"
        if self.options.on_speech_cap == "publish_last" and self.last_attempt(state) is not None:
            return "publish"
        return self.route_next(state)  # skip: nothing is published for this stage

    def route_next(self, state: ModeratedState) -> Literal["advance", "verdict"]:
        return "verdict" if state["round"] >= len(self.plan) else "advance"


def build_graph(ctx: RunContext):  # type: ignore[no-untyped-def]
    """The compiled moderated-debate graph for one run."""
    n = ModeratedNodes(ctx)
    graph = StateGraph(ModeratedState)
    nodes = ("topic", "open", "speak", "check", "retry", "cap", "publish", "advance", "disqualify", "verdict")
    for name in nodes:
        graph.add_node(name, getattr(n, name))
    graph.add_conditional_edges(START, n.route_start, {"topic": "topic", "open": "open", "speak": "speak"})
    graph.add_edge("topic", "open")
    graph.add_edge("open", "speak")
    graph.add_conditional_edges(
        "speak", n.route_after_speak, {"check": "check", "publish": "publish", "retry": "retry", "cap": "cap"}
    )
    graph.add_conditional_edges(
        "check",
        n.route_after_check,
        {"publish": "publish", "disqualify": "disqualify", "retry": "retry", "cap": "cap"},
    )
    graph.add_edge("retry", "speak")
    graph.add_conditional_edges(
        "cap",
        n.route_after_cap,
        {"publish": "publish", "advance": "advance", "verdict": "verdict", "end": END},
    )
    graph.add_conditional_edges("publish", n.route_next, {"advance": "advance", "verdict": "verdict"})
    graph.add_edge("advance", "speak")
    graph.add_edge("disqualify", END)
    graph.add_edge("verdict", END)
    return graph.compile()


def open_checker_search(cfg: Config, events: EventLog) -> AbstractContextManager[Any]:
    """The run's search session when its fact-checks are grounded; nothing otherwise."""
    return open_search(cfg, events) if cfg.format.fact_check == "grounded" else nullcontext()


def check_checker_collection(cfg: Config) -> None:
    if cfg.format.fact_check == "grounded":
        check_collection(cfg, "format.fact_check=grounded")


def max_steps(cfg: Config) -> int:
    """An upper bound on graph steps, for LangGraph's recursion limit."""
    per_speech = 3 * (cfg.format.max_speech_retries + 1) + 3
    return planned_rounds(cfg) * per_speech + 10


def interview_view(view: SeatMemory, cfg: Config) -> tuple[str, str | None]:
    """A seat's interview is asked as its speeches are: the same system prompt (it holds no persona)."""
    return speaker_system(view.seat), None


MODERATED = Format(
    name="moderated",
    summary="Pro and Con speak in stages; every speech is fact-checked; strikes disqualify; a judge decides.",
    options=ModeratedOptions,
    seats=seats,
    roles=("fact_checker", "judge", "topic"),
    public_logs=("factchecks", "verdicts", "searches", PROMPTS),  # searches: a grounded fact-check's
    record_kinds=("draft", "speech", "fact_check", "verdict", "search", "prompt", "event"),
    build_graph=build_graph,
    initial_state=initial_state,  # type: ignore[arg-type]
    max_steps=max_steps,
    counts=("published", "fact_check", "strike", "speech_cap", "schema_failures", "retries"),
    checks=(
        check_stage_order,
        check_speech_sources,
        check_strikes,
        check_drafts_stay_private,
        check_fact_check_marks,
        check_grounded_strikes,
        check_interviews,
    ),
    min_window_rounds=lambda cfg: cfg.format.judge_window,
    prompt_modules=(
        "harness.formats.moderated",
        "harness.agents.speaker",
        "harness.agents.fact_checker",
        "harness.agents.verdict",
        "harness.agents.topic",
        "harness.agents.common",
        "harness.agents.transcript",
        "harness.agents.grounded_checker",
        "harness.agents.passages",
        "harness.search.citations",
    ),
    planned_rounds=planned_rounds,
    open_tools=open_checker_search,
    preflight=check_checker_collection,
    sections=("search",),
    length_key=("format.exchanges", 2),
    interview_view=interview_view,
)

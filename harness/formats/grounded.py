"""The grounded format (after the MCP debate harness of seed 003): FOR and
AGAINST take turns on a claim, each searching a passage collection through
the search tool before it writes, and citing what it found by passage id.

    python -m harness.run format=grounded topic.text="Job's suffering is deserved" search.collection=kjv
    python -m harness.run format=grounded search.collection=path/to/notes format.final=judge

A round is FOR's turn, then AGAINST's; each sees the other's published
turns. A turn is up to ``format.max_searches`` search steps (the arguer asks
for a search or says it is ready), then the write. The citation checker
marks every citation supported, unsupported or unknown against the
collection: data, not a gate, unless ``format.on_bad_citation=retry`` sends
the turn back with the reasons (at most ``format.max_turn_retries`` times).
``format.charlimit`` sets the write's reply budget; a turn still longer is
cut at the limit, marked ``truncated``, its full text in the seat's drafts.
After the last round the synthesiser says where each side was strongest and
weakest (``format.final=synthesis``), or the judge names the side the
evidence supports (``format.final=judge``).

A seat whose model is ``human:*`` is played by a person at the terminal
(``python -m harness.chat``): the same searches, the same checker, the same
records, with ``model: human``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START

from harness.agents import TopicAgent
from harness.agents.arguer import ArguerAgent, arguer_system, write_budget
from harness.agents.debate_synthesizer import DebateSynthesizerAgent
from harness.agents.evidence_judge import EvidenceJudgeAgent
from harness.agents.human import HumanArguer, is_human
from harness.formats.base import PROMPTS, Format, FormatOptions, Seat
from harness.formats.graphs import SharedStateGraph as StateGraph
from harness.formats.grounded_checks import SIDES, check_citation_marks, check_turn_order, check_turn_sources
from harness.formats.searching import check_collection, open_search
from harness.models.sentences import within
from harness.probes.isolation import check_interviews
from harness.runtime.context import RunContext
from harness.runtime.tools import SearchTool
from harness.schema import Config, ConfigError
from harness.search.citations import bad_citations, reasons
from harness.store.memory import SeatMemory
from harness.store.records import (
    CitedTurnRecord,
    DraftRecord,
    NoteRecord,
    Published,
    SearchRecord,
    Usage,
    record_id,
)

FINALS = ("synthesis", "judge")
BAD_CITATION_POLICIES = ("record", "retry")
SEAT_LOGS = ("drafts", "searches", PROMPTS)


@dataclass
class GroundedOptions(FormatOptions):
    name: str = "grounded"
    max_searches: int = 2  # search calls an arguer may make before each turn
    final: str = (
        "synthesis"  # synthesis: neutral, strongest and weakest; judge: name the side the evidence supports
    )
    on_bad_citation: str = "record"  # record: data only; retry: send the turn back with the reasons
    max_turn_retries: int = 1  # re-writes of a turn whose citations failed (on_bad_citation=retry)
    charlimit: int = 600  # a turn's length: its reply budget, and a hard cut (recorded) beyond it
    final_window: int = 4  # rounds of turns the synthesiser or judge reads

    def check(self) -> None:
        if not 0 <= self.max_searches <= 8:
            raise ConfigError(f"format.max_searches: must be in [0, 8], got {self.max_searches}")
        if self.final not in FINALS:
            raise ConfigError(f"format.final: must be one of {', '.join(FINALS)}, got {self.final!r}")
        if self.on_bad_citation not in BAD_CITATION_POLICIES:
            raise ConfigError(
                f"format.on_bad_citation: must be one of {', '.join(BAD_CITATION_POLICIES)}, "
                f"got {self.on_bad_citation!r}"
            )
        if self.max_turn_retries < 0:
            raise ConfigError(f"format.max_turn_retries: must be >= 0, got {self.max_turn_retries}")
        if not 80 <= self.charlimit <= 4000:
            raise ConfigError(f"format.charlimit: must be in [80, 4000], got {self.charlimit}")
        if self.final_window < 1:
            raise ConfigError(f"format.final_window: must be >= 1, got {self.final_window}")


def seats(options: GroundedOptions) -> tuple[Seat, ...]:
    return tuple(
        Seat(
            name=side,
            alias=side.upper(),
            role=side,
            stance=f"{side.upper()} the claim",
            logs=SEAT_LOGS,
            side=side,  # type: ignore[arg-type]
        )
        for side in SIDES
    )


class GroundedState(TypedDict):
    topic: str
    round: int
    turn: int  # 0: FOR speaks, 1: AGAINST
    searches: int  # made in this turn
    query: str | None  # the search (or summary topic) the arguer asked for, not yet run
    tool: str | None  # search or summarize: the tool ``query`` is for
    attempt: int  # of this turn's write
    draft_id: str | None
    done: bool
    stop_reason: str | None


def initial_state(cfg: Config) -> GroundedState:
    topic = "" if cfg.topic.generate else (cfg.topic.text or "")
    return GroundedState(
        topic=topic,
        round=1,
        turn=0,
        searches=0,
        query=None,
        tool=None,
        attempt=0,
        draft_id=None,
        done=False,
        stop_reason=None,
    )


def grounding_line(turns: list[CitedTurnRecord]) -> str:
    cites = [c for t in turns for c in t.citations]
    count = {s: sum(c.status == s for c in cites) for s in ("supported", "unsupported", "unknown")}
    return (
        f"{len(turns)} turn(s), {len(cites)} citation(s): {count['supported']} supported, "
        f"{count['unsupported']} unsupported, {count['unknown']} unknown; "
        f"{sum(t.hits for t in turns)} passage(s) found by its searches"
    )


class GroundedNodes:
    """The grounded debate's nodes and routers, bound to one run context."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx, self.cfg = ctx, ctx.cfg
        self.options: GroundedOptions = ctx.cfg.format
        self.shared = ctx.memory.shared
        self.public = ctx.memory.public
        self.tool: SearchTool = ctx.tools
        self.seats = ctx.seats
        check = self.tool.check
        self.arguers = {
            s.name: ArguerAgent(
                ctx.for_seat(s.name),
                ctx.memory.seat(s.name),
                self.cfg.search.collection,
                self.options.max_searches,
                check,
            )
            for s in ctx.seats
        }
        self.humans = {
            s.name: HumanArguer(ctx.roles[s.role].model, ctx.memory.seat(s.name), self.public["notes"], check)
            for s in ctx.seats
            if is_human(ctx.roles[s.role].model)
        }
        self.budget = write_budget(self.options.charlimit)
        # a search step's usage until its search or draft lands; a resume
        # re-runs the round's steps from their kept replies, usage included
        self.pending_usage: dict[tuple[int, int], Usage] = {}

    def seat(self, state: GroundedState) -> Seat:
        return self.seats[state["turn"]]

    def searches_log(self, seat: str) -> Any:
        return self.ctx.memory.seat(seat).logs["searches"]

    def found(self, state: GroundedState, *, landed: bool = False) -> list[SearchRecord]:
        """This turn's searches so far, in the order they were made: those
        before ``state["searches"]``, since a replayed step must not see a
        search a killed run made after it (its prompt would differ from the one
        first sent); or, ``landed``, every one (a person's resumed turn shows them)."""
        log, seat = self.searches_log(self.seat(state).name), self.seat(state).name
        made = self.options.max_searches if landed else state["searches"]
        ids = (record_id(state["round"], seat, "search", n) for n in range(made))
        return [r for r in map(log.get, ids) if r is not None]

    def recent(self, state: GroundedState) -> list[Published]:
        """The window as this turn first saw it: none of this round's later turns,
        which a run killed before its round's snapshot may already hold."""
        later = {s.name for s in self.seats[state["turn"] :]}
        window = self.shared.since_round(max(1, state["round"] - self.cfg.memory.window_rounds))
        now = state["round"]
        return [p for p in window if p.round < now or (p.round == now and p.team not in later)]

    def step_usage(self, state: GroundedState) -> Usage:
        """What the last search step cost, counted with the record it led to (a search or the draft)."""
        return self.pending_usage.pop((state["round"], state["turn"]), Usage())

    # -- nodes ---------------------------------------------------------------

    def topic(self, state: GroundedState) -> dict:
        return {"topic": TopicAgent(self.ctx.for_public())()}

    def plan(self, state: GroundedState) -> dict:
        """One search step: the arguer asks for a search or a summary, or is ready to write."""
        seat, n = self.seat(state), state["searches"]
        tool, usage = self.arguers[seat.name].step(
            state["topic"], state["round"], n, self.recent(state), self.found(state)
        )
        self.pending_usage[(state["round"], state["turn"])] = usage
        return {"query": tool.query if tool else None, "tool": tool.name if tool else None}

    def search(self, state: GroundedState) -> dict:
        """The step's search or summary: either is one of the turn's ``max_searches``."""
        seat, n = self.seat(state).name, state["searches"]
        rid = record_id(state["round"], seat, "search", n)
        where = {"round": state["round"], "team": seat, "iteration": n}
        assert state["query"] is not None, "a search follows a query"
        # a state from before summaries (no "tool") asked for a search
        run = self.tool.summarize if state.get("tool") == "summarize" else self.tool.search
        run(self.searches_log(seat), rid, where, state["query"], self.step_usage(state))
        return {"searches": n + 1, "query": None, "tool": None}

    def write(self, state: GroundedState) -> dict:
        seat, attempt = self.seat(state).name, state["attempt"]
        # the reasons of the latest earlier draft, even when a failed reply came between
        before = self.latest_draft(state, attempt - 1)
        failed = (before, reasons(before.citations)) if before is not None else None
        usage = self.step_usage(state)
        draft = self.arguers[seat].write(
            state["topic"],
            state["round"],
            attempt,
            self.recent(state),
            self.found(state),
            failed,
            self.budget,
            usage,
        )
        if draft is None:  # no valid reply: the step's cost rides with the next attempt's draft
            self.pending_usage[(state["round"], state["turn"])] = usage
        return {"draft_id": draft.id if draft is not None else None}

    def human(self, state: GroundedState) -> dict:
        """A person's turn: searches, notes and the turn itself, at the terminal."""
        seat = self.seat(state)
        draft = self.humans[seat.name](
            state["topic"],
            state["round"],
            state["attempt"],
            self.recent(state),
            self.found(state, landed=True),
            lambda n, query: self._human_search(state, n, query),
            self.options.max_searches,
        )
        return {"draft_id": draft.id}

    def _human_search(self, state: GroundedState, n: int, query: str) -> SearchRecord:
        seat = self.seat(state).name
        rid = record_id(state["round"], seat, "search", n)
        where = {"round": state["round"], "team": seat, "iteration": n}
        return self.tool.search(self.searches_log(seat), rid, where, query, Usage())

    def retry(self, state: GroundedState) -> dict:
        return {"attempt": state["attempt"] + 1, "draft_id": None}

    def latest_draft(self, state: GroundedState, attempt: int) -> DraftRecord | None:
        """The turn's draft of the latest attempt up to ``attempt`` that wrote one. Never
        a later one's: a replayed step must not see what a killed run wrote after it.
        Up to the current attempt, it is the draft to publish: this attempt's, else the
        latest earlier one's (its citations failed, and every later reply the schema)."""
        seat = self.seat(state).name
        drafts = self.ctx.memory.seat(seat).logs["drafts"]
        ids = (record_id(state["round"], seat, "draft", a) for a in range(attempt, -1, -1))
        return next((d for d in map(drafts.get, ids) if d is not None), None)

    def publish(self, state: GroundedState) -> dict:
        seat = self.seat(state)
        draft = self.latest_draft(state, state["attempt"])
        assert draft is not None, "only a draft is published"
        text, truncated = within(draft.text, self.options.charlimit)
        if truncated:  # recorded as data, like a cap's cut inside a reply (harness.models.structured)
            self.ctx.events.emit(
                "cut",
                round_=state["round"],
                team=seat.name,
                role="turn",  # beside the turn it cut (its id is <round>.<seat>.turn.i0)
                detail=f"turn: cut at format.charlimit; {len(draft.text) - len(text)} characters dropped",
                field="text",
                dropped_chars=len(draft.text) - len(text),
                cap="format.charlimit",
            )
        found = [self.searches_log(seat.name).get(sid) for sid in draft.searches]
        self.shared.append(
            CitedTurnRecord(
                id=record_id(state["round"], seat.name, "turn", 0),
                round=state["round"],
                team=seat.name,
                role="arguer",
                iteration=draft.iteration,
                model=draft.model,
                usage=self.step_usage(state),  # a failed last attempt's search step, if any (none else)
                text=text,
                phase="turn",
                alias=seat.alias,
                side=seat.name,
                draft_id=draft.id,
                citations=draft.citations,
                searches=draft.searches,
                hits=sum(len(s.hits) for s in found if s is not None),
                truncated=truncated,
            )
        )
        return {}

    def skip(self, state: GroundedState) -> dict:
        """No valid turn after every attempt: say so, with the cost of the step that led here."""
        self.ctx.events.emit(
            "turn_skipped",
            round_=state["round"],
            team=self.seat(state).name,
            role="arguer",
            iteration=state["attempt"],
            usage=self.step_usage(state),
            detail=f"no valid turn after {state['attempt'] + 1} attempt(s); nothing published",
        )
        return {}

    def advance(self, state: GroundedState) -> dict:
        turn = (state["turn"] + 1) % len(self.seats)
        fresh = {"searches": 0, "query": None, "tool": None, "attempt": 0, "draft_id": None, "turn": turn}
        return {**fresh, "round": state["round"] + (turn == 0)}

    def final(self, state: GroundedState) -> dict:
        """The synthesis or the verdict, after the last round's last turn. The
        round moves on only here, so the last round's snapshot follows the
        final: a crash during it resumes into the final, not past it."""
        round_ = state["round"] + 1  # the final is written after the last round
        # what a resumed run holds too: the window of the last final_window
        # rounds (the format's least window) and every note (a whole log)
        turns = self.shared.since_round(max(1, round_ - self.options.final_window))
        cited = [t for t in turns if isinstance(t, CitedTurnRecord)]
        grounding = {s.alias: grounding_line([t for t in cited if t.team == s.name]) for s in self.seats}
        notes = [n for n in self.public["notes"].since_round(1) if isinstance(n, NoteRecord)]
        ctx = self.ctx.for_public()
        if self.options.final == "judge":
            judge = EvidenceJudgeAgent(ctx, self.public["verdicts"])
            verdict = judge(state["topic"], round_, turns, grounding, notes)
            reason = (
                f"verdict: {verdict.winner} is supported" if verdict.winner else "verdict: no valid judgement"
            )
        else:
            DebateSynthesizerAgent(ctx, self.public["synthesis"])(
                state["topic"], round_, "rounds", turns, grounding, notes
            )
            reason = "synthesis"
        return {"round": round_, "done": True, "stop_reason": reason}

    # -- routers -------------------------------------------------------------

    def route_turn(self, state: GroundedState) -> Literal["human", "plan", "write"]:
        if self.seat(state).name in self.humans:
            return "human"
        return "plan" if state["searches"] < self.options.max_searches else "write"

    def route_start(self, state: GroundedState) -> Literal["topic", "human", "plan", "write"]:
        # a snapshot is taken between rounds: a resume starts at a turn's beginning
        return "topic" if not state["topic"] else self.route_turn(state)

    def route_after_plan(self, state: GroundedState) -> Literal["search", "write"]:
        return "search" if state["query"] is not None else "write"

    def route_after_search(self, state: GroundedState) -> Literal["plan", "write"]:
        return "plan" if state["searches"] < self.options.max_searches else "write"

    def route_after_write(self, state: GroundedState) -> Literal["publish", "retry", "skip"]:
        can_retry = state["attempt"] < self.options.max_turn_retries
        if state["draft_id"] is None:  # no valid reply
            if can_retry:
                return "retry"
            # out of attempts: an earlier valid draft is published, as a draft whose
            # citations still fail is at the last attempt; with none, nothing is
            return "publish" if self.latest_draft(state, state["attempt"]) is not None else "skip"
        if self.options.on_bad_citation == "retry" and can_retry:
            draft = self.latest_draft(state, state["attempt"])  # this attempt's: its reply validated
            if draft is not None and bad_citations(draft.citations):
                return "retry"
        return "publish"

    def route_next(self, state: GroundedState) -> Literal["advance", "final"]:
        last = state["round"] >= self.cfg.rounds and state["turn"] == len(self.seats) - 1
        return "final" if last else "advance"


def build_graph(ctx: RunContext):  # type: ignore[no-untyped-def]
    """The compiled grounded-debate graph for one run."""
    n = GroundedNodes(ctx)
    graph = StateGraph(GroundedState)
    for name in ("topic", "plan", "search", "write", "human", "retry", "publish", "skip", "advance", "final"):
        graph.add_node(name, getattr(n, name))
    turn: dict[Hashable, str] = {"human": "human", "plan": "plan", "write": "write"}
    graph.add_conditional_edges(START, n.route_start, {**turn, "topic": "topic"})
    graph.add_conditional_edges("topic", n.route_turn, turn)
    graph.add_conditional_edges("plan", n.route_after_plan, {"search": "search", "write": "write"})
    graph.add_conditional_edges("search", n.route_after_search, {"plan": "plan", "write": "write"})
    after_write: dict[Hashable, str] = {"publish": "publish", "retry": "retry", "skip": "skip"}
    graph.add_conditional_edges("write", n.route_after_write, after_write)
    graph.add_conditional_edges("human", n.route_after_write, after_write)
    graph.add_conditional_edges("retry", n.route_turn, turn)
    after_turn: dict[Hashable, str] = {"advance": "advance", "final": "final"}
    graph.add_conditional_edges("publish", n.route_next, after_turn)
    graph.add_conditional_edges("skip", n.route_next, after_turn)
    graph.add_conditional_edges("advance", n.route_turn, turn)
    graph.add_edge("final", END)
    return graph.compile()


def max_steps(cfg: Config) -> int:
    """An upper bound on graph steps, for LangGraph's recursion limit."""
    options: GroundedOptions = cfg.format
    per_turn = (2 * options.max_searches + 4) * (options.max_turn_retries + 1) + 2
    return cfg.rounds * len(SIDES) * per_turn + 10


def interview_view(view: SeatMemory, cfg: Config) -> tuple[str, str | None]:
    """A seat's interview is asked as its turns are: the same system prompt (it holds no persona)."""
    return arguer_system(view.seat, cfg.search.collection), None


GROUNDED = Format(
    name="grounded",
    summary="FOR and AGAINST search a collection through an MCP tool and cite passages; citations are checked.",
    options=GroundedOptions,
    seats=seats,
    roles=("synthesizer", "topic"),
    public_logs=("synthesis", "verdicts", "notes", PROMPTS),
    record_kinds=("draft", "search", "cited_turn", "synthesis", "verdict", "note", "prompt", "event"),
    build_graph=build_graph,
    initial_state=initial_state,  # type: ignore[arg-type]
    max_steps=max_steps,
    counts=("published", "search", "schema_failures", "turn_skipped", "retries", "search_restart"),
    checks=(check_turn_order, check_turn_sources, check_citation_marks, check_interviews),
    min_window_rounds=lambda cfg: cfg.format.final_window,
    whole_logs=("public/notes.jsonl",),  # the final reads every note a person made
    prompt_modules=(
        "harness.formats.grounded",
        "harness.agents.arguer",
        "harness.agents.passages",
        "harness.agents.human",
        "harness.agents.debate_synthesizer",
        "harness.agents.evidence_judge",
        "harness.agents.topic",
        "harness.agents.common",
        "harness.agents.transcript",
        "harness.search.citations",
    ),
    open_tools=open_search,
    preflight=check_collection,
    sections=("search",),
    human_seats=True,
    interview_view=interview_view,
)

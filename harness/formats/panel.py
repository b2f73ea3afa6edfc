"""The panel format (after Agora): N analysts with roles written for the
topic, a blind first round, aliases that hide which model is which, a
neutral summary after every round, a judge that decides SYNTHESIZE or
CONTINUE from round 2 under a round cap, and an executive synthesis.

    python -m harness.run format=panel
    python -m harness.run format=panel format.judge=false rounds=50   # a long panel for drift studies
    python -m harness.run format=panel format.fan_out=false           # analysts one after another

Seats are ``analyst_a``... (aliases "Analyst A"...); each keeps its notes
(``thinking``) and prompts private. The role cards, summaries, decisions and
synthesis are public. The state holds counters only; the statements live in
the shared transcript, everything else in ``public/``.

A round's analysts read only the round before, so their calls are
independent: with ``format.fan_out`` (on by default) they go out together
(``harness.runtime.fanout``), and the statements are published after, in
seat order, so the run folder is the one a sequential run writes.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import partial
from typing import Literal, TypedDict

from langgraph.graph import END, START

from harness.agents import (
    AnalystAgent,
    JudgeAgent,
    RoleGeneratorAgent,
    SummarizerAgent,
    SynthesizerAgent,
    TopicAgent,
)
from harness.formats.base import PROMPTS, Format, FormatOptions, RunLogs, Seat
from harness.formats.graphs import SharedStateGraph as StateGraph
from harness.runtime.context import RunContext
from harness.runtime.fanout import fans_out, together
from harness.schema import Config, ConfigError
from harness.store.records import (
    DecisionRecord,
    PositionRecord,
    PromptRecord,
    Published,
    RoleCardRecord,
    ThinkingRecord,
    record_id,
)

MAX_ANALYSTS = 8
RECAP_ROUNDS = 3  # the judge and the synthesiser read this many round summaries
DEFAULT_FRAMEWORK = "Weigh evidence, feasibility, costs and risks, and who gains or loses."


@dataclass
class PanelOptions(FormatOptions):
    name: str = "panel"
    analysts: int = 4
    disruptor: bool = False  # the last seat questions the premise instead of taking a generated role
    judge: bool = True  # false: no early stop; the panel runs `rounds` rounds (drift studies)
    max_rounds: int = 4  # with the judge on, synthesis is forced at this round
    # a round's analysts are asked together where their calls wait on a provider;
    # false: one after another. Either way the run folder is the same.
    fan_out: bool = True

    def check(self) -> None:
        if not 2 <= self.analysts <= MAX_ANALYSTS:
            raise ConfigError(f"format.analysts: must be in [2, {MAX_ANALYSTS}], got {self.analysts}")
        if self.max_rounds < 1:
            raise ConfigError(f"format.max_rounds: must be >= 1, got {self.max_rounds}")


def seats(options: PanelOptions) -> tuple[Seat, ...]:
    letters = string.ascii_uppercase[: options.analysts]
    return tuple(
        Seat(
            name=f"analyst_{x.lower()}",
            alias=f"Analyst {x}",
            role=f"analyst_{x.lower()}",
            stance="an analyst whose role is written for the topic",
            logs=("thinking", PROMPTS),
        )
        for x in letters
    )


def cap(cfg: Config) -> int:
    """The last round: the judge's cap, or every round when the judge is off."""
    return min(cfg.format.max_rounds, cfg.rounds) if cfg.format.judge else cfg.rounds


class PanelState(TypedDict):
    topic: str
    round: int
    cards: bool  # the role cards are written
    done: bool
    stop_reason: str | None


def initial_state(cfg: Config) -> PanelState:
    topic = "" if cfg.topic.generate else (cfg.topic.text or "")
    return PanelState(topic=topic, round=1, cards=False, done=False, stop_reason=None)


class PanelNodes:
    """The panel's nodes and routers, bound to one run context."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.seats = [s.name for s in ctx.seats]
        self.framework = ctx.cfg.topic.framework or DEFAULT_FRAMEWORK
        public, logs = ctx.for_public(), ctx.memory.public
        self.shared = ctx.memory.shared
        self.cards_log, self.decisions = logs["roles"], logs["decisions"]
        self.summaries = logs["summaries"]
        self.role_generator = RoleGeneratorAgent(public, self.cards_log)
        self.summarizer = SummarizerAgent(public, self.summaries)
        self.judge_agent = JudgeAgent(public, self.decisions)
        self.synthesizer = SynthesizerAgent(public, logs["synthesis"])
        # each analyst gets its own seat's context and view, nothing wider
        self.agents = {s: AnalystAgent(ctx.for_seat(s), ctx.memory.seat(s)) for s in self.seats}
        self.fan_out = fans_out(ctx.cfg, [s.role for s in ctx.seats])

    def statements(self, round_: int) -> list[Published]:
        return [p for p in self.shared.since_round(round_) if p.round == round_]

    def recent_summaries(self, round_: int) -> list:  # type: ignore[type-arg]
        # one summary a round: the last RECAP_ROUNDS lie in the format's window,
        # so the read stays in memory however long the panel runs
        return list(self.summaries.since_round(max(1, round_ - RECAP_ROUNDS)))[-RECAP_ROUNDS:]

    def tension(self, round_: int) -> str | None:
        last = self.decisions.last()
        return last.tension if last is not None and round_ >= 3 and last.tension else None

    def topic(self, state: PanelState) -> dict:
        return {"topic": TopicAgent(self.ctx.for_public())()}

    def roles(self, state: PanelState) -> dict:
        disruptor = self.seats[-1] if self.cfg.format.disruptor else None
        self.role_generator(state["topic"], self.framework, self.seats, disruptor)
        return {"cards": True}

    def analysts(self, state: PanelState) -> dict:
        """Every analyst's statement of the round. What the calls read is read
        here, before they go out together; each call writes only its own seat's
        logs, and the statements are published after, in seat order."""
        round_ = state["round"]
        previous = self.statements(round_ - 1) if round_ > 1 else []
        tension = self.tension(round_)
        calls = [
            partial(
                self.agents[seat], state["topic"], self.framework, round_, self.card(seat), previous, tension
            )
            for seat in self.seats
        ]
        for seat, notes in zip(self.seats, together(self.ctx.events, calls, self.fan_out), strict=True):
            if notes is not None:
                self.publish(round_, seat, notes)
        return {}

    def card(self, seat: str) -> RoleCardRecord:
        card = self.cards_log.get(record_id(0, seat, "role_card", 0))
        assert card is not None, "the roles node runs before any analyst"
        return card

    def publish(self, round_: int, seat: str, notes: ThinkingRecord) -> None:
        alias = self.ctx.memory.seat(seat).seat.alias
        self.shared.append(
            PositionRecord(
                id=record_id(round_, seat, "position", 0),
                round=round_,
                team=seat,
                role="analyst",
                model=notes.model,
                text=notes.draft,
                alias=alias,
                notes_id=notes.id,
                phase="blind" if round_ == 1 else "debate",
            )
        )

    def summary(self, state: PanelState) -> dict:
        self.summarizer(state["topic"], state["round"], self.statements(state["round"]))
        return {}

    def judge(self, state: PanelState) -> dict:
        round_ = state["round"]
        self.judge_agent(
            state["topic"], self.framework, round_, self.recent_summaries(round_), self.statements(round_)
        )
        return {}

    def synthesis(self, state: PanelState) -> dict:
        round_ = state["round"]
        decision = self.decisions.get(record_id(round_, None, "decision", 0))
        if decision is not None and decision.decision == "SYNTHESIZE":
            reason = "judge"
        else:
            reason = "cap" if self.cfg.format.judge else "rounds"
        self.synthesizer(
            state["topic"],
            self.framework,
            round_,
            reason,
            self.recent_summaries(round_),
            self.statements(round_),
            self.tension(round_ + 1),
        )
        # a panel run to its rounds may be extended (rounds=N); a closed one may not
        stop = None if reason == "rounds" else f"{reason}: synthesis after round {round_}"
        return {"round": round_ + 1, "done": True, "stop_reason": stop}

    def advance(self, state: PanelState) -> dict:
        return {"round": state["round"] + 1}

    def route_start(self, state: PanelState) -> Literal["topic", "roles", "analysts"]:
        if not state["topic"]:
            return "topic"
        return "analysts" if state["cards"] else "roles"

    def route_after_summary(self, state: PanelState) -> Literal["judge", "synthesis", "advance"]:
        if state["round"] >= cap(self.cfg):
            return "synthesis"
        return "judge" if self.cfg.format.judge and state["round"] >= 2 else "advance"

    def route_after_judge(self, state: PanelState) -> Literal["synthesis", "advance"]:
        decision = self.decisions.get(record_id(state["round"], None, "decision", 0))
        return "synthesis" if decision is not None and decision.decision == "SYNTHESIZE" else "advance"


def build_graph(ctx: RunContext):  # type: ignore[no-untyped-def]
    """The compiled panel graph for one run."""
    n = PanelNodes(ctx)
    graph = StateGraph(PanelState)
    for name in ("topic", "roles", "analysts", "summary", "judge", "synthesis", "advance"):
        graph.add_node(name, getattr(n, name))
    graph.add_conditional_edges(
        START, n.route_start, {"topic": "topic", "roles": "roles", "analysts": "analysts"}
    )
    graph.add_edge("topic", "roles")
    graph.add_edge("roles", "analysts")
    graph.add_edge("analysts", "summary")
    graph.add_conditional_edges(
        "summary", n.route_after_summary, {"judge": "judge", "synthesis": "synthesis", "advance": "advance"}
    )
    graph.add_conditional_edges(
        "judge", n.route_after_judge, {"synthesis": "synthesis", "advance": "advance"}
    )
    graph.add_edge("advance", "analysts")
    graph.add_edge("synthesis", END)
    return graph.compile()


def max_steps(cfg: Config) -> int:
    """An upper bound on graph steps, for LangGraph's recursion limit: a round
    is four steps at most (analysts, summary, judge, advance or synthesis)."""
    return cfg.rounds * 4 + 10


# -- verify: the panel's own promises ------------------------------------------


def check_blind_first_round(run: RunLogs) -> list[str]:
    """No round-1 prompt of an analyst holds another analyst's round-1 text.

    Text an analyst copied from its own round-1 prompt (a small model echoing
    the template) is template text, not something the others could learn."""
    first_prompts = {
        seat.name: "\n".join(
            m["content"]
            for p in run.of(f"{seat.name}/prompts.jsonl")
            if isinstance(p, PromptRecord) and p.round == 1
            for m in p.messages
        )
        for seat in run.layout.seats
    }
    written = {
        seat.name: {
            text
            for name in (f"{seat.name}/thinking.jsonl", "shared_memory.jsonl")
            for r in run.of(name)
            if r.round == 1 and r.team == seat.name
            for text in _written(r)
            if text not in first_prompts[seat.name]
        }
        for seat in run.layout.seats
    }
    problems = []
    for seat in run.layout.seats:
        others = {t for other, texts in written.items() if other != seat.name for t in texts}
        for prompt in run.of(f"{seat.name}/prompts.jsonl"):
            if not isinstance(prompt, PromptRecord) or prompt.round != 1:
                continue
            content = "\n".join(m["content"] for m in prompt.messages)
            for text in sorted(t for t in others if t in content):
                problems.append(
                    f"{seat.name}/prompts.jsonl: {prompt.id} breaks the blind round: {text[:40]!r}"
                )
    return problems


def _written(record: object) -> list[str]:
    """What a model wrote in a position or notes record (24+ characters)."""
    texts = [getattr(record, f, "") for f in ("text", "scratchpad", "draft")]
    return [t for t in texts if isinstance(t, str) and len(t) >= 24]


GENERIC_PROVIDERS = {"local"}  # a common word: its presence in a prompt names nothing


def _identity(spec: str) -> set[str]:
    """What in a prompt would reveal ``spec``: the spec, its model name, its provider."""
    provider, _, name = spec.partition(":")
    found = {spec.lower(), name.lower()}
    if provider.lower() not in GENERIC_PROVIDERS:
        found.add(provider.lower())
    return {t for t in found if len(t) >= 3}


def check_aliases(run: RunLogs) -> list[str]:
    """No analyst's prompt names another seat's model spec, model or provider."""
    if run.manifest is None:
        return []
    specs = run.manifest.model_specs
    problems = []
    for seat in run.layout.seats:
        own = _identity(specs.get(seat.role, ""))
        reveal = {
            token: other.name
            for other in run.layout.seats
            if other.name != seat.name
            for token in _identity(specs.get(other.role, "")) - own
        }
        if not reveal:
            continue
        pattern = re.compile(
            "|".join(re.escape(t) for t in sorted(reveal, key=len, reverse=True)), re.IGNORECASE
        )
        for prompt in run.of(f"{seat.name}/prompts.jsonl"):
            if not isinstance(prompt, PromptRecord):
                continue
            for message in prompt.messages:
                if (hit := pattern.search(message["content"])) is not None:
                    token = hit.group(0).lower()
                    problems.append(
                        f"{seat.name}/prompts.jsonl: {prompt.id} names {reveal[token]}'s model ({token!r})"
                    )
                    break
    return problems


def check_one_statement_per_seat(run: RunLogs) -> list[str]:
    seen: set[tuple[int, str | None]] = set()
    problems = []
    for p in run.of("shared_memory.jsonl"):
        key = (p.round, p.team)
        if key in seen:
            problems.append(f"shared_memory.jsonl: two statements for round {p.round} {p.team}")
        seen.add(key)
    return problems


def check_decisions(run: RunLogs) -> list[str]:
    """Decisions come from round 2 on, and none follows a SYNTHESIZE."""
    problems = []
    closed = False
    for d in run.of("public/decisions.jsonl"):
        if not isinstance(d, DecisionRecord):
            continue
        if d.round < 2 or closed:
            problems.append(f"public/decisions.jsonl: {d.id} should not exist (round {d.round})")
        closed = closed or d.decision == "SYNTHESIZE"
    return problems


PANEL = Format(
    name="panel",
    summary="Analysts with roles written per topic; blind first round; summaries; a judge; a synthesis.",
    options=PanelOptions,
    seats=seats,
    roles=("role_generator", "summarizer", "judge", "synthesizer", "topic"),
    public_logs=("roles", "summaries", "decisions", "synthesis", PROMPTS),
    record_kinds=("role_card", "thinking", "position", "summary", "decision", "synthesis", "prompt", "event"),
    build_graph=build_graph,
    initial_state=initial_state,  # type: ignore[arg-type]
    max_steps=max_steps,
    counts=("published", "summary", "decision", "schema_failures", "retries"),
    checks=(check_blind_first_round, check_aliases, check_one_statement_per_seat, check_decisions),
    whole_logs=("public/roles.jsonl",),
    min_window_rounds=RECAP_ROUNDS,
    prompt_modules=(
        "harness.formats.panel",
        "harness.agents.role_generator",
        "harness.agents.analyst",
        "harness.agents.summarizer",
        "harness.agents.judge",
        "harness.agents.synthesizer",
        "harness.agents.topic",
        "harness.agents.common",
        "harness.agents.transcript",
    ),
)

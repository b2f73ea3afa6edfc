"""The drift format: Pros then Cons each round, every turn going
persona -> thinking -> critique, until the critic approves or the loop-lock
cap applies; the critique node publishes an approved argument and moves
on to the next turn (with probes on, the probe node asks first and the
advance node moves on; at a loop-lock, ``publish_last`` publishes the last
draft). With ``format.persona=false`` (the no-persona control) no persona agent runs:
each turn starts at thinking, whose prompt carries no persona. A seat with a
planted persona (``personas.<seat>``) takes it as given from its
``from_round`` on, with no persona call.

The state holds counters and record ids only; the transcript lives in the
memory files. ``iteration`` counts the critiques already done in this turn.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from langgraph.graph import END, START

from harness.agents import CritiqueAgent, PersonaAgent, ThinkingAgent, TopicAgent
from harness.agents.human import HumanDebater, is_human
from harness.agents.persona import current_persona
from harness.agents.probe import ProbeAgent
from harness.agents.thinking import debater_system
from harness.agents.transcript import window
from harness.formats.base import PROMPTS, Format, FormatOptions, RunLogs, Seat
from harness.formats.graphs import SharedStateGraph as StateGraph
from harness.probes.catalog import active_probes
from harness.probes.isolation import check_interviews, check_probes
from harness.runtime.context import RunContext
from harness.schema import CONTROLS, Config, ConfigError
from harness.store.memory import SeatMemory
from harness.store.records import ArgumentRecord, CritiqueRecord, EventRecord, ThinkingRecord, record_id

# The side each team argues; a team's alias is its name in capitals.
STANCE = {"pros": "FOR the motion", "cons": "AGAINST the motion"}
# control_cooperative: the same sides, told to work toward an agreement instead of winning
COOPERATIVE = ", and working with the other team toward an agreement you can both accept"
SIDE: dict[str, Any] = {"pros": "for", "cons": "against"}
TEAM_LOGS = ("persona", "thinking", "critique", PROMPTS)


@dataclass
class DriftOptions(FormatOptions):
    name: str = "drift"
    teams: list[str] = field(default_factory=lambda: ["pros", "cons"])
    cooperative: bool = False  # the cooperative control: both teams seek agreement
    persona: bool = True  # false: the no-persona control, no persona agent and no persona in prompts

    def check(self) -> None:
        unknown = [t for t in self.teams if t not in STANCE]
        if unknown or len(set(self.teams)) != len(self.teams) or not self.teams:
            raise ConfigError(
                f"format.teams: expected distinct teams from {sorted(STANCE)}, got {self.teams}"
            )


def seats(options: DriftOptions) -> tuple[Seat, ...]:
    return tuple(
        Seat(
            name=t,
            alias=t.upper(),
            role=t,
            logs=TEAM_LOGS,
            side=SIDE[t],
            stance=STANCE[t] + (COOPERATIVE if options.cooperative else ""),
        )
        for t in options.teams
    )


class DriftState(TypedDict):
    topic: str
    round: int
    team: str
    iteration: int
    persona_id: str | None
    draft_id: str | None
    critique_id: str | None
    done: bool
    stop_reason: str | None


def initial_state(cfg: Config) -> DriftState:
    topic = "" if cfg.topic.generate else (cfg.topic.text or "")
    return DriftState(
        topic=topic,
        round=1,
        team=cfg.format.teams[0],
        iteration=0,
        persona_id=None,
        draft_id=None,
        critique_id=None,
        done=False,
        stop_reason=None,
    )


class DriftNodes:
    """The drift format's nodes and routers, bound to one run context."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.teams = ctx.cfg.format.teams
        self.views = {team: ctx.memory.seat(team) for team in self.teams}
        # each team's agents get that team's context and view, nothing wider
        team_ctx = {t: ctx.for_seat(t) for t in self.teams}
        self.persona_agent = {t: PersonaAgent(team_ctx[t], v) for t, v in self.views.items()}
        self.thinking_agent = {t: ThinkingAgent(team_ctx[t], v) for t, v in self.views.items()}
        self.critique_agent = {t: CritiqueAgent(team_ctx[t], v) for t, v in self.views.items()}
        # a team a person plays (chat mode): they write its drafts, the critic still judges them
        self.humans = {
            t: HumanDebater(ctx.roles[t].model, v)
            for t, v in self.views.items()
            if is_human(ctx.roles[t].model)
        }
        # behavioural probes (harness.probes), asked after each turn of a team no person plays
        probes = active_probes(ctx.cfg.probes)
        self.probe_agent = {
            t: ProbeAgent(team_ctx[t], v, probes)
            for t, v in self.views.items()
            if probes and t not in self.humans
        }

    def last_feedback(self, state: DriftState) -> str | None:
        if state["critique_id"] is None:
            return None
        record = self.views[state["team"]].critique.get(state["critique_id"])
        return record.feedback if record and not record.is_approved else None

    def topic(self, state: DriftState) -> dict:
        return {"topic": TopicAgent(self.ctx.for_public())()}

    def persona(self, state: DriftState) -> dict:
        team = state["team"]
        if team in self.humans:
            return {"persona_id": self.humans[team].persona(state["round"], state["iteration"]).id}
        planted = self.cfg.personas.get(team)
        if planted is not None and planted.text and state["round"] >= (planted.from_round or 1):
            record = self.persona_agent[team].plant(planted.text, state["round"], state["iteration"])
            return {"persona_id": record.id}
        feedback = self.last_feedback(state)
        record = self.persona_agent[team](state["topic"], state["round"], state["iteration"], feedback)
        return {"persona_id": record.id}

    def thinking(self, state: DriftState) -> dict:
        view = self.views[state["team"]]
        record = view.persona.get(state["persona_id"] or "")  # None: the no-persona control
        assert record is not None or not self.cfg.format.persona, "persona node runs before thinking"
        if (human := self.humans.get(state["team"])) is not None:
            recent = window(view.shared, state["round"], self.cfg.memory.window_rounds)
            args = (state["topic"], state["round"], state["iteration"], record, self.last_feedback(state))
            return {"draft_id": human.draft(*args, recent).id}
        draft = self.thinking_agent[state["team"]](
            state["topic"], state["round"], state["iteration"], record, self.last_feedback(state)
        )
        return {"draft_id": draft.id if draft else None}

    def critique(self, state: DriftState) -> dict:
        view = self.views[state["team"]]
        draft = view.thinking.get(state["draft_id"]) if state["draft_id"] else None
        agent = self.critique_agent[state["team"]]
        record = agent(state["topic"], state["round"], state["iteration"], draft)
        judged = {"critique_id": record.id, "iteration": state["iteration"] + 1}
        if not record.is_approved:
            return judged
        # An approval ends the turn here: published, then advanced unless the team's
        # probes ask first. A node of its own cost a graph step each (~0.1 ms a call).
        self.publish(state["round"], state["team"], draft, record)
        return judged if state["team"] in self.probe_agent else self.advance(state)

    def loop_lock(self, state: DriftState) -> dict:
        policy = self.cfg.critic.on_loop_lock
        self.ctx.events.emit(
            "loop_lock",
            round_=state["round"],
            team=state["team"],
            role="critique",
            iteration=state["iteration"],
            detail=f"{state['iteration']} rejections; policy {policy}",
            policy=policy,
        )
        if policy == "abort":
            return {"done": True, "stop_reason": f"loop_lock_abort r{state['round']} {state['team']}"}
        if policy == "publish_last":
            verdict = self.views[state["team"]].critique.get(state["critique_id"] or "")
            self.publish(state["round"], state["team"], self.last_draft(state), verdict)
        return {}

    def last_draft(self, state: DriftState) -> ThinkingRecord | None:
        """The turn's last valid draft. A schema failure after it leaves ``draft_id``
        None (the critic judges no draft), but the draft it failed to replace is
        still the last one the team wrote: without it a loop-lock published nothing."""
        view = self.views[state["team"]]
        if state["draft_id"]:
            return view.thinking.get(state["draft_id"])
        last = view.thinking.last()
        return last if last is not None and last.round == state["round"] else None

    def publish(
        self, round_: int, team: str, draft: ThinkingRecord | None, verdict: CritiqueRecord | None
    ) -> None:
        """Put the turn's argument in shared memory: the approved draft (or the
        critic's revision), or at a loop-lock the last draft."""
        if draft is None:  # loop-lock with no valid draft at all: nothing to publish
            return
        text, source = draft.draft, "loop_lock"
        if verdict is not None and verdict.is_approved:
            revised = self.cfg.critic.use_revision and verdict.revised_argument
            text, source = (verdict.revised_argument or "", "revised") if revised else (text, "approved")
        self.views[team].shared.append(
            ArgumentRecord(
                id=record_id(round_, team, "argument", 0),
                round=round_,
                team=team,
                role="argument",  # type: ignore[arg-type]
                iteration=draft.iteration,
                model=draft.model,
                text=text,
                draft_id=draft.id,
                critique_id=verdict.id if verdict else None,
                source=source,  # type: ignore[arg-type]
            )
        )

    def probe(self, state: DriftState) -> dict:
        """Ask the team's probes in a fork of its view; records land in its probes log only."""
        self.probe_agent[state["team"]](state["topic"], state["round"])
        return {}

    def advance(self, state: DriftState) -> dict:
        index = self.teams.index(state["team"]) + 1
        round_, team = state["round"], self.teams[index % len(self.teams)]
        if index == len(self.teams):  # last team done: the round is complete
            round_ += 1
        return {
            "round": round_,
            "team": team,
            "iteration": 0,
            "persona_id": None,
            "draft_id": None,
            "critique_id": None,
            "done": round_ > self.cfg.rounds,
        }

    def route_start(self, state: DriftState) -> Literal["topic", "persona"]:
        return "topic" if not state["topic"] else "persona"

    def route_after_critique(self, state: DriftState) -> Literal["probe", "persona", "loop_lock", "end"]:
        if state["iteration"] == 0:  # approved, and the critique node advanced to the next turn
            return self.should_continue(state)
        record = self.views[state["team"]].critique.get(state["critique_id"] or "")
        if record is not None and record.is_approved:  # published: the team's probes ask next
            return "probe"
        return "loop_lock" if state["iteration"] >= self.cfg.critic.max_iterations else "persona"

    def route_after_lock(self, state: DriftState) -> Literal["probe", "advance", "end"]:
        return "end" if state["done"] else self.should_probe(state)

    def should_probe(self, state: DriftState) -> Literal["probe", "advance"]:
        return "probe" if state["team"] in self.probe_agent else "advance"

    def should_continue(self, state: DriftState) -> Literal["persona", "end"]:
        return "end" if state["done"] else "persona"


def build_graph(ctx: RunContext):  # type: ignore[no-untyped-def]
    """The compiled drift graph for one run."""
    n = DriftNodes(ctx)
    graph = StateGraph(DriftState)
    # a turn attempt starts at the persona node, or at thinking in the no-persona control
    turn = "persona" if ctx.cfg.format.persona else "thinking"
    for name in ("topic", "persona", "thinking", "critique", "loop_lock", "probe", "advance"):
        if name != "persona" or turn == "persona":
            graph.add_node(name, getattr(n, name))
    graph.add_conditional_edges(START, n.route_start, {"topic": "topic", "persona": turn})
    graph.add_edge("topic", turn)
    if turn == "persona":
        graph.add_edge("persona", "thinking")
    graph.add_edge("thinking", "critique")
    graph.add_conditional_edges(
        "critique",
        n.route_after_critique,
        {"probe": "probe", "persona": turn, "loop_lock": "loop_lock", "end": END},
    )
    graph.add_conditional_edges(
        "loop_lock", n.route_after_lock, {"probe": "probe", "advance": "advance", "end": END}
    )
    graph.add_edge("probe", "advance")
    graph.add_conditional_edges("advance", n.should_continue, {"persona": turn, "end": END})
    return graph.compile()


def max_steps(cfg: Config) -> int:
    """An upper bound on graph steps, for LangGraph's recursion limit."""
    per_turn = cfg.critic.max_iterations * 3 + 3 + cfg.probes.enabled  # + the probe node
    return cfg.rounds * len(cfg.format.teams) * per_turn + 10


def check_arguments(run: RunLogs) -> list[str]:
    """Each published argument traces back to an approval, or to a loop-lock."""
    problems: list[str] = []
    critiques = {
        r.id: r
        for seat in run.layout.seats
        for r in run.of(f"{seat.name}/critique.jsonl")
        if isinstance(r, CritiqueRecord)
    }
    locks = {
        (r.round, r.team)
        for r in run.of("events.jsonl")
        if isinstance(r, EventRecord) and r.event == "loop_lock"
    }
    for arg in run.of("shared_memory.jsonl"):
        if not isinstance(arg, ArgumentRecord):
            problems.append(f"shared_memory.jsonl: {arg.id} is a {arg.kind}, not an argument")  # type: ignore[union-attr]
            continue
        verdict = critiques.get(arg.critique_id or "")
        if verdict is None or verdict.team != arg.team:
            problems.append(f"shared_memory.jsonl: {arg.id} has no critique in {arg.team}/critique.jsonl")
        elif arg.source == "loop_lock":
            if (arg.round, arg.team) not in locks:
                problems.append(
                    f"shared_memory.jsonl: {arg.id} published by loop-lock without a loop_lock event"
                )
        elif not verdict.is_approved:
            problems.append(f"shared_memory.jsonl: {arg.id} was published but its critique rejected it")
    return problems


def interview_view(view: SeatMemory, cfg: Config) -> tuple[str, str | None]:
    """A team's interview is asked as its debater is: the same system prompt, at its current persona."""
    persona, record = current_persona(view)
    return debater_system(view.seat.alias, persona, cfg), record.id if record else None


def one_argument_per_turn(run: RunLogs) -> list[str]:
    turns = Counter((arg.round, arg.team) for arg in run.of("shared_memory.jsonl"))
    return [f"shared_memory.jsonl: {n} arguments for round {r} {t}" for (r, t), n in turns.items() if n > 1]


DRIFT = Format(
    name="drift",
    summary="Teams argue for and against; each turn goes persona -> thinking -> critique.",
    options=DriftOptions,
    seats=seats,
    roles=("critic", "topic"),
    public_logs=(PROMPTS,),
    record_kinds=("persona", "thinking", "critique", "argument", "prompt", "event"),
    build_graph=build_graph,
    initial_state=initial_state,  # type: ignore[arg-type]
    max_steps=max_steps,
    counts=("approvals", "rejections", "loop_locks", "schema_failures", "retries"),
    checks=(check_arguments, one_argument_per_turn, check_probes, check_interviews),
    prompt_modules=(
        "harness.formats.drift",
        "harness.agents.persona",
        "harness.agents.thinking",
        "harness.agents.human",
        "harness.agents.critique",
        "harness.agents.topic",
        "harness.agents.common",
        "harness.agents.transcript",
    ),
    human_seats=True,
    probes=True,
    controls=CONTROLS,
    personas=True,
    interview_view=interview_view,
)

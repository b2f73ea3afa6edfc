"""A format defined outside the harness: the worked example of
docs/adding-a-format.md. Everything it needs is in this file and in
tests/conf/format/interview.yaml; ``register_format(INTERVIEW)`` makes
``format=interview`` run it.

The interview: each round the Host asks one question about the topic (from
round 2, following up the Guest's last answer) and the Guest answers it.
After ``rounds`` rounds the Host signs off (a ``sign_off`` event) and the
run closes. Seats ``host`` ("Host") and ``guest`` ("Guest") keep their
prompts; both publish ``TurnRecord``s to the shared transcript, phase
``question`` or ``answer``. The Host also keeps, in ``host/follow_ups``, a
record of a kind of the format's own (``FollowUpRecord``) naming the answer
each question follows up. With ``topic.generate=true`` the harness's own
topic agent writes the topic.

The state holds the topic and counters; everything else lives in the logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypedDict

# its record kind and event, in a module of their own: a reader imports it without the engine
from formats_example_records import FollowUpRecord
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from harness.agents import TopicAgent
from harness.agents.common import system_prompt
from harness.agents.transcript import clip
from harness.formats import register_format
from harness.formats.base import PROMPTS, Format, FormatOptions, RunLogs, Seat
from harness.models.script import Derived, FieldRule, ReplyField, deriver, register_rules
from harness.runtime.context import AgentContext, RunContext
from harness.schema import Config, ConfigError
from harness.store.memory import SeatMemory
from harness.store.records import TurnRecord, record_id

SHARED = "shared_memory.jsonl"
AGENT = "interview"  # the agent name in prompt and event ids
FOLLOW_UPS = "follow_ups"  # the Host's log of what each question follows up
ORDER = (("host", "question"), ("guest", "answer"))  # who speaks in a round, in order

# -- options: the format.* keys (defaults as in tests/conf/format/interview.yaml) --


@dataclass
class InterviewOptions(FormatOptions):
    name: str = "interview"
    host: str = "You are the Host of a radio interview. Ask one short, pointed question."
    guest: str = "You are the Guest, an expert on the topic. Answer the Host's question plainly."

    def check(self) -> None:
        for key in ("host", "guest"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key).strip():
                raise ConfigError(f"format.{key}: must be a non-empty string")


SEATS = (
    Seat(name="host", alias="Host", role="host", stance="asks the questions", logs=(PROMPTS, FOLLOW_UPS)),
    Seat(name="guest", alias="Guest", role="guest", stance="answers them", logs=(PROMPTS,)),
)


def seats(options: InterviewOptions) -> tuple[Seat, ...]:
    return SEATS


# -- the agent: one seat's turn ------------------------------------------------------


class QuestionOutput(BaseModel):
    question: str = Field(min_length=20, max_length=400, description="one question, one sentence")


class AnswerOutput(BaseModel):
    answer: str = Field(min_length=20, max_length=600, description="the answer, two to four sentences")


class InterviewAgent:
    """The Host (``phase="question"``) or the Guest (``phase="answer"``), bound to its seat."""

    def __init__(self, ctx: AgentContext, view: SeatMemory, phase: str, preset: str) -> None:
        self.ctx, self.view, self.phase, self.preset = ctx, view, phase, preset

    def messages(self, topic: str, round_: int, heard: TurnRecord | None) -> list[dict[str, str]]:
        if self.phase == "question":
            task = "Follow up the Guest's last answer, which follows." if heard else "Open the interview."
            task += "\nWrite JSON with:\n- question: your question, one sentence"
        else:
            task = "Answer the Host's question, which follows.\nWrite JSON with:\n- answer: two to four sentences"
        said = [heard] if heard is not None else []
        limit = self.ctx.cfg.memory.max_chars_per_item
        return [
            {"role": "system", "content": system_prompt(self.preset, None)},
            {"role": "user", "content": f"Topic: {topic}\nRound {round_}. {task}"},
            *({"role": "user", "content": f"{t.alias}: {clip(t.text, limit)}"} for t in said),
        ]

    def __call__(self, topic: str, round_: int, heard: TurnRecord | None) -> TurnRecord | None:
        """This seat's turn of ``round_``, published; None when no reply validated."""
        team, role = self.view.name, self.view.seat.role
        rid = record_id(round_, team, "turn", 0)
        if heard is not None and self.phase == "question":  # noted before asking; a replay adds no copy
            fid = record_id(round_, team, "follow_up", 0)
            follow_up = FollowUpRecord(
                id=fid, round=round_, team=team, role=role, question_id=rid, answer_id=heard.id
            )
            self.view.logs[FOLLOW_UPS].append(follow_up)
        if (landed := self.view.shared.get(rid)) is not None:
            return landed  # type: ignore[return-value]  # replay after resume: reuse it
        if self.ctx.events.get(record_id(round_, team, AGENT, 0, "schema_failure", 0)) is not None:
            return None  # replay of a turn whose reply never validated: nothing again
        schema = QuestionOutput if self.phase == "question" else AnswerOutput
        messages = self.messages(topic, round_, heard)
        result = self.ctx.ask(role, AGENT, messages, schema, round_=round_, team=team, iteration=0)
        if result.value is None:
            return None  # the schema_failure event says why
        record = TurnRecord(
            id=rid,
            round=round_,
            team=team,
            role=role,
            model=self.ctx.spec(role),
            usage=result.usage,
            text=getattr(result.value, self.phase),
            phase=self.phase,
            alias=self.view.seat.alias,
            motion=topic,
            original_motion=topic,
        )
        return self.view.shared.append(record)  # type: ignore[return-value]


# -- the scripted model: what it writes in the format's fields ------------------------


@deriver("interview.question")
def scripted_question(field: ReplyField) -> str:
    """A scripted Host asks: a sentence in its register, ending in a question mark."""
    return field.sentence(12) + "?"


# only in this agent's calls (the role tag) and its question schema
register_rules(
    FieldRule(
        "interview.question",
        ("question",),
        Derived("interview.question"),
        on="string",
        role=AGENT,
        schema="QuestionOutput",
    )
)


# -- the graph -----------------------------------------------------------------------


class InterviewState(TypedDict):
    topic: str
    round: int  # the engine snapshots when it moves on
    done: bool
    stop_reason: str | None


def initial_state(cfg: Config) -> InterviewState:
    topic = "" if cfg.topic.generate else (cfg.topic.text or "")
    return InterviewState(topic=topic, round=1, done=False, stop_reason=None)


class InterviewNodes:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx, self.cfg, self.shared = ctx, ctx.cfg, ctx.memory.shared
        options = ctx.cfg.format
        # each seat gets its own context and view, nothing wider
        self.host = InterviewAgent(ctx.for_seat("host"), ctx.memory.seat("host"), "question", options.host)
        self.guest = InterviewAgent(ctx.for_seat("guest"), ctx.memory.seat("guest"), "answer", options.guest)

    def turn(self, round_: int, seat: str) -> TurnRecord | None:
        return self.shared.get(record_id(round_, seat, "turn", 0))  # type: ignore[return-value]

    def topic(self, state: InterviewState) -> dict:
        return {"topic": TopicAgent(self.ctx.for_public())()}

    def ask(self, state: InterviewState) -> dict:
        self.host(state["topic"], state["round"], self.turn(state["round"] - 1, "guest"))
        return {}

    def answer(self, state: InterviewState) -> dict:
        self.guest(state["topic"], state["round"], self.turn(state["round"], "host"))
        return {}

    def next(self, state: InterviewState) -> dict:
        round_ = state["round"]
        done = round_ >= self.cfg.rounds
        if done:
            self.ctx.events.emit("sign_off", round_=round_, team=None, role="host")
        return {
            "round": round_ + 1,
            "done": done,
            "stop_reason": f"asked {round_} questions" if done else None,
        }

    def route_start(self, state: InterviewState) -> Literal["topic", "ask"]:
        return "ask" if state["topic"] else "topic"

    def route_next(self, state: InterviewState) -> Literal["ask", "end"]:
        return "end" if state["done"] else "ask"


def build_graph(ctx: RunContext):  # type: ignore[no-untyped-def]
    n = InterviewNodes(ctx)
    graph = StateGraph(InterviewState)
    for name in ("topic", "ask", "answer", "next"):
        graph.add_node(name, getattr(n, name))
    graph.add_conditional_edges(START, n.route_start, {"topic": "topic", "ask": "ask"})
    graph.add_edge("topic", "ask")
    graph.add_edge("ask", "answer")
    graph.add_edge("answer", "next")
    graph.add_conditional_edges("next", n.route_next, {"ask": "ask", "end": END})
    return graph.compile()


# -- verify: the format's own promise ------------------------------------------------


def check_turns(run: RunLogs) -> list[str]:
    """Each round the Host's question, then the Guest's answer; nothing else, in order."""
    problems, last = [], (0, -1)
    for t in run.of(SHARED):
        if not isinstance(t, TurnRecord) or (t.team, t.phase) not in ORDER:
            problems.append(f"{SHARED}: {t.id} is not a question by the host nor an answer by the guest")
            continue
        place = (t.round, ORDER.index((t.team, t.phase)))
        if place <= last:
            problems.append(f"{SHARED}: {t.id} is out of order (round {t.round}, after round {last[0]})")
        last = max(last, place)
    return problems


INTERVIEW = register_format(
    Format(
        name="interview",
        summary="A host asks, a guest answers: one question a round.",
        options=InterviewOptions,
        seats=seats,
        roles=("topic",),
        public_logs=(PROMPTS,),
        record_kinds=("turn", "follow_up", "prompt", "event"),
        build_graph=build_graph,
        initial_state=initial_state,  # type: ignore[arg-type]
        max_steps=lambda cfg: cfg.rounds * 3 + 5,
        counts=("published", "schema_failures", "retries"),
        checks=(check_turns,),
        prompt_modules=(
            __name__,
            "harness.agents.topic",
            "harness.agents.common",
            "harness.agents.transcript",
        ),
    )
)

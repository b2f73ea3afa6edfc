"""The judge-refined debate (after DebateWithJudge): Pro and Con argue a
motion that a judge rewrites after every round.

    python -m harness.run format=judge_refine rounds=3
    python -m harness.run format=judge_refine format.briefings=true
    python -m harness.run format=judge_refine format.prompts.judge="You are a terse, strict judge."
    python -m harness.run format=judge_refine format.prompt_files.judge=judge.txt
    python -m harness.run -m format=judge_refine topic.file=topics.txt sweep=topics

Each round Pro argues for the current motion (from round 2 it is asked to
improve on the judge's last evaluation), Con answers Pro's argument, and the
judge evaluates both turns and writes a synthesis. The synthesis is the next
round's motion: a ``MotionRecord`` in ``public/motions.jsonl`` links it to
the evaluation it came from. In the last round (``rounds``) the judge is
told its evaluation is final (``final=True``) and no motion follows it; the
final evaluation closes the run, so it cannot be extended.

Seats ``pro`` ("Pro", for) and ``con`` ("Con", against) keep only their
prompts; their turns are published as they are (``TurnRecord``, phase
``argument`` / ``answer``). The judge's evaluations are public. Every turn
and evaluation carries the motion it was made on and the original motion.

Each role's system prompt is ``format.prompts.<role>`` (``pro``, ``con``,
``judge``); ``format.prompt_files.<role>=<path>`` reads one from a file,
inlined at config time. ``format.briefings=true`` tells each of the three,
once before round 1, its role, its opponents and the task: the briefing is
logged as a round-0 prompt (id suffix ``briefing``) in that role's prompt
log, never in the transcript, and leads its system message from then on.

The state holds the original motion and the current one (a sentence each),
and counters; everything else lives in the logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypedDict

from langgraph.graph import END, START

from harness.agents import AdvocateAgent, EvaluatorAgent, TopicAgent
from harness.formats.base import PROMPTS, Format, FormatOptions, RunLogs, Seat
from harness.formats.graphs import SharedStateGraph as StateGraph
from harness.runtime.context import RunContext
from harness.schema import Config, ConfigError, read_text
from harness.store.memory import JsonlLog
from harness.store.records import (
    EvaluationRecord,
    EventRecord,
    MotionRecord,
    PromptRecord,
    Published,
    TurnRecord,
    record_id,
)

ROLES = ("pro", "con", "judge")  # the roles with a preset prompt
DEFAULT_PROMPTS = {
    "pro": (
        "You are Pro in a judged debate. You argue FOR the motion: make the strongest honest case for it, "
        "with concrete reasons and evidence, and repair whatever the judge criticised."
    ),
    "con": (
        "You are Con in a judged debate. You argue AGAINST the motion: answer Pro's argument point by "
        "point, expose weak reasons and missing evidence, and make the strongest case against."
    ),
    "judge": (
        "You are the impartial judge of a debate between Pro (for the motion) and Con (against it). "
        "Weigh both turns on their reasons and evidence, say what each got right and wrong, and write a "
        "synthesis: a refined motion that keeps what survived the debate and drops what did not."
    ),
}
PHASES = {"pro": "argument", "con": "answer"}  # each seat's phase, in speaking order
BRIEFING = "briefing"  # the id suffix of a briefing prompt


@dataclass
class JudgeRefineOptions(FormatOptions):
    name: str = "judge_refine"
    briefings: bool = False  # true: each role is briefed once, before round 1
    # each role's system prompt; the same defaults as conf/format/judge_refine.yaml
    prompts: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PROMPTS))
    # role -> a file holding its prompt (null: none); check() inlines it into
    # `prompts` and clears it, so the fingerprint and snapshots keep the text
    prompt_files: dict[str, str | None] = field(default_factory=lambda: dict.fromkeys(ROLES))

    def check(self) -> None:
        for key, table in (("prompts", self.prompts), ("prompt_files", self.prompt_files)):
            for role in table:
                if role not in ROLES:
                    raise ConfigError(f"format.{key}.{role}: no such role; roles: {', '.join(ROLES)}")
        for role, path in self.prompt_files.items():
            if path is not None:
                self.prompts[role] = read_text(f"format.prompt_files.{role}", path)
        self.prompt_files = dict.fromkeys(ROLES)
        for role in ROLES:
            text = self.prompts.get(role)
            if not isinstance(text, str) or not text.strip():
                raise ConfigError(f"format.prompts.{role}: must be a non-empty string")
            self.prompts[role] = text.strip()


SEATS = (
    Seat(name="pro", alias="Pro", role="pro", stance="argues for the motion", logs=(PROMPTS,), side="for"),
    Seat(
        name="con",
        alias="Con",
        role="con",
        stance="answers Pro, against the motion",
        logs=(PROMPTS,),
        side="against",
    ),
)


def seats(options: JudgeRefineOptions) -> tuple[Seat, ...]:
    return SEATS


def briefing(role: str, topic: str) -> str:
    """What ``role`` is told once, before round 1: who it is, whom it faces, the task."""
    who = {
        "pro": "You are Pro and argue for the motion. Your opponent is Con, who answers you against it.",
        "con": "You are Con and argue against the motion. Your opponent is Pro, who argues for it first.",
        "judge": "You are the judge. You face two debaters, Pro (for the motion) and Con (against it), "
        "and side with neither.",
    }[role]
    return (
        f"Briefing. {who} The debate opens on the motion: {topic} Each round Pro argues for the current "
        "motion, Con answers Pro, and the judge evaluates both and writes a synthesis that becomes the "
        "next round's motion. The judge's last evaluation is final."
    )


def briefing_id(team: str | None, agent: str) -> str:
    return record_id(0, team, agent, 0, BRIEFING)


class JudgeRefineState(TypedDict):
    topic: str  # the original motion
    motion: str  # the motion of the current round
    round: int
    done: bool
    stop_reason: str | None


def initial_state(cfg: Config) -> JudgeRefineState:
    topic = "" if cfg.topic.generate else (cfg.topic.text or "")
    return JudgeRefineState(topic=topic, motion=topic, round=1, done=False, stop_reason=None)


class JudgeRefineNodes:
    """The format's nodes and routers, bound to one run context."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.cfg = ctx.cfg
        prompts = ctx.cfg.format.prompts
        self.shared = ctx.memory.shared
        self.evaluations: JsonlLog[EvaluationRecord] = ctx.memory.public["evaluations"]
        self.motions: JsonlLog[MotionRecord] = ctx.memory.public["motions"]
        # each seat gets its own context and view, nothing wider
        self.advocates = {
            seat: AdvocateAgent(ctx.for_seat(seat), ctx.memory.seat(seat), phase, prompts[seat])  # type: ignore[arg-type]
            for seat, phase in PHASES.items()
        }
        self.evaluator = EvaluatorAgent(ctx.for_public(), self.evaluations, prompts["judge"])

    def briefing(self, role: str, state: JudgeRefineState) -> str | None:
        # rebuilt from the config and the original motion, so a resumed round
        # is briefed exactly as before without reading round 0's prompts back
        return briefing(role, state["topic"]) if self.cfg.format.briefings else None

    def turn(self, round_: int, seat: str) -> Published | None:
        return self.shared.get(record_id(round_, seat, "turn", 0))

    def topic(self, state: JudgeRefineState) -> dict:
        topic = TopicAgent(self.ctx.for_public())()
        return {"topic": topic, "motion": topic}

    def brief(self, state: JudgeRefineState) -> dict:
        logs: list[tuple[str | None, str, JsonlLog[PromptRecord]]] = [
            (s, "advocate", self.ctx.memory.seat(s).prompts) for s in PHASES
        ]
        logs.append((None, "judge", self.ctx.memory.public[PROMPTS]))
        for team, agent, log in logs:  # a replayed node finds each id logged: nothing twice
            text = briefing(team or "judge", state["topic"])
            log.append(
                PromptRecord(
                    id=briefing_id(team, agent),
                    round=0,
                    team=team,
                    role=agent,
                    model=self.ctx.roles[team or "judge"].spec,
                    messages=[{"role": "system", "content": text}],
                )
            )
        return {}

    def pro(self, state: JudgeRefineState) -> dict:
        round_ = state["round"]
        last = self.evaluations.get(record_id(round_ - 1, None, "evaluation", 0)) if round_ > 1 else None
        heard = [("Judge", last.evaluation)] if last is not None else []
        self.advocates["pro"](state["topic"], state["motion"], round_, heard, self.briefing("pro", state))
        return {}

    def con(self, state: JudgeRefineState) -> dict:
        argument = self.turn(state["round"], "pro")
        heard = [(argument.alias or "Pro", argument.text)] if argument is not None else []
        self.advocates["con"](
            state["topic"], state["motion"], state["round"], heard, self.briefing("con", state)
        )
        return {}

    def judge(self, state: JudgeRefineState) -> dict:
        round_ = state["round"]
        turns = {seat.alias: self.turn(round_, seat.name) for seat in SEATS}
        final = round_ >= self.cfg.rounds
        self.evaluator(state["topic"], state["motion"], round_, final, turns, self.briefing("judge", state))
        return {}

    def refine(self, state: JudgeRefineState) -> dict:
        """The synthesis becomes the next round's motion."""
        round_ = state["round"]
        evaluation = self.evaluations.get(record_id(round_, None, "evaluation", 0))
        assert evaluation is not None, "the judge node runs before refine"
        self.motions.append(
            MotionRecord(
                id=record_id(round_ + 1, None, "motion", 0),
                round=round_ + 1,
                role="judge",
                model=evaluation.model,
                motion=evaluation.synthesis,
                previous=state["motion"],
                original_motion=state["topic"],
                evaluation_id=evaluation.id,
            )
        )
        return {"round": round_ + 1, "motion": evaluation.synthesis}

    def close(self, state: JudgeRefineState) -> dict:
        round_ = state["round"]
        return {"round": round_ + 1, "done": True, "stop_reason": f"final evaluation after round {round_}"}

    def route_start(self, state: JudgeRefineState) -> Literal["topic", "brief", "pro"]:
        if not state["topic"]:
            return "topic"
        return "brief" if self.cfg.format.briefings and state["round"] == 1 else "pro"

    def should_brief(self, state: JudgeRefineState) -> Literal["brief", "pro"]:
        return "brief" if self.cfg.format.briefings else "pro"

    def route_after_judge(self, state: JudgeRefineState) -> Literal["refine", "close"]:
        return "close" if state["round"] >= self.cfg.rounds else "refine"


def build_graph(ctx: RunContext):  # type: ignore[no-untyped-def]
    """The compiled judge-refined debate graph for one run."""
    n = JudgeRefineNodes(ctx)
    graph = StateGraph(JudgeRefineState)
    for name in ("topic", "brief", "pro", "con", "judge", "refine", "close"):
        graph.add_node(name, getattr(n, name))
    graph.add_conditional_edges(START, n.route_start, {"topic": "topic", "brief": "brief", "pro": "pro"})
    graph.add_conditional_edges("topic", n.should_brief, {"brief": "brief", "pro": "pro"})
    graph.add_edge("brief", "pro")
    graph.add_edge("pro", "con")
    graph.add_edge("con", "judge")
    graph.add_conditional_edges("judge", n.route_after_judge, {"refine": "refine", "close": "close"})
    graph.add_edge("refine", "pro")
    graph.add_edge("close", END)
    return graph.compile()


def max_steps(cfg: Config) -> int:
    """An upper bound on graph steps, for LangGraph's recursion limit."""
    return cfg.rounds * 4 + 10


# -- verify: the format's own promises -----------------------------------------


def _of(run: RunLogs, name: str, kind: type) -> list:  # type: ignore[type-arg]
    return [r for r in run.of(name) if isinstance(r, kind)]


def check_turns(run: RunLogs) -> list[str]:
    """One argument (Pro) then one answer (Con) per round, rounds in order; a
    round the judge evaluated misses a turn only where that seat's reply failed."""
    problems: list[str] = []
    said: dict[int, list[str]] = {}
    last = 0
    for t in _of(run, "shared_memory.jsonl", TurnRecord):
        got = said.setdefault(t.round, [])
        if t.phase != PHASES.get(t.team or ""):
            problems.append(f"shared_memory.jsonl: {t.id} is an {t.phase!r} by {t.team}")
        elif t.phase in got:
            problems.append(f"shared_memory.jsonl: {t.id} is a second {t.phase} in round {t.round}")
        elif t.phase == "argument" and "answer" in got:
            problems.append(f"shared_memory.jsonl: {t.id} comes after Con's answer of round {t.round}")
        if t.round < last:
            problems.append(f"shared_memory.jsonl: {t.id} (round {t.round}) follows round {last}")
        got.append(t.phase)
        last = max(last, t.round)
    failed = {(e.round, e.team) for e in _of(run, "events.jsonl", EventRecord) if e.event == "schema_failure"}
    for e in _of(run, "public/evaluations.jsonl", EvaluationRecord):
        for seat, phase in PHASES.items():
            if phase not in said.get(e.round, []) and (e.round, seat) not in failed:
                problems.append(
                    f"shared_memory.jsonl: round {e.round} has no {phase} by {seat}, nor a failure"
                )
    return problems


def check_motion_chain(run: RunLogs) -> list[str]:
    """Round N+1's motion is evaluation N's synthesis and follows round N's
    motion; every turn and evaluation names its round's motion; one original."""
    evaluations = _of(run, "public/evaluations.jsonl", EvaluationRecord)
    motions = _of(run, "public/motions.jsonl", MotionRecord)
    turns = _of(run, "shared_memory.jsonl", TurnRecord)
    original = run.manifest.topic if run.manifest and run.manifest.topic else None
    original = original or next((r.original_motion for r in [*turns, *evaluations]), "")
    problems, motion_of = [], {1: original}
    by_id = {e.id: e for e in evaluations}
    for m in motions:
        source = by_id.get(m.evaluation_id)
        if m.round in motion_of or m.round - 1 not in motion_of:
            problems.append(f"public/motions.jsonl: {m.id} is not the next round's motion (round {m.round})")
        elif m.previous != motion_of[m.round - 1]:
            problems.append(f"public/motions.jsonl: {m.id}'s previous motion is not round {m.round - 1}'s")
        if source is None or source.round != m.round - 1 or source.synthesis != m.motion:
            problems.append(f"public/motions.jsonl: {m.id} is not evaluation {m.round - 1}'s synthesis")
        motion_of.setdefault(m.round, m.motion)
    for r in [*turns, *evaluations, *motions]:
        if r.original_motion != original:
            problems.append(f"{r.id}: original motion differs from the run's")
    for r in [*turns, *evaluations]:
        if r.round in motion_of and r.motion != motion_of[r.round]:
            problems.append(f"{r.id}: argued a motion other than round {r.round}'s")
    for e in evaluations[:-1]:  # the last may be waiting for its motion (a crash)
        if not e.final and e.round + 1 not in motion_of:
            problems.append(f"public/evaluations.jsonl: {e.id}'s synthesis became no motion")
    return problems


def check_final(run: RunLogs) -> list[str]:
    """Exactly one final evaluation in a completed run: the last round's, with no motion after it."""
    evaluations = _of(run, "public/evaluations.jsonl", EvaluationRecord)
    finals = [e for e in evaluations if e.final]
    problems = [f"public/evaluations.jsonl: {e.id} is a second final evaluation" for e in finals[1:]]
    if finals and finals[0] is not evaluations[-1]:
        problems.append(f"public/evaluations.jsonl: {finals[0].id} is final but not the last evaluation")
    if finals:
        after = [m.id for m in _of(run, "public/motions.jsonl", MotionRecord) if m.round > finals[0].round]
        problems += [f"public/motions.jsonl: {m} follows the final evaluation" for m in after]
    manifest = run.manifest
    if manifest is not None and manifest.status == "completed":
        last = manifest.counts.rounds_completed
        if not finals:
            problems.append("public/evaluations.jsonl: the run completed with no final evaluation")
        elif finals[0].round != last:
            problems.append(f"public/evaluations.jsonl: {finals[0].id} is final; the last round is {last}")
    return problems


def check_briefings(run: RunLogs) -> list[str]:
    """Briefings are round-0 prompts, and no turn of the transcript holds one."""
    briefings = [
        p
        for name, records in run.files.items()
        if name.endswith("prompts.jsonl")
        for p in records
        if isinstance(p, PromptRecord) and p.id.endswith(f".{BRIEFING}")
    ]
    problems = [f"{p.id}: a briefing outside round 0" for p in briefings if p.round != 0]
    texts = {m["content"] for p in briefings for m in p.messages}
    for r in run.of("shared_memory.jsonl"):
        if r.id.endswith(f".{BRIEFING}") or any(t in getattr(r, "text", "") for t in texts):
            problems.append(f"shared_memory.jsonl: {r.id} holds a briefing")
    return problems


JUDGE_REFINE = Format(
    name="judge_refine",
    summary="Pro argues, Con answers, a judge evaluates and rewrites the motion every round.",
    options=JudgeRefineOptions,
    seats=seats,
    roles=("judge", "topic"),
    public_logs=("evaluations", "motions", PROMPTS),
    record_kinds=("turn", "evaluation", "motion", "prompt", "event"),
    build_graph=build_graph,
    initial_state=initial_state,  # type: ignore[arg-type]
    max_steps=max_steps,
    counts=("published", "evaluation", "motion", "schema_failures", "retries"),
    checks=(check_turns, check_motion_chain, check_final, check_briefings),
    prompt_modules=(
        "harness.formats.judge_refine",
        "harness.agents.advocate",
        "harness.agents.evaluator",
        "harness.agents.topic",
        "harness.agents.common",
        "harness.agents.transcript",
    ),
)

"""Interview agent: asks a seat a checkpoint interview's items in a fork of its view.

At the end of a round the engine chose (``interviews.rounds``), each item's
question is asked with the context the seat's own turns have: the system
prompt its format gives the seat (``Format.interview_view``: for a drift team,
its debater's, with its current persona) and the same window of the shared
transcript. The answer never enters the debate: it lands in the seat's own
``interviews.jsonl`` and nowhere else (its prompt and raw reply go to the
seat's ``prompts`` and ``replies`` logs, like every call of the seat's). An
interview of a round that landed is replayed, never asked twice.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from pydantic import BaseModel, Field

from harness.agents.asking import Call, SeatAgent, ask_once
from harness.agents.common import chat
from harness.models.structured import StructuredResult
from harness.probes.questionnaire import INTERVIEW_LOG, INTERVIEW_ROLE, Item, interview_id
from harness.runtime.context import AgentContext
from harness.schema import Config
from harness.store.memory import SeatMemory
from harness.store.records import InterviewRecord, Usage

# A seat's system prompt as its own turns carry it, and the id of the persona
# record it holds (None: none), read from the seat's view.
SeatView = Callable[[SeatMemory, Config], tuple[str, str | None]]


class InterviewOutput(BaseModel):
    answer: str = Field(min_length=1, max_length=600, description="your answer, in your own words")


class InterviewAgent(SeatAgent):
    def __init__(
        self, ctx: AgentContext, view: SeatMemory, items: tuple[Item, ...], seat_view: SeatView
    ) -> None:
        super().__init__(ctx, view)
        self.items = items
        self.seat_view = seat_view
        self.log = view.logs[INTERVIEW_LOG]

    def messages(self, topic: str, round_: int, system: str, item: Item) -> list[dict[str, str]]:
        user = (
            f"Motion: {topic}\nYou argue {self.view.seat.stance}. The debate pauses after round {round_}.\n"
            f"Debate so far:\n{self.debate(round_)}\n"
            "An interviewer asks you a question; your answer stays between you and the interviewer.\n"
            f"Question: {item.question}\n"
            "Write JSON with:\n"
            "- answer: your answer in the first person, one to three sentences, as yourself"
        )
        return chat(system, user)

    def __call__(self, topic: str, round_: int) -> list[InterviewRecord]:
        system, persona_id = self.seat_view(self.view, self.ctx.cfg)
        return [self.ask(topic, round_, i, item, system, persona_id) for i, item in enumerate(self.items)]

    def ask(
        self, topic: str, round_: int, index: int, item: Item, system: str, persona_id: str | None
    ) -> InterviewRecord:
        seat = self.view.name
        rid = interview_id(round_, seat, index, item.name)
        call = Call(self.view.seat.role, INTERVIEW_ROLE, round_, seat, index, id=rid)
        messages = self.messages(topic, round_, system, item)
        # asked once: a resumed round replays the record that landed
        build = partial(self.record, call, item, persona_id)
        return ask_once(self.ctx, self.log, call, messages, InterviewOutput, build)

    def record(
        self, call: Call, item: Item, persona_id: str | None, result: StructuredResult[InterviewOutput]
    ) -> InterviewRecord:
        return InterviewRecord(
            **call.envelope(self.ctx, result.usage if result.ok else Usage()),  # a failure's is on its event
            item=item.name,
            aspect=item.aspect,
            question=item.question,
            answer=result.value.answer if result.value is not None else None,
            persona_id=persona_id,
        )

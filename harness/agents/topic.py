"""Topic agent: writes the motion when ``topic.generate`` is true."""

from __future__ import annotations

from pydantic import BaseModel, Field

from harness.agents.common import JSON_ONLY
from harness.runtime.context import AgentContext
from harness.store.records import record_id


class TopicOutput(BaseModel):
    topic: str = Field(min_length=10, max_length=200, description="a debatable motion")


class TopicAgent:
    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx

    def __call__(self) -> str:
        landed = self.ctx.events.get(record_id(0, None, "topic", 0, "topic", 0))
        if landed is not None:
            return landed.detail  # replay after resume: keep the motion already written
        domain = self.ctx.cfg.topic.domain
        messages = [
            {"role": "system", "content": f"You write debate motions. {JSON_ONLY}"},
            {
                "role": "user",
                "content": f'Write one clear, debatable motion about {domain}. JSON field: "topic".',
            },
        ]
        result = self.ctx.ask("topic", "topic", messages, TopicOutput, round_=0, team=None, iteration=0)
        topic = result.value.topic if result.value else (self.ctx.cfg.topic.text or "")
        if not topic:
            topic = f"This house believes {domain} does more good than harm."
        usage = result.usage if result.ok else None  # a failure's usage is on its own event
        self.ctx.events.emit(
            "topic", round_=0, team=None, role="topic", detail=topic, usage=usage, generated=result.ok
        )
        return topic

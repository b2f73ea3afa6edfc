"""Role generator: writes the panel's expert roles for this topic.

One structured call returns a name, an expertise and a mandate for each
generated seat; each becomes a public ``RoleCardRecord`` (the seat it
belongs to is its ``team``). A fixed disruptor seat, if the format has one,
gets its card without a call. A reply that fails validation gives every
generated seat a distinct generic card (one lens of the framework each),
marked ``fallback``.
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, Field, create_model, model_validator

from harness.agents.asking import Call
from harness.agents.common import JSON_ONLY, chat
from harness.runtime.context import AgentContext
from harness.store.memory import JsonlLog
from harness.store.records import RoleCardRecord, Usage, record_id

DISRUPTOR = {
    "name": "Disruptor",
    "expertise": "questioning framings, premises and the criteria everyone else takes for granted",
    "mandate": "Ask whether the panel is solving the right problem; challenge the premise others accept.",
}


class RoleCard(BaseModel):
    name: str = Field(min_length=3, max_length=60, description="a short expert title")
    expertise: str = Field(min_length=10, max_length=160, description="what this expert knows")
    mandate: str = Field(min_length=10, max_length=200, description="what this expert must push the panel on")


# Distinct, topic-neutral lenses for a panel whose role reply never validated.
FALLBACK_LENSES = ("evidence", "feasibility", "cost", "equity", "risk", "stakeholders", "ethics", "systems")


class DistinctRoles(BaseModel):
    roles: list[RoleCard]

    @model_validator(mode="after")
    def names_differ(self) -> DistinctRoles:
        # Small models copy one card n times; a panel of clones tests nothing.
        names = [card.name.strip().lower() for card in self.roles]
        if len(set(names)) != len(names):
            raise ValueError("every role needs a different name; write distinct experts")
        return self


@cache
def roles_schema(n: int) -> type[DistinctRoles]:
    """``{"roles": [RoleCard] * n}``: the count is part of the schema, so a
    grammar-constrained model writes exactly ``n``."""
    return create_model(
        "RolesOutput", __base__=DistinctRoles, roles=(list[RoleCard], Field(min_length=n, max_length=n))
    )


def fallback_card(i: int) -> dict[str, str]:
    lens = FALLBACK_LENSES[i % len(FALLBACK_LENSES)]
    return {
        "name": f"{lens.capitalize()} analyst",
        "expertise": f"judging the topic through its {lens}",
        "mandate": f"Press the panel on {lens}, wherever the others pass over it.",
    }


class RoleGeneratorAgent:
    def __init__(self, ctx: AgentContext, roles_log: JsonlLog[RoleCardRecord]) -> None:
        self.ctx = ctx
        self.log = roles_log

    def messages(self, topic: str, framework: str, n: int) -> list[dict[str, str]]:
        system = f"You design expert panels. {JSON_ONLY}"
        user = (
            f"Topic: {topic}\nAnalysis framework: {framework}\n"
            f"Write {n} distinct expert roles whose disagreements would test this topic well.\n"
            'Write JSON with "roles": a list of exactly '
            f"{n} objects, each with:\n"
            "- name: a short expert title\n"
            "- expertise: one sentence on what the expert knows\n"
            "- mandate: one sentence on what the expert must push the panel on"
        )
        return chat(system, user)

    def __call__(
        self, topic: str, framework: str, seats: list[str], disruptor: str | None
    ) -> list[RoleCardRecord]:
        """One card per seat, in seat order; ``disruptor`` names the fixed seat, if any."""
        ids = [record_id(0, seat, "role_card", 0) for seat in seats]
        landed = [self.log.get(rid) for rid in ids]
        if all(landed):
            return [card for card in landed if card is not None]  # replay after resume
        generated = [s for s in seats if s != disruptor]
        call = Call("role_generator", "role_generator", 0)
        result = call.ask(
            self.ctx, self.messages(topic, framework, len(generated)), roles_schema(len(generated))
        )
        cards = list(getattr(result.value, "roles", []))
        spec = self.ctx.spec("role_generator")
        out = []
        for i, seat in enumerate(seats):
            if seat == disruptor:
                fields, fallback, model, usage = dict(DISRUPTOR), False, None, Usage()
            elif cards:
                card = cards[generated.index(seat)]
                fields, fallback, model = card.model_dump(), False, spec
            else:
                fields, fallback, model = fallback_card(generated.index(seat)), True, spec
            if seat != disruptor:
                # the one call's cost (repairs included), counted once
                usage = result.usage if seat == generated[0] else Usage()
            record = RoleCardRecord(
                id=ids[i],
                round=0,
                team=seat,
                role="role_generator",
                model=model,
                usage=usage,
                disruptor=seat == disruptor,
                fallback=fallback,
                **fields,  # type: ignore[arg-type]
            )
            out.append(self.log.append(record))
        return out

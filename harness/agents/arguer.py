"""Arguer: one side's turn in a grounded debate, in two kinds of call.

A search step: given the claim, the debate so far and what its searches
found this turn, the arguer asks for one more search (and says what to
look for), for a summary of the collection (the summarize tool: its size,
and its top passages on the query), or says it is ready to write. The
format runs the tool between steps; searches and summaries together count
against ``format.max_searches`` a turn.

The write: the arguer writes its turn from the passages it found, citing
each by id with the words it quotes. A retry (``format.on_bad_citation=retry``)
shows it the citations that failed and why. The reply budget comes from
``format.charlimit``, so a short limit saves tokens instead of cutting text
the model already paid for; the format still cuts at the limit (recorded).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from harness.agents.asking import Call, ask_once
from harness.agents.common import JSON_ONLY, chat
from harness.agents.passages import render_hits, topic_words
from harness.agents.transcript import clip, render
from harness.models.base import Message
from harness.models.structured import CHARS_PER_TOKEN, StructuredResult
from harness.runtime.context import AgentContext
from harness.store.memory import JsonlLog, SeatMemory
from harness.store.records import Citation, DraftRecord, Published, SearchRecord, SeatInfo, Usage

MAX_CITATIONS = 2


class Tool(NamedTuple):
    """A search step's request: which tool (search or summarize) and its query (or topic)."""

    name: Literal["search", "summarize"]
    query: str


class SearchStepOutput(BaseModel):
    action: Literal["search", "summarize", "write"] = Field(
        description="search the collection again, ask for its summary, or write now"
    )
    query: str = Field(min_length=3, max_length=80, description="the words to search for")


class CitationOutput(BaseModel):
    id: str = Field(min_length=1, max_length=40, description="a passage id from the search results")
    quote: str = Field(min_length=3, max_length=120, description="words copied exactly from that passage")


class CitedTurnOutput(BaseModel):
    argument: str = Field(min_length=40, max_length=1200, description="your turn, citing passages by id")
    citations: list[CitationOutput] = Field(max_length=MAX_CITATIONS, description="the passages you quote")


def write_budget(charlimit: int) -> int:
    """Reply tokens for a turn of ``charlimit`` characters, its citations and JSON."""
    citation_chars = MAX_CITATIONS * (40 + 120)
    return 24 + math.ceil((charlimit + citation_chars) / CHARS_PER_TOKEN)


def cited_turn(
    head: dict[str, Any], text: str, citations: list[Citation], found: list[SearchRecord]
) -> DraftRecord:
    """A grounded turn's draft (a model's or a person's): ``head`` is its envelope;
    its citations come checked, with the searches the turn made."""
    searches = [s.id for s in found]
    return DraftRecord(**head, stage="turn", notes="", text=text, citations=citations, searches=searches)


def arguer_system(seat: SeatInfo, collection: str) -> str:
    """How a grounded seat is addressed: in its turns, and in an interview's fork of its view."""
    return (
        f"You are {seat.alias} in a grounded debate, arguing {seat.stance}. You may search the "
        f"collection '{collection}' for passages, and you cite them by id. {JSON_ONLY}"
    )


class ArguerAgent:
    def __init__(
        self,
        ctx: AgentContext,
        view: SeatMemory,
        collection: str,
        max_searches: int,
        check: Callable[[list[Citation]], list[Citation]],
    ) -> None:
        self.ctx = ctx
        self.check = check  # the citation checker, so a draft lands with its citations marked
        self.view = view
        self.collection = collection
        self.max_searches = max_searches
        self.drafts: JsonlLog[DraftRecord] = view.logs["drafts"]

    def _head(self, claim: str, recent: list[Published]) -> str:
        limit = self.ctx.cfg.memory.max_chars_per_item
        return f"Claim: {claim}\nThe debate so far:\n{render(recent, limit)}\n"

    def _messages(self, user: str) -> list[Message]:
        return chat(arguer_system(self.view.seat, self.collection), user)

    def step(
        self, claim: str, round_: int, n: int, recent: list[Published], found: list[SearchRecord]
    ) -> tuple[Tool | None, Usage]:
        """Step ``n`` of this turn: the tool and its query, or None to write now; and the call's usage."""
        left = self.max_searches - n
        user = (
            self._head(claim, recent) + f"Your searches this turn:\n{render_hits(found)}\n"
            f"You may use the collection {left} more time(s) before you write. Write JSON with:\n"
            '- action: "search" to search once more, "summarize" for an overview of the collection and '
            'its top passages on the query, or "write" if the passages above are enough\n'
            f"- query: a few words to look up, naming what the claim is about (such as: {topic_words(claim)})"
        )
        call = Call(self.view.seat.role, "search_step", round_, self.view.name, n)
        result = call.ask(self.ctx, self._messages(user), SearchStepOutput)
        out = result.value
        if out is None:  # no valid reply: write now; the schema_failure event counted its cost
            return None, Usage()
        if out.action == "write" or not out.query.strip():
            return None, result.usage
        return Tool(out.action, " ".join(out.query.split())), result.usage

    def write(
        self,
        claim: str,
        round_: int,
        attempt: int,
        recent: list[Published],
        found: list[SearchRecord],
        failed: tuple[DraftRecord, str] | None,
        max_tokens: int,
        usage: Usage,
    ) -> DraftRecord | None:
        """The turn's draft of attempt ``attempt``, citations checked; None when no reply validated.
        ``usage`` is what the turn's last search step cost, counted with the draft."""
        call = Call(self.view.seat.role, "arguer", round_, self.view.name, attempt, kind="draft")
        messages = self._write_messages(claim, recent, found, failed)

        def record(result: StructuredResult[CitedTurnOutput]) -> DraftRecord | None:
            if (out := result.value) is None:
                return None  # the schema_failure event says why
            head = call.envelope(self.ctx, usage + result.usage, role=call.role)
            citations = self.check([Citation(id=c.id, quote=c.quote) for c in out.citations])
            return cited_turn(head, out.argument, citations, found)

        return ask_once(self.ctx, self.drafts, call, messages, CitedTurnOutput, record, max_tokens)

    def _write_messages(
        self,
        claim: str,
        recent: list[Published],
        found: list[SearchRecord],
        failed: tuple[DraftRecord, str] | None,
    ) -> list[Message]:
        retry = ""
        if failed is not None:
            draft, why = failed
            retry = f"Your previous draft:\n{clip(draft.text, 600)}\nIts citations failed: {why}\n"
        ids = [h.id for s in found for h in s.hits]
        example = f", such as {ids[0]}" if ids else ""
        user = (
            self._head(claim, recent) + f"Passages you found:\n{render_hits(found)}\n{retry}"
            "Write your turn as JSON with:\n"
            "- argument: your argument, answering the other side, naming the passage ids you rely on\n"
            f"- citations: up to {MAX_CITATIONS} objects with id (a passage id in brackets above{example}) "
            "and quote (words copied exactly from that passage)"
        )
        return self._messages(user)

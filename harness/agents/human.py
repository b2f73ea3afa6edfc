"""A person's turn at the terminal (chat mode): in a grounded debate
(``HumanArguer``), or as a team of the drift format (``HumanDebater``).

The person sees the claim and the turns since their last one, and types:

    /search <query>   search the collection (as often as format.max_searches allows)
    /note <text>      an argument for the synthesiser, outside the debate
    /quit             stop; the run is left interrupted, and harness.resume waits for you again
    /help             these commands
    anything else     your turn; cite a passage as [id] "words quoted from it"

The turn becomes the same records a model's does (a draft in the seat's
log, checked citations, searches), with ``model: human``. A turn half done
when the person quit keeps its searches: the resumed turn shows them again.

In the drift format the person is a whole team: their persona is recorded
once (no model call), they write each draft, and the team's hostile critic
(a model) approves it or sends it back with feedback, which they see before
they write again. The drift format has no search tool and no synthesiser,
so ``/search`` and ``/note`` say so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from harness.agents.arguer import cited_turn, render_hits
from harness.agents.asking import once
from harness.agents.transcript import render
from harness.runtime.interrupt import RunStopped
from harness.store.memory import JsonlLog, SeatMemory
from harness.store.records import (
    Citation,
    DraftRecord,
    NoteRecord,
    PersonaRecord,
    Published,
    SearchRecord,
    ThinkingRecord,
    record_id,
)

HELP = (
    "/search <query>  search the collection   /note <text>  a note for the synthesiser\n"
    '/quit  stop (resume later)   anything else is your turn; cite as [id] "quoted words"'
)
# [Job.1.21] "the LORD gave"  or  [notes.md#3] 'a quote'
_CITATION = re.compile(r"\[([^\]\s]+)\]\s*[\"“']([^\"”']+)[\"”']")
_MIN_TURN_CHARS = 10


def read_turn(
    console: Any, alias: str, round_: int, command: Callable[[str, str], bool], help_text: str
) -> str:
    """Lines from the person until one is their turn. ``command(name, rest)``
    handles a ``/command`` (False: unknown, so the help is shown); ``/quit``
    and the end of input stop the run, resumably."""
    while True:
        line = console.read(f"{alias} round {round_}> ")
        if line is None or line.strip() == "/quit":
            raise RunStopped(f"{alias} quit at round {round_}")
        line = line.strip()
        name, _, rest = line.partition(" ")
        if name.startswith("/"):
            if not command(name, rest.strip()):
                console.show(help_text)
        elif len(line) < _MIN_TURN_CHARS:
            console.show(help_text)
        else:
            return line


def is_human(model: Any) -> bool:
    return str(getattr(model, "spec", "")).startswith("human:")


def parse_citations(text: str) -> list[Citation]:
    return [Citation(id=m.group(1), quote=m.group(2).strip()) for m in _CITATION.finditer(text)]


def by_person(round_: int, team: str, role: str, iteration: int, kind: str = "") -> dict[str, Any]:
    """The envelope of a record a person wrote (no model call, no usage); ``kind`` is
    its id's kind if not its role."""
    rid = record_id(round_, team, kind or role, iteration)
    return {"id": rid, "round": round_, "team": team, "role": role, "iteration": iteration, "model": "human"}


class HumanArguer:
    def __init__(
        self,
        model: Any,
        view: SeatMemory,
        notes: JsonlLog[NoteRecord],
        check: Callable[[list[Citation]], list[Citation]],
    ) -> None:
        self.console = model.console
        self.view = view
        self.notes = notes
        self.check = check
        self.drafts: JsonlLog[DraftRecord] = view.logs["drafts"]

    def _note(self, round_: int, text: str) -> None:
        n = 0
        while self.notes.get(record_id(round_, self.view.name, "note", n)) is not None:
            n += 1
        rid = record_id(round_, self.view.name, "note", n)
        self.notes.append(
            NoteRecord(id=rid, round=round_, team=self.view.name, role="human", model="human", text=text)
        )
        self.console.show("(noted for the synthesiser)")

    def __call__(
        self,
        claim: str,
        round_: int,
        attempt: int,
        recent: list[Published],
        found: list[SearchRecord],
        search: Callable[[int, str], SearchRecord],
        max_searches: int,
    ) -> DraftRecord:
        turn = partial(self._turn, claim, round_, attempt, recent, list(found), search, max_searches)
        return once(self.drafts, record_id(round_, self.view.name, "draft", attempt), turn)

    def _turn(
        self,
        claim: str,
        round_: int,
        attempt: int,
        recent: list[Published],
        found: list[
            SearchRecord
        ],  # this turn's searches so far: a quit keeps them, the resumed turn shows them
        search: Callable[[int, str], SearchRecord],
        max_searches: int,
    ) -> DraftRecord:
        seat = self.view.seat
        self.console.show(f"\nClaim: {claim}\nYou are {seat.alias}, arguing {seat.stance}. Round {round_}.")
        self.console.show(render(recent, 600))
        if found:
            self.console.show(render_hits(found))
        self.console.show(HELP)

        def command(name: str, rest: str) -> bool:
            if name == "/search" and len(found) >= max_searches:
                self.console.show(f"(no searches left this turn: format.max_searches={max_searches})")
            elif name == "/search" and rest:
                found.append(search(len(found), " ".join(rest.split())))
                self.console.show(render_hits(found[-1:]))
            elif name == "/note" and rest:
                self._note(round_, rest)
            else:
                return False
            return True

        line = read_turn(self.console, seat.alias, round_, command, HELP)
        head = by_person(round_, self.view.name, seat.role, attempt, kind="draft")
        return cited_turn(head, line, self.check(parse_citations(line)), found)


DRIFT_HELP = "/quit  stop (resume later)   anything else is your argument, which the critic reviews"


class HumanDebater:
    """A drift team played by a person: a fixed persona, drafts from the terminal."""

    def __init__(self, model: Any, view: SeatMemory) -> None:
        self.console = model.console
        self.view = view

    def persona(self, round_: int, iteration: int) -> PersonaRecord:
        """The person's persona, recorded once a turn attempt like a model's, with no call."""
        head = by_person(round_, self.view.name, "persona", iteration)
        return once(
            self.view.persona,
            head["id"],
            lambda: PersonaRecord(
                **head,
                decision="keep" if round_ > 1 or iteration else "initial",
                version=1,
                persona=f"{self.view.seat.alias}, played by a person",
                rationale="a person plays this team",
            ),
        )

    def draft(
        self,
        topic: str,
        round_: int,
        iteration: int,
        persona: PersonaRecord | None,  # None: the no-persona control
        feedback: str | None,
        recent: list[Published],
    ) -> ThinkingRecord:
        head = by_person(round_, self.view.name, "thinking", iteration)
        return once(
            self.view.thinking,
            head["id"],
            partial(self._draft, head, topic, round_, feedback, recent, persona),
        )

    def _draft(
        self,
        head: dict[str, Any],
        topic: str,
        round_: int,
        feedback: str | None,
        recent: list[Published],
        persona: PersonaRecord | None,
    ) -> ThinkingRecord:
        seat = self.view.seat
        self.console.show(f"\nMotion: {topic}\nYou are {seat.alias}, arguing {seat.stance}. Round {round_}.")
        self.console.show(render(recent, 600))
        if feedback:
            self.console.show(f"The critic rejected your last draft: {feedback}")
        self.console.show(DRIFT_HELP)

        def command(name: str, rest: str) -> bool:
            if name not in ("/search", "/note"):
                return False
            self.console.show("(the drift format has no search tool and no synthesiser)")
            return True

        line = read_turn(self.console, seat.alias, round_, command, DRIFT_HELP)
        return ThinkingRecord(**head, scratchpad="", draft=line, persona_id=persona.id if persona else None)

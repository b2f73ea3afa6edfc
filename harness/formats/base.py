"""The ``Format`` object: everything the engine, resume, verify, the
progress bar, the manifest and the analysis need to know about a debate
format, in one place. Each module under ``harness.formats`` defines one.

A format names its seats (who argues, under which alias, answered by which
model role, keeping which private logs), its roles with no seat (topic,
critic, judge, summariser...), the record kinds it writes, its graph, its
first state, a bound on its graph steps, the counts it reports, and the
integrity checks it adds to ``verify``. Nothing outside ``harness.formats``
keeps a list of seats or roles of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# Seat lives with the run context, which holds a run's seats; it is re-exported here
from harness.runtime.context import Seat

# RunLogs and Check are the store's (verify reads the logs and runs the checks it is given)
from harness.store.integrity import Check
from harness.store.integrity import RunLogs as RunLogs
from harness.store.records import RunLayout, SeatInfo

if TYPE_CHECKING:
    from harness.runtime.context import EventLog, RunContext
    from harness.schema import Config
    from harness.store.memory import SeatMemory

# Each log a seat keeps under ``<seat>/``; ``prompts`` is always among them.
PROMPTS = "prompts"
# Every format keeps each model reply where its prompt went (``ReplyRecord``):
# one ``replies`` log per seat and one under ``public/``, added by ``layout``.
REPLIES = "replies"


@dataclass
class FormatOptions:
    """``format.*`` keys every format has; each format's options extend it."""

    name: str = "drift"

    def check(self) -> None:
        """Range checks; raise ``ConfigError`` naming ``format.<key>``."""


@dataclass(frozen=True)
class Format:
    name: str
    summary: str
    options: type[FormatOptions]
    seats: Callable[[Any], tuple[Seat, ...]]  # from the validated format options
    roles: tuple[str, ...]  # model roles with no seat
    public_logs: tuple[str, ...]  # logs under public/, prompts among them
    record_kinds: tuple[str, ...]
    build_graph: Callable[[RunContext], Any]
    initial_state: Callable[[Config], dict[str, Any]]
    max_steps: Callable[[Config], int]
    counts: tuple[str, ...]  # what the summary line shows (RunCounts fields or record kinds)
    checks: tuple[Check, ...] = ()
    # how many past rounds the format's nodes read (a judge's recap): a
    # snapshot's window never covers fewer, whatever memory.window_rounds says
    min_window_rounds: int | Callable[[Config], int] = 1
    # logs written once at set-up (role cards) that every round reads: resume
    # loads them whole instead of from the snapshot's window
    whole_logs: tuple[str, ...] = ()
    # modules whose code shapes the prompts; the fingerprint hashes them
    prompt_modules: tuple[str, ...] = field(default=())
    # how many rounds a run of this config has (the progress bar's total, and
    # when a run without a stop reason is done); a round is whatever the
    # format snapshots after: a drift round, a panel round, one speech
    planned_rounds: Callable[[Config], int] = field(default=lambda cfg: cfg.rounds)
    # what the format's nodes need beyond models, opened once per run and
    # closed when it ends (a search session): ``RunContext.tools``
    open_tools: Callable[[Config, EventLog], AbstractContextManager[Any]] | None = None
    # checks that read more than the config (a collection on disk), run
    # before a folder is made; raise ``ConfigError``
    preflight: Callable[[Config], None] | None = None
    # config sections only this format reads; others compute the same whatever
    # they hold, so their fingerprints leave them out
    sections: tuple[str, ...] = ()
    # a person can play its seats (``chat=<seat>``, a ``human:`` spec)
    human_seats: bool = False
    # its graph asks behavioural probes after a turn (``probes.enabled``)
    probes: bool = False
    # the control conditions it runs (``control``, conf/experiment/control_*.yaml):
    # each takes away a part of this format, so another format refuses it
    controls: tuple[str, ...] = ()
    # its persona node takes a seat's planted persona (``personas.<seat>``)
    personas: bool = False
    # a seat's view as a checkpoint interview's fork shares it (``interviews.rounds``;
    # ``harness.agents.interview``): the system prompt the seat's own turns carry and
    # the id of the persona it holds; None: its seats are not interviewed
    interview_view: Callable[[SeatMemory, Config], tuple[str, str | None]] | None = None
    # the key that sets a run's length and the planned rounds per unit of it
    # (``harness.plan``'s dry passes shorten and extrapolate a run by it)
    length_key: tuple[str, int] = ("rounds", 1)

    def interviews(self, cfg: Config) -> bool:
        """Whether a run of ``cfg`` interviews its seats (validation refuses
        ``interviews.rounds`` on a format whose seats cannot be)."""
        return cfg.interviews.on and self.interview_view is not None

    def window_rounds(self, cfg: Config) -> int:
        """The rounds a snapshot's window covers: ``memory.window_rounds``, or
        more if the format's nodes read further back."""
        least = self.min_window_rounds
        return max(cfg.memory.window_rounds, least(cfg) if callable(least) else least)

    def seat_list(self, cfg: Config) -> tuple[Seat, ...]:
        return self.seats(cfg.format)

    def model_roles(self, cfg: Config) -> tuple[str, ...]:
        """Every role a model answers for: each seat's, then the seatless ones."""
        seat_roles = tuple(dict.fromkeys(seat.role for seat in self.seat_list(cfg)))
        return seat_roles + tuple(r for r in self.roles if r not in seat_roles)

    def least_reply_tokens(self) -> tuple[int, str]:
        """The fewest ``max_tokens`` every reply schema of this format fits in,
        and the schema that needs them (``harness.models.structured.min_tokens``)."""
        import importlib

        from pydantic import BaseModel

        from harness.models.structured import json_schema, min_tokens

        schemas = {
            obj.__name__: obj
            for name in self.prompt_modules
            for obj in vars(importlib.import_module(name)).values()
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__name__.endswith("Output")
        }
        needs = [(min_tokens(json_schema(cls)), name) for name, cls in schemas.items()]
        return max(needs, default=(0, ""))

    def layout(self, cfg: Config) -> RunLayout:
        # each seat's side is recorded, so the analysis needs no format to learn it
        seats = [SeatInfo(**{**seat.info().model_dump(), "side": seat.side}) for seat in self.seat_list(cfg)]
        probed = cfg.probes.enabled  # behavioural probes: each seat keeps its own probes log
        interviewed = self.interviews(cfg)  # checkpoint interviews: its own interviews log
        for info in seats:
            info.logs += [REPLIES, *(["probes"] if probed else []), *(["interviews"] if interviewed else [])]
        asides = [*(["probe"] if probed else []), *(["interview"] if interviewed else [])]
        return RunLayout(
            format=self.name,
            seats=seats,
            public_logs=[*self.public_logs, REPLIES],
            record_kinds=[*self.record_kinds, "reply", *asides],
            whole_logs=list(self.whole_logs),
        )

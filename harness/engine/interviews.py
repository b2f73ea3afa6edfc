"""Checkpoint interviews in a run (docs/interviews.md): at the end of each
round in ``interviews.rounds``, every seat the model plays (never a person's)
answers the questionnaire in a fork of its own view
(``harness.agents.interview``), on any format that says how its seats are
viewed (``Format.interview_view``).

The engine asks them between a round's last graph step and its snapshot,
outside the format's graph: no node, state or transcript of the debate
changes. A run killed mid-interview resumes from the snapshot before, so the
round replays and its answers that landed are reused, never asked again.
"""

from __future__ import annotations

from typing import Any

from harness.agents.human import is_human
from harness.agents.interview import InterviewAgent
from harness.formats import Format
from harness.probes.questionnaire import questionnaire
from harness.runtime.context import RunContext


class Interviews:
    """The interviews of one run: one agent per seat the model plays."""

    def __init__(self, fmt: Format, ctx: RunContext) -> None:
        cfg = ctx.cfg
        items = questionnaire(cfg.interviews) if fmt.interviews(cfg) else ()
        self.rounds = frozenset(cfg.interviews.rounds)
        self.agents = [
            InterviewAgent(ctx.for_seat(seat.name), ctx.memory.seat(seat.name), items, fmt.interview_view)
            for seat in ctx.seats
            if items and fmt.interview_view is not None and not is_human(ctx.roles[seat.role].model)
        ]

    def after(self, round_: int, state: dict[str, Any]) -> None:
        """Ask every interviewed seat, if ``round_`` (just completed) is one of the chosen rounds."""
        if round_ not in self.rounds:
            return
        for agent in self.agents:
            agent(str(state.get("topic") or ""), round_)

"""The run's event log: typed writes to ``events.jsonl`` with deterministic
ids, and the ids of records kept again at one position (``redo_id``).

Every part of a run that records an event (the agents' calls, the search
tool, a fan-out's held events) writes through one ``EventLog``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.store.memory import JsonlLog
from harness.store.records import ErrorInfo, EventKind, EventRecord, Usage, record_id

# Events of one attempt at a call. A call re-made after a resume may fail
# again at the same position; that is a new attempt, and its event must land
# beside the first one rather than be refused as a replayed copy of it. So must
# a resume's own events: numbered by the manifest's history, which a resume
# killed before its first manifest write leaves as it was for the next one.
ATTEMPT_EVENTS = frozenset(
    {"retry", "error", "search_restart", "replay_mismatch", "budget", "resume", "quarantine"}
)


def redo_id(rid: str, n: int) -> str:
    """The id of the ``n``-th record kept at ``rid``'s position after the first
    (a forced resume that asked again): nothing paid for is ever dropped."""
    return rid if n == 0 else f"{rid}.redo{n}"


class EventLog:
    """Typed writes to ``events.jsonl``, with deterministic ids."""

    def __init__(self, log: JsonlLog[EventRecord]) -> None:
        self._log = log
        # set while one step's calls run together (harness.runtime.fanout): it
        # writes each call's events in seat order, whichever call is quicker
        self.gate: Callable[[Callable[[], object]], None] | None = None

    def get(self, rid: str) -> EventRecord | None:
        return self._log.get(rid)

    def _free_n(self, round_: int, team: str | None, role: str, iteration: int, kind: str, n: int) -> int:
        while self._log.get(record_id(round_, team, role, iteration, kind, n)) is not None:
            n += 1
        return n

    def emit(
        self,
        kind: EventKind,
        *,
        round_: int,
        team: str | None,
        role: str,
        iteration: int = 0,
        detail: str = "",
        error: ErrorInfo | None = None,
        n: int = 0,
        usage: Usage | None = None,
        model: str | None = None,
        **data: Any,
    ) -> EventRecord | None:
        """The event as written; None while a fan-out's gate holds it for its turn."""

        def write() -> EventRecord:  # the free id is looked up when the event is written
            free = self._free_n(round_, team, role, iteration, kind, n) if kind in ATTEMPT_EVENTS else n
            return self._log.append(
                EventRecord(
                    id=record_id(round_, team, role, iteration, kind, free),
                    round=round_,
                    team=team,  # type: ignore[arg-type]
                    role=role,
                    iteration=iteration,
                    model=model,
                    event=kind,
                    detail=detail,
                    error=error,
                    usage=usage or Usage(),
                    data=data,
                )
            )

        if self.gate is None:
            return write()
        self.gate(write)
        return None

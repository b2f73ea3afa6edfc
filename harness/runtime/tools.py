"""The search tool as a run uses it: one session per run, every call through
the one retry policy, every fault an event, every result a record.

A fault of the search server (a crash, a hang past ``search.timeout_s``, a
malformed reply) is a transient error: the session restarts the server on
the next call, and ``call_with_retry`` waits and tries again, as it does for
a model. Each retry lands in ``events.jsonl`` (role ``search``) beside a
``search_restart`` event. When retries run out the run fails, resumable.

A search that landed is never made again: a resumed run reads its hits from
the seat's ``searches`` log, so killing the server mid-run and resuming
gives the same transcript.
"""

from __future__ import annotations

import time
from typing import Any

from harness.models.retry import call_with_retry, error_info
from harness.runtime.context import ModelCallError
from harness.runtime.events import EventLog
from harness.schema import Config
from harness.search.citations import check_citations
from harness.slots import waiting
from harness.store.memory import JsonlLog
from harness.store.records import Citation, Hit, SearchRecord, Usage


class ToolCallError(ModelCallError):
    """A tool call that failed for good (retries exhausted, or a fatal error)."""


class SearchTool:
    """The run's search session, bound to its retry policy and event log."""

    def __init__(self, cfg: Config, session: Any, events: EventLog, collection: Any) -> None:
        self.cfg = cfg
        self.session = session  # harness.search.SearchSession or LocalSearch
        self.events = events
        self.collection = collection  # harness.search.Collection: the checker reads passages here

    def check(self, citations: list[Citation]) -> list[Citation]:
        """Citations marked against the collection (in-process: a check is no tool call)."""

        def text(pid: str) -> str | None:
            passage = self.collection.get(pid)
            return passage.text if passage is not None else None

        return check_citations(citations, text)

    def search(
        self, log: JsonlLog[SearchRecord], rid: str, where: dict[str, Any], query: str, usage: Usage
    ) -> SearchRecord:
        """Search ``query`` for the seat owning ``log``; the record, replayed if it landed.
        ``where`` places it (round, team, iteration); ``usage`` is the step that asked for it."""
        if (landed := log.get(rid)) is not None:
            return landed
        k = self.cfg.search.k
        started = time.perf_counter()
        hits: list[Hit] = self._call(lambda: self.session.search(query, k), where, query)
        return log.append(self._record(rid, where, usage, started, query=query, k=k, hits=hits))

    def summarize(
        self, log: JsonlLog[SearchRecord], rid: str, where: dict[str, Any], topic: str, usage: Usage
    ) -> SearchRecord:
        """The summarize tool's overview of the collection and its top passages on ``topic``,
        as a ``SearchRecord`` (``tool="summarize"``, no hits, k 0); replayed if it landed."""
        if (landed := log.get(rid)) is not None:
            return landed
        started = time.perf_counter()
        summary: str = self._call(lambda: self.session.summarize(topic), where, topic)
        record = self._record(rid, where, usage, started, tool="summarize", query=topic, k=0, summary=summary)
        return log.append(record)

    def _record(
        self, rid: str, where: dict[str, Any], usage: Usage, started: float, **tool: Any
    ) -> SearchRecord:
        """A search record at ``where``: the tool's own fields, timed from ``started``."""
        return SearchRecord(
            id=rid,
            round=where["round"],
            team=where["team"],
            role="search",
            iteration=where["iteration"],
            usage=usage,
            collection=self.cfg.search.collection,
            latency_s=round(time.perf_counter() - started, 6),
            **tool,
        )

    def _call(self, fn: Any, where: dict[str, Any], query: str) -> Any:
        place = {"round_": where["round"], "team": where["team"], "iteration": where["iteration"]}

        def on_retry(attempt: int, exc: BaseException, wait: float) -> None:
            self.events.emit(
                "retry",
                **place,
                role="search",
                n=attempt,
                error=error_info(exc),
                detail=f"search attempt {attempt} failed; restarting the server, retrying in {wait:.2f}s",
            )
            self.events.emit(
                "search_restart",
                **place,
                role="search",
                n=attempt,
                detail=f"search server restarted after {type(exc).__name__}",
                query=query,
            )

        try:
            with waiting():  # a search waits on its server: the cell's run slot is lent out
                return call_with_retry(fn, self.cfg.retry, on_retry)
        except Exception as exc:
            info = error_info(exc)
            self.events.emit("error", **place, role="search", detail="search failed", error=info)
            raise ToolCallError(
                f"role=search team={where['team']} round={where['round']} "
                f"collection={self.cfg.search.collection}: {info.type}: {info.message}",
                info,
            ) from exc

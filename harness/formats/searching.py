"""What the formats that search share: the run's one search session (the
grounded debate's arguers, the moderated debate's grounded fact-checker),
and the preflight that checks the collection before any folder is made."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from harness.models.retry import call_with_retry
from harness.runtime.context import EventLog
from harness.runtime.tools import SearchTool
from harness.schema import Config, ConfigError


@contextmanager
def open_search(cfg: Config, events: EventLog) -> Iterator[SearchTool]:
    """One search session for the whole run, closed when the run ends."""
    from harness.search import load_collection
    from harness.search import open_search as open_session

    collection = load_collection(cfg.search.collection, cache_dir=cfg.search.cache_dir)
    # started now, so a broken install shows before the first turn; a server
    # that fails to start is a fault like any other, retried by the one policy
    session = call_with_retry(
        lambda: open_session(
            cfg.search.collection,
            transport=cfg.search.transport,
            timeout_s=cfg.search.timeout_s,
            cache_dir=cfg.search.cache_dir,
        ),
        cfg.retry,
    )
    with session:
        yield SearchTool(cfg, session, events, collection)


def check_collection(cfg: Config, needs: str = "format=grounded") -> None:
    """A missing or empty collection is one line before any folder is made;
    ``needs`` names what searches, for the line when no collection is given."""
    from harness.search import CollectionError, load_collection

    if not cfg.search.collection:
        raise ConfigError(f"search.collection: {needs} searches a collection; give one (kjv or a folder)")
    try:
        load_collection(cfg.search.collection, cache_dir=cfg.search.cache_dir)
    except CollectionError as exc:
        raise ConfigError(str(exc)) from None

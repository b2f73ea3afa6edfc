"""Full-text search of every transcript in the SQL store (SQLite FTS5).

Four kinds of text are indexed, one row each in ``passages``:

- ``turn``: a statement of the shared transcript (an argument, a position, a
  speech, a turn, a cited turn: any ``Published`` record);
- ``draft``: what a seat drafted before any check (a thinking record's
  draft, a draft record's text);
- ``critique``: the critic's feedback on a draft, with its revision if it
  wrote one, and the fact-checker's justification;
- ``persona``: a drift persona, and a panel analyst's role card.

``passages_fts`` is an FTS5 index over ``passages.text`` (external content:
the text is stored once). Triggers keep it in step with ``passages``, so the
store's per-run delete and insert update the index incrementally: adding one
run never rebuilds it. Queries use FTS5's syntax (``"as an AI"`` for a
phrase, ``persona*`` for a prefix, ``AND``/``OR``/``NOT``, ``NEAR``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.store.records import (
    CritiqueRecord,
    DraftRecord,
    FactCheckRecord,
    PersonaRecord,
    Published,
    Record,
    RoleCardRecord,
    ThinkingRecord,
)

KINDS = ("turn", "draft", "critique", "persona")

# unicode61 without stemming: a researcher looking for "AI" wants that token,
# not its stem; remove_diacritics 2 lets "naive" find "naïve".
FTS_SCHEMA = """
CREATE TABLE passages (
    id INTEGER PRIMARY KEY, run_id TEXT, file TEXT, seq INTEGER, record_id TEXT, kind TEXT,
    record_kind TEXT, round INTEGER, seat TEXT, alias TEXT, role TEXT, text TEXT
);
CREATE INDEX passages_run ON passages (run_id);
CREATE VIRTUAL TABLE passages_fts USING fts5(
    text, content='passages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts (passages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""


class SearchError(ValueError):
    """A query FTS5 cannot parse, or a kind that is not indexed."""


def passage_of(r: Record) -> tuple[str, str] | None:
    """(kind, text) of a record that is searched, or None."""
    if isinstance(r, Published):
        return "turn", r.text
    if isinstance(r, ThinkingRecord):
        return "draft", r.draft
    if isinstance(r, DraftRecord):
        return "draft", r.text
    if isinstance(r, CritiqueRecord):
        return "critique", "\n\n".join(t for t in (r.feedback, r.revised_argument) if t)
    if isinstance(r, FactCheckRecord):
        return "critique", r.justification
    if isinstance(r, PersonaRecord):
        return "persona", r.persona
    if isinstance(r, RoleCardRecord):
        return "persona", f"{r.name}: {r.expertise}. {r.mandate}"
    return None


def passage_rows(
    run_id: str, records: Iterable[tuple[str, Record]], aliases: dict[str, str]
) -> Iterator[tuple[Any, ...]]:
    """The ``passages`` rows of one run's (file, record) pairs, every column
    in order (``id`` None: SQLite numbers them)."""
    for file, r in records:
        found = passage_of(r)
        if found is None or not found[1].strip():
            continue
        alias = r.alias if isinstance(r, Published) and r.alias else aliases.get(r.team or "")
        yield (None, run_id, file, r.seq, r.id, found[0], r.kind, r.round, r.team, alias, r.role, found[1])


@dataclass(frozen=True)
class Hit:
    """One passage a query matched; ``snippet`` has the matches between the marks."""

    run_id: str
    seat: str | None
    alias: str | None
    role: str
    round: int
    kind: str
    record_kind: str
    record_id: str
    file: str
    seq: int
    snippet: str

    @property
    def who(self) -> str:
        """The seat, or the role for a record of no seat (a judge, the role generator)."""
        return self.seat or self.role


@dataclass
class Found:
    hits: list[Hit]
    total: int  # every match, the ones past the limit too


def search(
    db: Path | str,
    query: str,
    *,
    kind: str | None = None,
    limit: int = 20,
    marks: tuple[str, str] = ("[", "]"),
    tokens: int = 16,
) -> Found:
    """The passages of the store ``db`` matching ``query`` (FTS5 syntax), best
    first (bm25), at most ``limit``; ``kind`` keeps one of ``KINDS``. Raises
    ``SearchError`` for a query FTS5 cannot parse or an unknown kind."""
    if kind is not None and kind not in KINDS:
        raise SearchError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    where = "passages_fts MATCH ?" + (" AND p.kind = ?" if kind else "")
    args: list[Any] = [query, *([kind] if kind else [])]
    if not Path(db).is_file():
        raise FileNotFoundError(f"{db}: no store here (build it with python -m harness.store <root>)")
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT p.run_id, p.seat, p.alias, p.role, p.round, p.kind, p.record_kind, p.record_id, p.file, "
            f"p.seq, snippet(passages_fts, 0, ?, ?, '…', ?) FROM passages_fts JOIN passages AS p "
            f"ON p.id = passages_fts.rowid WHERE {where} ORDER BY passages_fts.rank, p.run_id, p.id LIMIT ?",
            [*marks, tokens, *args, limit],
        ).fetchall()
        total = con.execute(
            f"SELECT count(*) FROM passages_fts JOIN passages AS p ON p.id = passages_fts.rowid WHERE {where}",
            args,
        ).fetchone()[0]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            raise SearchError(f"{db} has no search index (update it with python -m harness.store)") from exc
        # fts5: syntax error near ..., no such column: x (from "x:word"), unknown special query ...
        raise SearchError(f"bad search query {query!r}: {exc}") from exc
    finally:
        con.close()
    return Found([Hit(*row) for row in rows], total)

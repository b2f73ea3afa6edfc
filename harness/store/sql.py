"""The SQL store: one SQLite file indexing every run folder under a root.

``build_store(root)`` finds the runs (``reader.find_runs``), reads each one
(``reader.read_run``, prompts left out) and writes its rows: one per run, per
seat, per record (generic columns plus the record's full JSON, so a record
kind added later needs no new table), and typed tables for what researchers
query most: the shared transcript's statements, the events, and the usage of
every model call; and a full-text index of the transcripts, drafts,
critiques and personas (``harness.store.fts``). The JSONL files stay the
source of truth; the store is an index of them and can be rebuilt from
scratch at any time (``rebuild=True``).

Updates are incremental. Each run keeps a stamp (size, mtime and inode of
``manifest.json``, ``config.yaml`` and every log of its layout); a run whose
stamp is unchanged is not read again, a changed one has its rows replaced in
one transaction, and a run whose folder is gone loses its rows. The stamp is
taken before the run is read, so rows are never newer than their stamp: a
log appended to mid-read is simply read again next time.

The schema, table by table, is in ``docs/store.md``.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from harness.store.fts import FTS_SCHEMA, passage_rows
from harness.store.reader import RunFolder, find_runs, read_manifest, read_run
from harness.store.records import SCHEMA_VERSION, EventRecord, Published, Record

# Bump when a table or column changes: a store of another version is rebuilt.
STORE_SCHEMA_VERSION = 3  # 2: passages and their full-text index; 3: cost_usd (NULL: unknown)
DEFAULT_DB_NAME = "_store.sqlite"  # "_": find_runs never looks inside it
SKIP_LOGS = ("prompts.jsonl", "replies.jsonl")  # every call's prompt and raw reply: large, left to the JSONL
# Runs written per transaction: each run's delete and re-insert always land
# together, and the disk is synced once per batch instead of once per run.
BATCH_RUNS = 64

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, name TEXT, format TEXT, status TEXT, stop_reason TEXT, seed INTEGER,
    topic TEXT, started_at TEXT, ended_at TEXT, wall_s REAL, rounds_completed INTEGER,
    model_calls INTEGER, published INTEGER, input_tokens INTEGER, output_tokens INTEGER,
    cost_usd REAL, git_commit TEXT, error_kind TEXT, error_type TEXT, error_message TEXT,
    config_json TEXT, manifest_json TEXT, read_notes TEXT, logs_json TEXT, stamp TEXT, indexed_at TEXT
);
CREATE TABLE seats (
    run_id TEXT, seat TEXT, alias TEXT, role TEXT, stance TEXT, model_spec TEXT, logs_json TEXT,
    PRIMARY KEY (run_id, seat)
);
CREATE TABLE records (
    run_id TEXT, file TEXT, seq INTEGER, record_id TEXT, kind TEXT, round INTEGER, seat TEXT,
    role TEXT, iteration INTEGER, model TEXT, ts TEXT, json TEXT
);
CREATE TABLE statements (
    run_id TEXT, seq INTEGER, record_id TEXT, round INTEGER, seat TEXT, alias TEXT, kind TEXT,
    phase TEXT, role TEXT, iteration INTEGER, text TEXT, model TEXT, ts TEXT
);
CREATE TABLE events (
    run_id TEXT, file TEXT, seq INTEGER, record_id TEXT, round INTEGER, seat TEXT, role TEXT,
    iteration INTEGER, event TEXT, detail TEXT, error_kind TEXT, error_type TEXT, error_message TEXT,
    data_json TEXT, ts TEXT
);
CREATE TABLE usage (
    run_id TEXT, file TEXT, seq INTEGER, record_id TEXT, kind TEXT, round INTEGER, seat TEXT,
    role TEXT, iteration INTEGER, model TEXT, input_tokens INTEGER, output_tokens INTEGER,
    latency_s REAL, calls INTEGER, cost_usd REAL
);
CREATE INDEX runs_format_status ON runs (format, status);
CREATE INDEX records_run ON records (run_id, file, seq);
CREATE INDEX records_kind ON records (kind, run_id, round);
CREATE INDEX statements_run ON statements (run_id, round, seq);
CREATE INDEX events_run ON events (run_id, seq);
CREATE INDEX events_event ON events (event, error_kind);
CREATE INDEX usage_run ON usage (run_id, seat, kind);
CREATE INDEX usage_model ON usage (model);
"""
# passages: its delete trigger takes a run's rows out of the full-text index too
TABLES = ("runs", "seats", "records", "statements", "events", "usage", "passages")


@dataclass
class StoreReport:
    """What one build did: which runs it read, kept, removed or could not read."""

    db: Path
    scanned: int = 0
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # run_id -> why it could not be read
    seconds: float = 0.0

    @property
    def reread(self) -> list[str]:
        """The runs read from their files in this build."""
        return [*self.added, *self.updated]

    def summary(self) -> str:
        return (
            f"store: scanned {self.scanned} | added {len(self.added)} | updated {len(self.updated)} | "
            f"unchanged {self.unchanged} | removed {len(self.removed)} | failed {len(self.failed)} | "
            f"{self.seconds:.2f}s"
        )


def build_store(root: Path | str, db: Path | str | None = None, rebuild: bool = False) -> StoreReport:
    """Bring the store of the runs under ``root`` up to date (see the module doc).

    Raises ``NotADirectoryError`` if ``root`` is not a folder.
    """
    started = time.perf_counter()
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a folder")
    report = StoreReport(Path(db) if db is not None else root / DEFAULT_DB_NAME)
    con = open_store(report.db, rebuild)
    try:
        rows = con.execute("SELECT run_id, stamp, logs_json FROM runs").fetchall()
        known = {run_id: (stamp, json.loads(logs)) for run_id, stamp, logs in rows}
        found = {run_id_of(root, path): path for path in find_runs(root)}
        report.scanned = len(found)
        runs = list(found.items())
        for start in range(0, len(runs), BATCH_RUNS):
            with transaction(con):
                for run_id, path in runs[start : start + BATCH_RUNS]:
                    update_run(con, run_id, path, known.get(run_id), report)
        with transaction(con):
            for run_id in sorted(set(known) - set(found)):
                delete_run(con, run_id)
                report.removed.append(run_id)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", (now_iso(),))
    finally:
        con.close()
    report.seconds = time.perf_counter() - started
    return report


class StoreError(Exception):
    """The db path holds something that is not a store of runs."""


def versions() -> dict[str, str]:
    """What a store's rows depend on: its own tables, and the record model
    its JSON was written through. A store of other versions is rebuilt."""
    return {"schema_version": str(STORE_SCHEMA_VERSION), "record_schema_version": str(SCHEMA_VERSION)}


def open_store(db: Path, rebuild: bool) -> sqlite3.Connection:
    """Open ``db``, creating it (or recreating it, if ``rebuild`` or it was
    written with other ``versions()``) with every table empty."""
    meta = None if rebuild or not db.exists() else stored_meta(db)
    if rebuild or (meta is not None and any(meta.get(k) != v for k, v in versions().items())):
        db.unlink(missing_ok=True)
        Path(f"{db}-journal").unlink(missing_ok=True)
        meta = None
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db, isolation_level=None)  # transactions are explicit (transaction())
    if meta is None:
        con.executescript(f"BEGIN; {SCHEMA} {FTS_SCHEMA} COMMIT;")
        with transaction(con):
            con.executemany(
                "INSERT INTO meta VALUES (?, ?)", [*versions().items(), ("created_at", now_iso())]
            )
    return con


def stored_meta(db: Path) -> dict[str, str] | None:
    """The meta table of the store ``db``; None if the file holds no tables
    yet. Raises ``StoreError`` for any other file, which is left alone."""
    con = sqlite3.connect(db)
    try:
        if con.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0] == 0:
            return None
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError as exc:  # not a database, or no meta table
        raise StoreError(f"{db} is not a store of runs ({exc}); pass --rebuild to replace it") from exc
    finally:
        con.close()


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN ... COMMIT, or ROLLBACK if the block raises."""
    con.execute("BEGIN")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def run_id_of(root: Path, path: Path) -> str:
    """A run's id in the store: its folder relative to the root (its name if it is the root)."""
    rel = path.relative_to(root).as_posix()
    return path.resolve().name if rel == "." else rel


def stamp_of(run_dir: Path, logs: Iterable[str]) -> str:
    """A digest of the size, mtime and inode of every file the store reads a
    run from (an atomically rewritten manifest gets a new inode)."""
    digest = hashlib.blake2b(digest_size=16)
    for name in ("manifest.json", "config.yaml", *logs):
        try:
            st = (run_dir / name).stat()
            digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
        except FileNotFoundError:
            digest.update(f"{name}\0-\n".encode())
    return digest.hexdigest()


def update_run(
    con: sqlite3.Connection,
    run_id: str,
    path: Path,
    known: tuple[str, list[str]] | None,
    report: StoreReport,
) -> None:
    """Leave an unchanged run alone; read a new or changed one and replace its
    rows (inside the caller's transaction)."""
    if known is not None and stamp_of(path, known[1]) == known[0]:
        report.unchanged += 1
        return
    try:
        # stamp first, then read: the rows are never newer than the stamp
        logs = logs_of(path)
        stamp = stamp_of(path, logs)
        run = read_run(path, skip=SKIP_LOGS)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # ValueError: a bad manifest or config
        report.failed[run_id] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        delete_run(con, run_id)  # what it held before is no longer what its files say
        return
    delete_run(con, run_id)
    insert_run(con, run_id, run, logs, stamp)
    (report.updated if known is not None else report.added).append(run_id)


def logs_of(run_dir: Path) -> list[str]:
    """Every log of a run's layout, from its manifest alone
    (parsing ``config.yaml`` costs more than the rest of the stamp)."""
    return read_manifest(run_dir).layout.files()


def delete_run(con: sqlite3.Connection, run_id: str) -> None:
    for table in TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))


def insert_run(con: sqlite3.Connection, run_id: str, run: RunFolder, logs: list[str], stamp: str) -> None:
    """Write every row of one read run."""
    rows = list(all_records(run))
    aliases = {s.name: s.alias for s in run.layout.seats}  # a drift argument names no alias of its own
    insert(con, "runs", [run_row(run_id, run, logs, stamp)])
    insert(con, "seats", seat_rows(run_id, run))
    insert(con, "records", record_rows(run_id, rows))
    insert(con, "statements", statement_rows(run_id, run, aliases))
    insert(con, "events", event_rows(run_id, rows))
    insert(con, "usage", usage_rows(run_id, rows))
    insert(con, "passages", list(passage_rows(run_id, rows, aliases)))


def insert(con: sqlite3.Connection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """Insert whole rows, every column in the table's order."""
    if rows:
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)


def run_row(run_id: str, run: RunFolder, logs: list[str], stamp: str) -> tuple[Any, ...]:
    m, c = run.manifest, run.manifest.counts
    err = m.error
    return (
        run_id,
        m.run_id,
        m.format,
        m.status,
        m.stop_reason,
        m.seed,
        m.topic,
        m.started_at.isoformat(),
        m.ended_at.isoformat() if m.ended_at else None,
        m.wall_s,
        c.rounds_completed,
        c.model_calls,
        c.published,
        c.input_tokens,
        c.output_tokens,
        c.cost_usd,
        m.git_commit,
        err.kind if err else None,
        err.type if err else None,
        err.message if err else None,
        json.dumps(run.config, default=str),
        m.model_dump_json(),
        "\n".join(run.notes) or None,
        json.dumps(logs),
        stamp,
        now_iso(),
    )


def seat_rows(run_id: str, run: RunFolder) -> list[tuple[Any, ...]]:
    specs = run.manifest.model_specs
    return [
        (run_id, s.name, s.alias, s.role, s.stance, specs.get(s.role), json.dumps(s.logs))
        for s in run.layout.seats
    ]


def record_rows(run_id: str, rows: list[tuple[str, Record]]) -> list[tuple[Any, ...]]:
    """Every record: the generic columns, then its full JSON."""
    return [(run_id, file, *envelope(r), r.ts.isoformat(), r.model_dump_json()) for file, r in rows]


def statement_rows(run_id: str, run: RunFolder, aliases: dict[str, str]) -> list[tuple[Any, ...]]:
    """One row per statement published to the shared transcript."""
    return [
        (
            run_id,
            r.seq,
            r.id,
            r.round,
            r.team,
            r.alias or aliases.get(r.team or ""),
            r.kind,
            r.phase,
            r.role,
            r.iteration,
            r.text,
            r.model,
            r.ts.isoformat(),
        )
        for r in run.of("shared_memory.jsonl")
        if isinstance(r, Published)
    ]


def event_rows(run_id: str, rows: list[tuple[str, Record]]) -> list[tuple[Any, ...]]:
    return [
        (
            run_id,
            file,
            r.seq,
            r.id,
            r.round,
            r.team,
            r.role,
            r.iteration,
            r.event,
            r.detail,
            *error_cols(r),
            json.dumps(r.data, default=str),
            r.ts.isoformat(),
        )
        for file, r in rows
        if isinstance(r, EventRecord)
    ]


def usage_rows(run_id: str, rows: list[tuple[str, Record]]) -> list[tuple[Any, ...]]:
    """One row per record that made at least one model call."""
    return [
        (
            run_id,
            file,
            *envelope(r),
            r.usage.input_tokens,
            r.usage.output_tokens,
            r.usage.latency_s,
            r.usage.calls,
            r.usage.cost_usd,
        )
        for file, r in rows
        if r.usage.calls > 0
    ]


def all_records(run: RunFolder) -> Iterator[tuple[str, Record]]:
    """Every record read, with the log it came from, in layout order."""
    for file, records in run.files.items():
        for record in records:
            yield file, record


def envelope(r: Record) -> tuple[Any, ...]:
    """The columns records and usage share: seq, record_id, kind, round, seat, role, iteration, model."""
    return (r.seq, r.id, r.kind, r.round, r.team, r.role, r.iteration, r.model)


def error_cols(r: EventRecord) -> tuple[str | None, str | None, str | None]:
    return (r.error.kind, r.error.type, r.error.message) if r.error else (None, None, None)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()

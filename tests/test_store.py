"""The SQL store (``python -m harness.store``): what it holds matches the
JSONL files it indexes, and it re-reads only the runs that changed."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.engine import RunResult
from harness.store.__main__ import main as store_main
from harness.store.fts import KINDS, SearchError, search
from harness.store.sql import DEFAULT_DB_NAME, STORE_SCHEMA_VERSION, StoreError, build_store

# retries and schema failures (events, some with usage) without waiting on backoff
FAULTS = ("model.error_rate=0.2", "model.malformed_rate=0.2", "retry.initial_s=0", "retry.jitter_s=0")


@pytest.fixture
def two_runs(run: Callable[..., RunResult], runs_root: Path) -> tuple[Path, Path]:
    """A drift run (with faults) and a panel run whose judge closes after round 2."""
    drift = run("rounds=2", "run_name=drift", *FAULTS).run_dir
    panel = run("format=panel", "rounds=3", "model.synthesize_rate=1.0", "run_name=panel").run_dir
    return drift, panel


def query(db: Path, sql: str, *args: object) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def jsonl_lines(run_dir: Path) -> list[tuple[str, dict]]:
    """(file, record) for every line of a run but its prompts and raw replies, read here with json alone."""
    out = []
    for path in sorted(run_dir.rglob("*.jsonl")):
        if path.name not in ("prompts.jsonl", "replies.jsonl"):
            rel = path.relative_to(run_dir).as_posix()
            out += [(rel, json.loads(line)) for line in path.read_text().splitlines()]
    return out


def test_store_holds_every_run_record_statement_and_seat(
    two_runs: tuple[Path, Path], runs_root: Path
) -> None:
    report = build_store(runs_root)
    assert report.db == runs_root / DEFAULT_DB_NAME
    assert sorted(report.added) == ["drift", "panel"] and not report.failed
    db = report.db
    assert query(db, "SELECT run_id, format, status FROM runs ORDER BY run_id") == [
        ("drift", "drift", "completed"),
        ("panel", "panel", "completed"),
    ]
    for run_dir in two_runs:
        run_id = run_dir.name
        lines = (run_dir / "shared_memory.jsonl").read_text().splitlines()
        assert lines
        assert query(db, "SELECT count(*) FROM statements WHERE run_id = ?", run_id) == [(len(lines),)]
        raw = jsonl_lines(run_dir)
        assert query(db, "SELECT count(*) FROM records WHERE run_id = ?", run_id) == [(len(raw),)]
        events = sum(1 for _, r in raw if r["kind"] == "event")
        assert query(db, "SELECT count(*) FROM events WHERE run_id = ?", run_id) == [(events,)]
        layout = json.loads((run_dir / "manifest.json").read_text())["layout"]
        assert query(db, "SELECT seat, alias FROM seats WHERE run_id = ? ORDER BY rowid", run_id) == [
            (s["name"], s["alias"]) for s in layout["seats"]
        ]
    # every statement carries its seat's alias, even where the record has none (drift)
    assert query(db, "SELECT DISTINCT alias FROM statements WHERE run_id = 'drift' ORDER BY alias") == [
        ("CONS",),
        ("PROS",),
    ]
    assert query(db, "SELECT count(*) FROM events WHERE run_id = 'drift'")[0][0] > 0  # the faults happened
    assert query(db, "SELECT count(*) FROM records WHERE kind = 'prompt'") == [(0,)]


def test_tokens_per_run_and_seat_equal_the_jsonl_usage(two_runs: tuple[Path, Path], runs_root: Path) -> None:
    db = build_store(runs_root).db
    for run_dir in two_runs:
        raw = [(f, r) for f, r in jsonl_lines(run_dir) if r["usage"]["calls"] > 0]
        expected = (
            sum(r["usage"]["input_tokens"] for _, r in raw),
            sum(r["usage"]["output_tokens"] for _, r in raw),
            sum(r["usage"]["calls"] for _, r in raw),
        )
        got = query(
            db,
            "SELECT sum(input_tokens), sum(output_tokens), sum(calls) FROM usage WHERE run_id = ?",
            run_dir.name,
        )
        assert got == [expected]
        # the manifest's counts agree with its logs for a completed run
        assert query(
            db, "SELECT input_tokens, output_tokens, model_calls FROM runs WHERE run_id = ?", run_dir.name
        ) == [expected]
        by_seat: dict[str | None, int] = {}
        for _, r in raw:
            by_seat[r["team"]] = by_seat.get(r["team"], 0) + r["usage"]["input_tokens"]
        rows = query(
            db, "SELECT seat, sum(input_tokens) FROM usage WHERE run_id = ? GROUP BY seat", run_dir.name
        )
        assert dict(rows) == by_seat
        # every call's reply was kept, and they cost what the records say (no crash: none replayed)
        replies = [
            json.loads(line) for p in run_dir.rglob("replies.jsonl") for line in p.read_text().splitlines()
        ]
        kept = [sum(r["usage"][k] for r in replies) for k in ("input_tokens", "output_tokens", "calls")]
        assert tuple(kept) == expected


def test_judge_decisions_come_with_their_reasons(two_runs: tuple[Path, Path], runs_root: Path) -> None:
    db = build_store(runs_root).db
    panel = two_runs[1]
    expected = [json.loads(line) for line in (panel / "public/decisions.jsonl").read_text().splitlines()]
    rows = query(
        db,
        """
        SELECT round, json_extract(json, '$.decision'), json_extract(json, '$.reason') FROM records
        WHERE run_id = 'panel' AND kind = 'decision' ORDER BY round""",
    )
    assert rows == [(d["round"], "SYNTHESIZE", d["reason"]) for d in expected]
    assert rows  # the judge closed the panel after round 2


def test_second_build_reads_nothing_and_a_touched_run_alone_is_reread(
    two_runs: tuple[Path, Path], runs_root: Path
) -> None:
    drift, panel = two_runs
    build_store(runs_root)
    again = build_store(runs_root)
    assert again.reread == [] and again.unchanged == 2 and again.removed == []

    log = panel / "analyst_b" / "thinking.jsonl"
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    touched = build_store(runs_root)
    assert touched.updated == ["panel"] and touched.added == [] and touched.unchanged == 1
    assert build_store(runs_root).reread == []


def test_a_torn_last_line_is_indexed_up_to_the_last_complete_record(
    two_runs: tuple[Path, Path], runs_root: Path
) -> None:
    drift, _ = two_runs
    db = build_store(runs_root).db
    shared = drift / "shared_memory.jsonl"
    complete = len(shared.read_text().splitlines())
    with open(shared, "ab") as fh:  # what a crash mid-append leaves
        fh.write(b'{"schema_version":1,"id":"r0003.pros.argu')
    report = build_store(runs_root)
    assert report.updated == ["drift"] and not report.failed
    assert query(db, "SELECT count(*) FROM statements WHERE run_id = 'drift'") == [(complete,)]
    notes = query(db, "SELECT read_notes FROM runs WHERE run_id = 'drift'")[0][0]
    assert "torn last line" in notes and "shared_memory.jsonl" in notes
    assert query(db, "SELECT read_notes FROM runs WHERE run_id = 'panel'") == [(None,)]


def test_a_deleted_run_folder_loses_every_row(two_runs: tuple[Path, Path], runs_root: Path) -> None:
    _, panel = two_runs
    db = build_store(runs_root).db
    shutil.rmtree(panel)
    report = build_store(runs_root)
    assert report.removed == ["panel"] and report.reread == [] and report.unchanged == 1
    for table in ("runs", "seats", "records", "statements", "events", "usage"):
        assert query(db, f"SELECT count(*) FROM {table} WHERE run_id = 'panel'") == [(0,)], table
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


def test_an_unreadable_manifest_fails_that_run_alone(two_runs: tuple[Path, Path], runs_root: Path) -> None:
    _, panel = two_runs
    db = build_store(runs_root).db
    (panel / "manifest.json").write_text('{"run_id": ')
    report = build_store(runs_root)
    assert list(report.failed) == ["panel"]
    assert report.failed["panel"].startswith(  # the store's own error, naming the file
        f"RunFolderError: {panel / 'manifest.json'}: unreadable: not valid JSON ("
    )
    assert report.unchanged == 1
    assert query(db, "SELECT run_id FROM runs") == [("drift",)]
    assert query(db, "SELECT count(*) FROM records WHERE run_id = 'panel'") == [(0,)]


def test_read_manifest_names_the_file_and_field_in_one_line(tmp_path: Path) -> None:
    """A notebook calling ``read_manifest`` on a bad manifest.json gets the store's own
    one-line error (a ``ValueError``), never pydantic's page of validation errors."""
    from harness.store.records import FOLDER_VERSION
    from harness.store.rundir import RunFolderError, read_manifest

    path = tmp_path / "manifest.json"
    for text, gist in [
        ('{"run_id": ', "not valid JSON (EOF while parsing a value at line 1 column 11)"),
        ("[1]", "the file: Input should be an object"),
        (json.dumps({"folder_version": FOLDER_VERSION}), "run_id: Field required (and "),
    ]:
        path.write_text(text)
        with pytest.raises(RunFolderError) as err:
            read_manifest(tmp_path)
        assert str(err.value).startswith(f"{path}: unreadable: {gist}") and "\n" not in str(err.value)


def test_runs_in_subfolders_are_keyed_by_their_relative_path(
    run: Callable[..., RunResult], runs_root: Path, tmp_path: Path
) -> None:
    run_dir = run("rounds=1", "run_name=only").run_dir
    nested = runs_root / "sweep-x" / "cell-1"
    nested.parent.mkdir()
    run_dir.rename(nested)
    assert build_store(runs_root).added == ["sweep-x/cell-1"]


def test_rebuild_and_an_older_schema_version_start_from_scratch(
    two_runs: tuple[Path, Path], runs_root: Path
) -> None:
    db = build_store(runs_root).db
    counts = query(db, "SELECT count(*) FROM records")
    rebuilt = build_store(runs_root, rebuild=True)
    assert sorted(rebuilt.added) == ["drift", "panel"] and query(db, "SELECT count(*) FROM records") == counts
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    con.close()
    assert sorted(build_store(runs_root).added) == ["drift", "panel"]
    assert query(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(STORE_SCHEMA_VERSION),)]


def test_a_file_that_is_not_a_store_is_left_alone(runs_root: Path, tmp_path: Path) -> None:
    runs_root.mkdir()
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(other)
    with con:
        con.execute("CREATE TABLE mine (x)")
    con.close()
    with pytest.raises(StoreError, match="not a store"):
        build_store(runs_root, other)
    assert query(other, "SELECT name FROM sqlite_master") == [("mine",)]
    with pytest.raises(NotADirectoryError):
        build_store(tmp_path / "missing")


def test_cli_prints_the_db_path_last_and_refuses_a_missing_root(
    two_runs: tuple[Path, Path], runs_root: Path, tmp_path: Path
) -> None:
    def store(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.store", *args], capture_output=True, text=True, timeout=120
        )

    db = tmp_path / "elsewhere" / "runs.sqlite"
    done = store(str(runs_root), "--db", str(db))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == str(db) and "added 2" in lines[-2]
    assert query(Path(lines[-1]), "SELECT count(*) FROM runs") == [(2,)]
    assert "unchanged 2" in store(str(runs_root), "--db", str(db)).stdout

    bad = store(str(tmp_path / "missing"))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1


# --- full-text search (harness.store.fts) ---

SEARCHED = {  # record kind -> (search kind, the field searched), read here from the JSONL alone
    "argument": ("turn", "text"),
    "position": ("turn", "text"),
    "thinking": ("draft", "draft"),
    "critique": ("critique", "feedback"),
    "persona": ("persona", "persona"),
    "role_card": ("persona", "mandate"),
}


def phrase(text: str) -> str:
    """An FTS5 phrase of the first words of ``text``: FTS5 splits words at any other character too."""
    return '"' + " ".join("".join(c if c.isalnum() else " " for c in text).split()[:6]) + '"'


def test_search_finds_every_kind_at_its_run_seat_and_round(
    two_runs: tuple[Path, Path], runs_root: Path
) -> None:
    db = build_store(runs_root).db
    expected: dict[str, int] = {}
    for run_dir in two_runs:
        for file, r in jsonl_lines(run_dir):
            if r["kind"] not in SEARCHED:
                continue
            kind, key = SEARCHED[r["kind"]]
            expected[kind] = expected.get(kind, 0) + 1
            found = search(db, phrase(r[key]), kind=kind, limit=1000)
            (hit,) = [h for h in found.hits if h.record_id == r["id"] and h.run_id == run_dir.name]
            assert (hit.seat, hit.round, hit.file) == (r["team"], r["round"], file) and hit.record_kind == r[
                "kind"
            ]
            assert "[" in hit.snippet and "]" in hit.snippet  # the match is marked
    assert set(expected) == set(KINDS)
    assert dict(query(db, "SELECT kind, count(*) FROM passages GROUP BY kind")) == expected
    assert search(db, "zzzunseenword").total == 0


def test_search_index_follows_added_touched_and_removed_runs(
    two_runs: tuple[Path, Path], runs_root: Path, run: Callable[..., RunResult]
) -> None:
    drift, panel = two_runs
    shutil.rmtree(panel)
    db = build_store(runs_root).db
    before = query(db, "SELECT id FROM passages WHERE run_id = 'drift'")
    added = run("rounds=1", "run_name=added", "seed=7").run_dir
    persona = next(json.loads(x) for x in (added / "pros/persona.jsonl").read_text().splitlines())
    assert build_store(runs_root).added == ["added"]
    # the new run's passages were appended: the old rows (and their index entries) were not rebuilt
    assert query(db, "SELECT id FROM passages WHERE run_id = 'drift'") == before
    assert ("added", persona["id"]) in {
        (h.run_id, h.record_id) for h in search(db, phrase(persona["persona"])).hits
    }

    log = drift / "pros" / "thinking.jsonl"
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert build_store(runs_root).updated == ["drift"]
    shutil.rmtree(added)
    assert build_store(runs_root).removed == ["added"]
    assert not [h for h in search(db, phrase(persona["persona"])).hits if h.run_id == "added"]
    # the index holds exactly the rows of the table it indexes, none left behind
    con = sqlite3.connect(db)
    con.execute("INSERT INTO passages_fts (passages_fts, rank) VALUES ('integrity-check', 1)")
    con.close()
    assert query(db, "SELECT count(*) FROM passages_fts") == query(db, "SELECT count(*) FROM passages")


def test_search_cli_prints_run_seat_round_and_a_marked_snippet(
    two_runs: tuple[Path, Path], runs_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    drift, _ = two_runs
    first = json.loads((drift / "shared_memory.jsonl").read_text().splitlines()[0])
    word = first["text"].split()[0]
    assert store_main(["search", word, "--root", str(runs_root), "--kind", "turn", "--limit", "500"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert f"drift  {first['team']}  round {first['round']}  turn  " in out
    # the search folds case; a hit is marked as its text writes it
    assert all(f"**{word.lower()}**" in line.lower() and "  turn  " in line for line in lines)
    assert err.splitlines()[-1].startswith(f"{len(lines)} hit")

    for bad in ('"as an', "x:y", "AND"):
        assert store_main(["search", bad, "--root", str(runs_root)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: bad search query") and len(err.splitlines()) == 1, err
        with pytest.raises(SearchError):
            search(runs_root / DEFAULT_DB_NAME, bad)


def test_the_viewer_search_box_links_each_hit_to_its_round(
    two_runs: tuple[Path, Path], runs_root: Path
) -> None:
    from harness.view.catalog import Catalog
    from harness.view.server import route

    drift, _ = two_runs
    catalog = Catalog(runs_root)
    last = json.loads((drift / "shared_memory.jsonl").read_text().splitlines()[-1])
    status, html = route(catalog, f"/search?q={quote(phrase(last['text']))}&kind=turn")
    assert status == 200 and "<mark>" in html
    link = f'href="/run/drift#round-{last["round"]}"'
    assert link in html, html[-3000:]
    assert f'id="round-{last["round"]}"' in route(catalog, "/run/drift")[1]
    assert 'id="problem"' in route(catalog, "/search?q=%22as+an")[1]  # a malformed query is said, not raised

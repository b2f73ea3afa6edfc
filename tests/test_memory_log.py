"""Append-only logs: record fields, the hash chain, idempotent appends and
torn-line quarantine, both on ``JsonlLog`` directly and on a whole run; and
logs that keep only their last rounds in memory (``keep_rounds``): bounded,
read back from disk equal, chained on, and resumed as if never stopped."""

from __future__ import annotations

import importlib
import json
from datetime import datetime

import pytest

from harness.engine import resume_run
from harness.models import build_model
from harness.models.base import ChatModel, Completion, ModelRequest
from harness.schema import ModelConfig
from harness.store.memory import CorruptLogError, JsonlLog, RunMemory, line_hash
from harness.store.records import EventRecord, PersonaRecord, parse_record
from harness.store.rundir import read_manifest
from harness.verify import verify

RUN_LOGS = [
    "shared_memory.jsonl",
    "events.jsonl",
    "public/prompts.jsonl",  # what roles with no seat (the topic) were shown
    "public/replies.jsonl",  # and what the models replied to them
    *(
        f"{team}/{kind}.jsonl"
        for team in ("pros", "cons")
        for kind in ("persona", "thinking", "critique", "prompts", "replies")
    ),
]


def persona(i: int, round_: int = 1) -> PersonaRecord:
    return PersonaRecord(
        id=f"r{round_:04d}.pros.persona.i{i}",
        round=round_,
        team="pros",
        role="persona",
        iteration=i,
        decision="keep",
        persona=f"persona {i}",
        rationale="why",
        version=1,
    )


def assert_chain(path) -> list[dict]:
    """Seq counts 0, 1, 2...; each prev_hash is the sha256 of the line before."""
    lines = path.read_bytes().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["seq"] for r in rows] == list(range(len(rows))), path
    previous = None
    for line, row in zip(lines, rows, strict=True):
        assert row["prev_hash"] == previous, path
        previous = line_hash(line)
    return rows


def test_append_only_prefix_and_chain(tmp_path):
    path = tmp_path / "log.jsonl"
    log: JsonlLog[PersonaRecord] = JsonlLog(path)
    assert path.exists() and path.read_bytes() == b""
    before = b""
    for i in range(5):
        stored = log.append(persona(i))
        after = path.read_bytes()
        assert after.startswith(before) and after.endswith(b"\n")
        assert after.count(b"\n") == i + 1  # exactly one new line per append
        assert stored.seq == i
        before = after
    assert_chain(path)
    assert log.last_hash == line_hash(path.read_bytes().splitlines()[-1])


def test_duplicate_id_is_not_appended_twice(tmp_path):
    path = tmp_path / "log.jsonl"
    log: JsonlLog[PersonaRecord] = JsonlLog(path)
    first = log.append(persona(0))
    log.append(persona(1))
    size = path.stat().st_size
    again = log.append(persona(0).model_copy(update={"persona": "a different text"}))
    assert path.stat().st_size == size
    assert again == first and again.persona == "persona 0"
    assert len(log) == 2
    # the same holds after a reopen (a replayed node after a crash)
    reopened: JsonlLog[PersonaRecord] = JsonlLog(path)
    assert reopened.append(persona(1)).seq == 1
    assert path.stat().st_size == size


def test_reopen_continues_the_chain(tmp_path):
    path = tmp_path / "log.jsonl"
    log: JsonlLog[PersonaRecord] = JsonlLog(path)
    for i in range(3):
        log.append(persona(i))
    reopened: JsonlLog[PersonaRecord] = JsonlLog(path)
    assert [r.id for r in reopened] == [r.id for r in log]
    assert reopened.append(persona(3)).seq == 3
    assert_chain(path)


@pytest.mark.parametrize(
    "torn",
    [
        b'{"schema_version": 1, "id": "r0001.pros.pers',  # crash mid-write, no newline
        b'{"kind": "persona", "id": "x"}\n',  # complete JSON line that is not a valid record
        b"\x00\x00\x00",  # zeros after a power cut
    ],
)
def test_torn_last_line_is_quarantined_on_reopen(tmp_path, torn):
    path = tmp_path / "log.jsonl"
    log: JsonlLog[PersonaRecord] = JsonlLog(path)
    for i in range(2):
        log.append(persona(i))
    good = path.read_bytes()
    with open(path, "ab") as fh:
        fh.write(torn)
    reopened: JsonlLog[PersonaRecord] = JsonlLog(path)
    assert path.read_bytes() == good  # the torn line is gone from the log...
    quarantine = path.with_name("log.jsonl.quarantine")
    assert quarantine.read_bytes().rstrip(b"\n") == torn.rstrip(b"\n")  # ...but kept aside
    assert len(reopened.quarantined) == 1
    assert len(reopened) == 2
    # the next append chains onto the last good line, not the torn one
    assert reopened.append(persona(2)).prev_hash == line_hash(good.splitlines()[-1])
    assert_chain(path)


def test_corrupt_middle_line_refuses_to_open(tmp_path):
    path = tmp_path / "log.jsonl"
    log: JsonlLog[PersonaRecord] = JsonlLog(path)
    for i in range(3):
        log.append(persona(i))
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"edited": true}\n'
    path.write_bytes(b"".join(lines))
    with pytest.raises(CorruptLogError, match="line 2"):
        JsonlLog(path)


def test_every_run_log_is_a_valid_chain_with_full_envelopes(run, records):
    result = run(
        "rounds=3", "model.reject_first=1", "model.error_rate=0.2", "retry.initial_s=0", "retry.jitter_s=0"
    )
    run_dir = result.run_dir
    assert sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*.jsonl")) == sorted(RUN_LOGS)
    for name in RUN_LOGS:
        rows = assert_chain(run_dir / name)
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), f"duplicate ids in {name}"
        for row in rows:
            for key in ("id", "seq", "round", "team", "role", "iteration", "ts", "model", "usage"):
                assert key in row, (name, key)
            datetime.fromisoformat(row["ts"])
            assert set(row["usage"]) >= {"input_tokens", "output_tokens", "latency_s"}
    # model calls carry the spec and real usage on the record that consumed them
    for team in ("pros", "cons"):
        for kind in ("persona", "thinking", "critique"):
            for rec in records(run_dir / team / f"{kind}.jsonl"):
                assert rec.team == team and rec.role == kind
                assert rec.model == "scripted:default"
                assert rec.usage.calls >= 1
                assert rec.usage.input_tokens > 0 and rec.usage.output_tokens > 0
                assert rec.usage.latency_s >= 0
        for prompt in records(run_dir / team / "prompts.jsonl"):
            assert prompt.model == "scripted:default" and prompt.messages
    # ids are deterministic: round, team, role, iteration
    first = records(run_dir / "pros" / "critique.jsonl")[0]
    assert (first.id, first.round, first.iteration) == ("r0001.pros.critique.i0", 1, 0)
    # timestamps never go backwards within a file
    for name in RUN_LOGS:
        stamps = [r.ts for r in records(run_dir / name)]
        assert stamps == sorted(stamps), name


def test_model_call_events_carry_the_model_spec_in_the_envelope(run, records):
    result = run("rounds=2", "model.error_rate=0.3", "retry.initial_s=0", "retry.jitter_s=0")
    retries = [e for e in records(result.run_dir / "events.jsonl") if e.event == "retry"]
    assert retries
    assert all(isinstance(e, EventRecord) and e.model == "scripted:default" for e in retries)


def test_second_run_never_touches_the_first(run):
    first = run("rounds=2")
    snapshot = {p: p.read_bytes() for p in first.run_dir.rglob("*") if p.is_file()}
    second = run("rounds=2")
    assert second.run_dir != first.run_dir
    assert {p: p.read_bytes() for p in first.run_dir.rglob("*") if p.is_file()} == snapshot


# -- a log that keeps only its last rounds in memory --------------------------


def fill(log: JsonlLog[PersonaRecord], rounds: int, per_round: int = 3) -> list[PersonaRecord]:
    return [log.append(persona(i, r)) for r in range(1, rounds + 1) for i in range(per_round)]


def test_eviction_keeps_the_in_memory_count_bounded(tmp_path):
    log: JsonlLog[PersonaRecord] = JsonlLog(tmp_path / "log.jsonl", keep_rounds=2)
    held = []
    for r in range(1, 41):
        fill_round = [log.append(persona(i, r)) for i in range(3)]
        assert fill_round[-1].seq == 3 * r - 1
        held.append(log.in_memory)
    assert max(held) == 3 * 3  # the round in flight and the two before it, never more
    assert len(log) == 120 and log.in_memory == 9
    assert [r.round for r in log] == [38] * 3 + [39] * 3 + [40] * 3
    unbounded: JsonlLog[PersonaRecord] = JsonlLog(tmp_path / "all.jsonl")
    fill(unbounded, 40)
    assert unbounded.in_memory == 120  # keep_rounds=None keeps every record, as before


def test_evicted_records_read_back_from_disk_equal_to_the_originals(tmp_path):
    kept: JsonlLog[PersonaRecord] = JsonlLog(tmp_path / "log.jsonl", keep_rounds=1)
    originals = fill(kept, 12)
    assert kept.in_memory == 6
    for record in originals:
        assert kept.get(record.id) == record  # rounds 1..10 come from the file
    assert kept.get("r0003.pros.persona.i9") is None and kept.get("no-round-prefix") is None
    whole: JsonlLog[PersonaRecord] = JsonlLog(tmp_path / "log.jsonl")  # the same file, read whole
    assert whole.in_memory == 36 and list(whole) == originals
    for round_ in (0, 1, 2, 5, 11, 12, 13):
        assert kept.since_round(round_) == whole.since_round(round_), round_
        assert kept.position_before_round(round_) == whole.position_before_round(round_), round_
    assert kept.after(5) == whole.after(5) == originals[5:]
    assert kept.last() == originals[-1]


def test_appending_after_eviction_keeps_the_chain_and_refuses_old_ids(tmp_path):
    path = tmp_path / "log.jsonl"
    log: JsonlLog[PersonaRecord] = JsonlLog(path, keep_rounds=1)
    first = fill(log, 10)[0]
    size = path.stat().st_size
    again = log.append(persona(0, 1).model_copy(update={"persona": "a replayed copy"}))
    assert again == first and path.stat().st_size == size  # an evicted id is still the log's
    log.append(persona(0, 11))
    assert log.last_hash == line_hash(path.read_bytes().splitlines()[-1])
    rows = assert_chain(path)
    assert len(rows) == 31 and rows[-1]["seq"] == 30


def test_a_log_opened_at_a_position_reads_its_unread_head_from_disk(tmp_path):
    path = tmp_path / "log.jsonl"
    originals = fill(JsonlLog(path), 10)
    start = JsonlLog(path).position_before_round(9)
    tail: JsonlLog[PersonaRecord] = JsonlLog(path, start=start, keep_rounds=1)
    assert tail.in_memory == 6
    assert tail.get(originals[0].id) == originals[0]
    assert tail.since_round(2) == originals[3:]
    assert tail.append(persona(0, 11)).seq == 30
    assert_chain(path)


def test_a_long_run_keeps_few_records_in_memory_and_verifies(run, monkeypatch):
    engine = importlib.import_module("harness.engine.execute")  # the module: the package exports its function
    opened: list[RunMemory] = []
    monkeypatch.setattr(engine, "RunMemory", lambda *a, **k: opened.append(RunMemory(*a, **k)) or opened[-1])
    result = run("rounds=12", "memory.window_rounds=1", "model.reject_first=1")
    assert verify(result.run_dir) == ([], [])
    (memory,) = opened
    for name, log in memory.logs().items():
        on_disk = records_of(result.run_dir / name)
        assert log.in_memory == sum(r.round >= 11 for r in on_disk), name  # rounds 11 and 12 only
        assert len(log) == len(on_disk)
    assert memory.shared.in_memory == 4 and len(memory.shared) == 24


def test_resuming_a_long_run_with_a_short_window_equals_an_uninterrupted_one(run, runs_root):
    args = ("rounds=30", "memory.window_rounds=2", "model.reject_first=1")
    reference = run(*args).run_dir
    calls = {"n": 0}

    def crashing(cfg: ModelConfig) -> ChatModel:
        inner = build_model(cfg)

        class Crashing:
            spec = inner.spec

            def complete(self, request: ModelRequest) -> Completion:
                calls["n"] += 1
                if request.tags["round"] == 23 and request.tags["role"] == "thinking":
                    raise Crash  # mid-round: the round's persona has landed, its thinking has not
                return inner.complete(request)

            def model_files(self) -> dict[str, str]:
                return inner.model_files()

        return Crashing()

    with pytest.raises(Crash):
        run(*args, build=crashing)
    (run_dir,) = [p for p in runs_root.iterdir() if p != reference]
    assert resume_run(run_dir).manifest.status == "completed"
    assert verify(run_dir) == ([], [])
    for name in read_manifest(reference).layout.files():  # type: ignore[union-attr]
        if name != "events.jsonl":  # the resume adds its event
            assert said(run_dir / name) == said(reference / name), name


class Crash(BaseException):
    """Stands for a SIGKILL: nothing in the harness catches it."""


def records_of(path) -> list:  # type: ignore[no-untyped-def]
    return [parse_record(line) for line in path.read_bytes().splitlines()]


def said(path) -> list:  # type: ignore[no-untyped-def]
    """What a log says, less what differs between identical runs (time, speed, the chain over time)."""
    volatile = {"ts": True, "prev_hash": True, "usage": {"latency_s"}}
    return [(r.id, r.model_dump(mode="json", exclude=volatile)) for r in records_of(path)]


def test_fsync_round_syncs_the_logs_before_each_snapshot_and_the_manifest(run, monkeypatch):
    """``memory.fsync=round``: no log line is fsynced as it is appended; every log
    written since the last sync is fsynced before the next snapshot or manifest, and
    the logs hold what ``record`` writes (goldens: tests/test_formats_golden.py)."""
    import os

    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    run_dir = run("rounds=2", "memory.fsync=round").run_dir
    names = [os.path.basename(p) for p in synced]
    first_snapshot = next(i for i, n in enumerate(names) if n.startswith(".round-0001.json"))
    before = {str(run_dir / f) for f in ("pros/replies.jsonl", "cons/prompts.jsonl", "shared_memory.jsonl")}
    assert before <= set(synced[:first_snapshot])  # round 1's logs on disk before its snapshot
    replies = (run_dir / "pros/replies.jsonl").read_text().count("\n")
    assert synced.count(str(run_dir / "pros/replies.jsonl")) < replies  # not once a line
    assert names[-2].startswith(".manifest.json")  # the manifest (then its folder) last
    assert verify(run_dir) == ([], [])


def test_fsync_policy_is_checked_before_anything_is_written(settings):
    from harness.schema import ConfigError

    with pytest.raises(ConfigError, match=r"^memory.fsync: must be record or round, got 'call'$"):
        settings("memory.fsync=call")

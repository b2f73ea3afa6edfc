"""Grounding signals of grounded debates: every number per turn and per side
agrees with counts taken straight from the JSONL files (citation marks,
searches and their hits, retry events, the verdict), other formats yield
none, and ``analyze`` and the CLI write and print them only when a grounded
run is there."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis import analyze, grounding_summary, grounding_turns, load_runs
from analysis.__main__ import main

CLAIM = 'topic.text="Job\'s suffering is deserved"'
HASH = {"embedder": "hash", "figures": False, "progress": False}


def collection(folder: Path, search_cache: Path, against: int) -> tuple[str, ...]:
    """A collection where FOR's words are in three passages and AGAINST's in
    ``against``, on a claim no passage mentions: each FOR query finds three
    passages, each AGAINST query ``against``, so the hits are uneven by construction."""
    folder.mkdir()
    pro = "benefit gain progress freedom growth opportunity efficiency trust evidence"
    con = "risk cost harm burden loss inequality failure doubt danger"
    rows = [{"id": f"pro-{i}", "text": f"Passage {i} speaks of {pro}."} for i in range(3)]
    rows += [{"id": f"con-{i}", "text": f"Passage {i} speaks of {con}."} for i in range(against)]
    (folder / "passages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return (
        "format=grounded",
        'topic.text="Xyzzy plugh"',
        f"search.collection={folder}",
        f"search.cache_dir={search_cache}",
    )


@pytest.fixture
def lopsided(tmp_path: Path, search_cache: Path) -> tuple[str, ...]:
    return collection(tmp_path / "lopsided", search_cache, against=1)


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def logged(run_dir: Path) -> tuple[list[dict], dict[str, dict]]:
    """The cited turns, and every search of either seat by id, as raw JSON."""
    turns = [r for r in jsonl(run_dir / "shared_memory.jsonl") if r["kind"] == "cited_turn"]
    searches = {s["id"]: s for seat in ("for", "against") for s in jsonl(run_dir / seat / "searches.jsonl")}
    return turns, searches


def marks(turns: list[dict], status: str) -> int:
    return sum(c["status"] == status for t in turns for c in t["citations"])


def test_clean_citations_turn_by_turn_match_the_logs(run, grounded):
    run_dir = run(*grounded, "rounds=3", "model.bad_citation_rate=0.0").run_dir
    turns, searches = logged(run_dir)
    g = grounding_turns(load_runs(run_dir, cache=False))
    assert len(g) == len(turns) == 6
    assert list(zip(g["round"], g.team, g.side, strict=True)) == [
        (t["round"], t["team"], t["side"]) for t in turns
    ]
    for row, t in zip(g.itertuples(), turns, strict=True):
        found = [searches[s] for s in t["searches"]]
        assert found and all(s["team"] == t["team"] for s in found)
        assert row.citations == len(t["citations"]) > 0 and row.cited == 1
        assert (row.supported, row.unsupported, row.unknown) == (len(t["citations"]), 0, 0)
        assert row.precision == 1.0
        assert row.searches == len(found)
        assert row.hits == sum(len(s["hits"]) for s in found) > 0
        assert row.hits_per_search == row.hits / len(found)
        assert row.search_latency_s == pytest.approx(sum(s["latency_s"] for s in found))
        assert row.truncated == t["truncated"] and row.search_retries == 0
    summary = grounding_summary(g).set_index("side")
    for side in ("for", "against"):
        mine = [s for s in searches.values() if s["team"] == side]
        assert summary.loc[side, "turns"] == 3 and summary.loc[side, "cited_share"] == 1.0
        assert summary.loc[side, "precision"] == 1.0
        assert summary.loc[side, "searches"] == len(mine)  # every search led to a published turn
        assert summary.loc[side, "hits"] == sum(len(s["hits"]) for s in mine)
        assert summary.loc[side, "unsupported_quotes"] == summary.loc[side, "unknown_citations"] == 0


def test_bad_citations_have_zero_precision_and_are_counted_by_kind(run, grounded):
    run_dir = run(*grounded, "rounds=2", "model.bad_citation_rate=1.0").run_dir
    turns, _ = logged(run_dir)
    g = grounding_turns(run_dir, cache=False)  # a run folder works as well as tables
    assert len(g) == 4 and (g.precision == 0.0).all() and (g.supported == 0).all()
    assert (g.unsupported + g.unknown == g.citations).all()
    assert g.citations.tolist() == [len(t["citations"]) for t in turns]
    assert g.unsupported.tolist() == [marks([t], "unsupported") for t in turns]
    summary = grounding_summary(g)
    assert summary.unsupported_quotes.sum() == marks(turns, "unsupported") > 0
    assert summary.unknown_citations.sum() == marks(turns, "unknown") > 0
    assert (summary.precision == 0.0).all()


def test_mixed_citations_give_micro_precision_and_cited_share(run, grounded):
    run_dir = run(*grounded, "rounds=4", "model.bad_citation_rate=0.3").run_dir
    turns, _ = logged(run_dir)
    summary = grounding_summary(grounding_turns(run_dir, cache=False)).set_index("side")
    for side in ("for", "against"):
        mine = [t for t in turns if t["side"] == side]
        cites = sum(len(t["citations"]) for t in mine)
        assert summary.loc[side, "precision"] == marks(mine, "supported") / cites
        assert summary.loc[side, "cited_share"] == sum(bool(t["citations"]) for t in mine) / len(mine)
    assert 0 < marks(turns, "supported") < sum(len(t["citations"]) for t in turns)  # truly mixed


def test_hit_asymmetry_and_winner_match_a_hand_computation(run, lopsided):
    run_dir = run(
        *lopsided, "rounds=2", "search.transport=local", "format.final=judge", "model.judge_winner=against"
    ).run_dir
    _, searches = logged(run_dir)
    hits = {
        side: sum(len(s["hits"]) for s in searches.values() if s["team"] == side)
        for side in ("for", "against")
    }
    assert hits == {"for": 6, "against": 2}  # 3 passages a search for FOR, 1 for AGAINST, one search a turn
    tables = load_runs(run_dir, cache=False)
    summary = grounding_summary(grounding_turns(tables), tables)
    expected = (hits["for"] - hits["against"]) / (hits["for"] + hits["against"])
    assert summary.hit_asymmetry.tolist() == [expected, expected] == [0.5, 0.5]
    (verdict,) = jsonl(run_dir / "public" / "verdicts.jsonl")
    assert summary.winner.tolist() == [verdict["winner"]] * 2 == ["against"] * 2
    assert summary.set_index("side").hits.to_dict() == hits


def test_a_side_whose_searches_find_nothing_cites_nothing(run, search_cache, tmp_path):
    barren = collection(tmp_path / "barren", search_cache, against=0)
    run_dir = run(*barren, "rounds=2", "search.transport=local").run_dir
    turns, searches = logged(run_dir)
    against = [s for s in searches.values() if s["team"] == "against"]
    assert against and not any(s["hits"] for s in against)  # it searched, and found nothing
    assert not any(t["citations"] for t in turns if t["side"] == "against")
    g = grounding_turns(run_dir, cache=False).set_index("side")
    assert g.loc["against", "cited"].tolist() == [0, 0] and g.loc["for", "cited"].tolist() == [1, 1]
    assert g.loc["against", "precision"].isna().all() and g.loc["against", "hits_per_search"].tolist() == [
        0,
        0,
    ]
    assert g.loc["against", "searches"].tolist() == [sum(s["round"] == r for s in against) for r in (1, 2)]
    summary = grounding_summary(g.reset_index()).set_index("side")
    assert summary.cited_share.to_dict() == {"for": 1.0, "against": 0.0}
    assert math.isnan(summary.loc["against", "precision"]) and summary.loc["against", "hits"] == 0
    assert summary.hit_asymmetry.tolist() == [1.0, 1.0]  # only FOR's queries found evidence


def test_asymmetry_is_nan_without_hits_or_without_a_side():
    one = {
        "run_id": "a",
        "round": 1,
        "citations": 0,
        "cited": 0,
        "supported": 0,
        "unsupported": 0,
        "unknown": 0,
        "searches": 1,
        "truncated": False,
        "search_retries": 0,
    }
    turns = pd.DataFrame(
        [
            {**one, "team": "for", "side": "for", "hits": 0},
            {**one, "team": "against", "side": "against", "hits": 0},
            {**one, "run_id": "b", "team": "for", "side": "for", "hits": 3},
        ]
    )
    summary = grounding_summary(turns)
    assert summary.hit_asymmetry.isna().all() and summary.precision.isna().all()
    assert summary.winner.isna().all() and summary.cited_share.tolist() == [0.0, 0.0, 0.0]


def test_search_retries_count_the_retry_events_of_the_turn(run, lopsided, monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFT_SEARCH_FAULT", "crash@2")  # each new server process crashes at its 2nd call
    run_dir = run(
        *lopsided,
        "rounds=1",
        "search.transport=mcp",
        "retry.initial_s=0",
        "retry.jitter_s=0",
        "model.error_rate=0.3",
        f"runs_root={tmp_path / 'faulty'}",
    ).run_dir
    events = [e for e in jsonl(run_dir / "events.jsonl") if e["event"] == "retry"]
    retries = [e for e in events if e["role"] == "search"]
    assert retries and len(retries) < len(events)  # model calls were retried too: not counted
    g = grounding_turns(run_dir, cache=False)
    for row in g.itertuples():
        assert row.search_retries == sum(e["round"] == row.round and e["team"] == row.team for e in retries)
    assert g.search_retries.sum() == len(retries)


def test_a_drift_run_has_no_grounding_and_analyze_writes_none(run):
    run_dir = run("rounds=2").run_dir
    assert grounding_turns(run_dir, cache=False).empty
    result = analyze(run_dir, cache=False, **HASH)
    assert result.grounding_turns.empty and result.grounding_summary.empty
    out = result.files[0].parent
    assert (out / "turns.parquet").exists() and not list(out.glob("grounding*"))


def test_analyze_writes_grounding_of_the_grounded_runs_only(run, grounded, tmp_path):
    root = tmp_path / "mixed"
    shutil.copytree(run(*grounded, "rounds=2", "model.bad_citation_rate=0.3").run_dir, root / "grounded")
    shutil.copytree(run("rounds=2").run_dir, root / "drift")
    result = analyze(root, **HASH)
    out = root / "_analysis"
    turns = pd.read_parquet(out / "grounding_turns.parquet")
    summary = pd.read_parquet(out / "grounding_summary.parquet")
    logged_turns, _ = logged(root / "grounded")
    assert set(turns.run_id) == set(summary.run_id) == {"grounded"}
    assert turns.citations.tolist() == [len(t["citations"]) for t in logged_turns]
    assert turns.supported.sum() == marks(logged_turns, "supported")
    assert summary.side.tolist() == ["for", "against"] and summary.turns.tolist() == [2, 2]
    assert {out / "grounding_turns.parquet", out / "grounding_summary.parquet"} <= set(result.files)
    again = analyze(root, **HASH)  # warm: from the grounding cache, the same rows
    assert (out / "cache" / "grounding" / "turns.parquet").exists()
    pd.testing.assert_frame_equal(again.grounding_turns, result.grounding_turns, check_dtype=False)
    shutil.rmtree(root / "grounded")
    analyze(root, **HASH)  # the grounded run is gone: so are its tables
    assert not list(out.glob("grounding*"))


def test_cli_prints_the_grounding_table_only_when_grounded(run, grounded, tmp_path, capsys):
    drift = tmp_path / "drift"
    shutil.copytree(run("rounds=2").run_dir, drift / "run")
    assert main([str(drift), "--embedder", "hash", "--no-progress", "--no-figures"]) == 0
    assert "grounding (" not in capsys.readouterr().out  # (the tmp path says "grounding")
    runs = tmp_path / "grounded"
    shutil.copytree(run(*grounded, "rounds=2").run_dir, runs / "run")
    assert main([str(runs), "--embedder", "hash", "--no-progress", "--no-figures"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("grounding (4 cited turns):")
    header, *rows = out[start + 1 : start + 4]
    assert header.split() == [
        "run",
        "side",
        "turns",
        "cited_share",
        "precision",
        "unsupported",
        "unknown",
        "searches",
        "hits",
        "hit_asym",
        "winner",
    ]
    assert [r.split()[:3] for r in rows] == [["run", "for", "2"], ["run", "against", "2"]]
    assert not any(math.isnan(float(r.split()[4])) for r in rows)

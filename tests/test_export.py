"""``python -m harness.export``: the report of a drift and of a panel run, in
md, txt and json, written to stdout or a file, never into the run folder
unless asked; a torn run exports what it holds; bad input is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.engine import RunResult
from harness.export.__main__ import main as export_main
from harness.export.styles import export_run
from harness.store.reader import read_run
from harness.store.records import DecisionRecord, Published, SummaryRecord, SynthesisRecord

Run = Callable[..., RunResult]


def statements(run_dir: Path) -> list[Published]:
    return [r for r in read_run(run_dir).of("shared_memory.jsonl") if isinstance(r, Published)]


def public(run_dir: Path, log: str) -> list:
    return read_run(run_dir).of(f"public/{log}.jsonl")


def export_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.export", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def listing(run_dir: Path) -> dict[str, tuple[int, int]]:
    """Every file of the run folder with its size and modification time."""
    return {
        str(p.relative_to(run_dir)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def drift(run: Run) -> RunResult:
    return run("rounds=3")


@pytest.fixture
def panel_cap(run: Run) -> RunResult:
    return run("format=panel", "model.synthesize_rate=0.0")


def test_drift_md_has_every_argument_under_its_alias_in_order(drift: RunResult) -> None:
    md = export_run(drift.run_dir, "md")
    said = statements(drift.run_dir)
    assert len(said) == 6
    assert drift.manifest.topic and drift.manifest.topic in md
    at = 0
    for rec in said:
        alias = {"pros": "PROS", "cons": "CONS"}[rec.team or ""]
        block = f"### {alias}\n\n{rec.text}\n"
        assert block in md[at:], f"{rec.id} missing or out of order"
        at = md.index(block, at) + len(block)
    assert "- **Closed:** completed 3 rounds" in md


def test_drift_json_rounds_and_statements_match_the_transcript(drift: RunResult) -> None:
    doc = json.loads(export_run(drift.run_dir, "json"))
    assert doc["header"]["format"] == "drift"
    assert doc["header"]["status"] == "completed"
    assert doc["header"]["roles"] == {"critic": "scripted:default", "topic": "scripted:default"}
    assert len(doc["rounds"]) == drift.manifest.counts.rounds_completed == 3
    texts = [s["text"] for rnd in doc["rounds"] for s in rnd["statements"]]
    assert texts == [r.text for r in statements(drift.run_dir)]
    assert [[s["alias"] for s in rnd["statements"]] for rnd in doc["rounds"]] == [["PROS", "CONS"]] * 3
    assert all(rnd["missing"] == [] for rnd in doc["rounds"])
    assert doc["synthesis"] is None


def test_panel_to_the_cap_shows_cards_summaries_decisions_and_synthesis(panel_cap: RunResult) -> None:
    run_dir = panel_cap.run_dir
    md = export_run(run_dir, "md")
    for seat in panel_cap.manifest.layout.seats:  # type: ignore[union-attr]
        assert f"### {seat.alias}\n" in md
    cards = public(run_dir, "roles")
    assert len(cards) == 4 and all(f"*Mandate:* {c.mandate}" in md for c in cards)
    summaries = [r for r in public(run_dir, "summaries") if isinstance(r, SummaryRecord)]
    decisions = [r for r in public(run_dir, "decisions") if isinstance(r, DecisionRecord)]
    (synthesis,) = [r for r in public(run_dir, "synthesis") if isinstance(r, SynthesisRecord)]
    assert len(summaries) == 4 and len(decisions) >= 1
    assert all(s.text in md for s in summaries)
    assert all(f"**Judge: CONTINUE.** {d.reason}" in md and d.tension in md for d in decisions)
    assert synthesis.text in md and "## Synthesis (closed: cap)" in md

    doc = json.loads(export_run(run_dir, "json"))
    assert doc["header"]["close_reason"] == "cap"
    assert doc["header"]["framework"] and doc["header"]["framework"] in md
    assert [r["number"] for r in doc["rounds"]] == [1, 2, 3, 4]
    assert {s["phase"] for s in doc["rounds"][0]["statements"]} == {"blind"}
    assert [r["summary"] for r in doc["rounds"]] == [s.text for s in summaries]
    assert doc["synthesis"] == {"text": synthesis.text, "close_reason": "cap"}
    assert {s["alias"]: s["card"]["name"] for s in doc["header"]["seats"]} == {
        f"Analyst {c.team[-1].upper()}": c.name for c in cards
    }


def test_panel_judge_closes_at_round_two(run: Run) -> None:
    result = run("format=panel", "model.synthesize_rate=1.0")
    doc = json.loads(export_run(result.run_dir, "json"))
    assert doc["header"]["close_reason"] == "judge"
    assert [r["number"] for r in doc["rounds"]] == [1, 2]
    assert doc["rounds"][0]["decision"] is None
    assert doc["rounds"][1]["decision"]["decision"] == "SYNTHESIZE"
    assert doc["synthesis"]["close_reason"] == "judge"


def test_txt_is_plain_wrapped_text(panel_cap: RunResult) -> None:
    txt = export_run(panel_cap.run_dir, "txt")
    lines = txt.splitlines()
    assert max(map(len, lines)) <= 78
    assert not any(line.lstrip().startswith(("#", "- ", "* ", "> ")) for line in lines)
    assert not any(mark in txt for mark in ("**", "`", "*Tension", "]("))
    flat = " ".join(txt.split())
    assert all(r.text in flat for r in statements(panel_cap.run_dir))
    assert "ROUND 4 (debate)" in lines and "Analyst D:" in lines


def test_cli_out_writes_the_file_and_leaves_the_run_folder_alone(drift: RunResult, tmp_path: Path) -> None:
    before = listing(drift.run_dir)
    out = tmp_path / "report.json"
    done = export_cli(drift.run_dir, "--as", "json", "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert out.read_text() == export_run(drift.run_dir, "json")
    printed = export_cli(drift.run_dir, "--as", "txt")
    assert printed.returncode == 0 and printed.stdout == export_run(drift.run_dir, "txt")
    assert listing(drift.run_dir) == before


def test_cli_refuses_a_path_inside_the_run_folder_unless_forced(drift: RunResult) -> None:
    inside = drift.run_dir / "public" / "report.md"
    refused = export_cli(drift.run_dir, "--out", inside)
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: ") and len(refused.stderr.splitlines()) == 1
    assert str(inside) in refused.stderr and not inside.exists()
    forced = export_cli(drift.run_dir, "--out", inside, "--force-into-run")
    assert forced.returncode == 0 and inside.read_text() == export_run(drift.run_dir, "md")


@pytest.mark.parametrize("what", ["missing", "not_a_run"])
def test_cli_bad_folder_is_one_error_line(tmp_path: Path, what: str) -> None:
    folder = tmp_path / "nowhere"
    if what == "not_a_run":
        folder.mkdir()
    done = export_cli(folder)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
    assert str(folder) in done.stderr


def test_cli_unreadable_manifest_is_one_error_line(drift: RunResult) -> None:
    (drift.run_dir / "manifest.json").write_text('{"run_id": 3}')
    done = export_cli(drift.run_dir)
    assert done.returncode == 2
    assert (
        done.stderr.startswith(f"error: {drift.run_dir}/manifest.json: ")
        and len(done.stderr.splitlines()) == 1
    )


def test_a_line_that_does_not_parse_mid_log_is_refused_naming_it(
    drift: RunResult, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a crash's torn tail: every statement after it would be dropped without a word."""
    shared = drift.run_dir / "shared_memory.jsonl"
    lines = shared.read_text().splitlines(keepends=True)
    shared.write_text("".join([lines[0], lines[1][:40] + "\n", *lines[2:]]))
    assert export_main([str(drift.run_dir), "--as", "str"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: {shared}: line 2 is no readable record; not exported")
    assert len(err.splitlines()) == 1


def test_a_torn_run_exports_what_it_holds(run: Run) -> None:
    result = run("format=panel", "model.synthesize_rate=0.0")
    manifest = result.run_dir / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "status": "failed"}))
    said = statements(result.run_dir)
    shared = result.run_dir / "shared_memory.jsonl"
    # tear the last statement: the reader stops before it and notes why
    lines = shared.read_text().splitlines(keepends=True)
    shared.write_text("".join(lines[:-1]) + lines[-1][:40])
    doc = json.loads(export_run(result.run_dir, "json"))
    assert doc["header"]["status"] == "failed"
    assert doc["header"]["incomplete"].startswith("incomplete: the run is failed")
    assert len(doc["header"]["notes"]) == 1 and "torn last line" in doc["header"]["notes"][0]
    texts = [s["text"] for rnd in doc["rounds"] for s in rnd["statements"]]
    assert texts == [r.text for r in said[:-1]]
    assert doc["rounds"][-1]["missing"] == ["Analyst D"]
    md = export_run(result.run_dir, "md")
    assert "> **incomplete: the run is failed" in md and "*Analyst D: no statement this round.*" in md


def test_a_transcript_view_of_an_unfinished_run_says_so_on_stderr(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    # stopped by its budget after round 2 of 4: '--as str > t.txt' held 2 rounds, with no word that more were planned
    price = "prices.models={scripted\\:default:{input:1.0,output:4.0}}"
    cut = run(price, "rounds=4", "budget.usd=0.005").run_dir
    assert export_main([str(cut), "--as", "str"]) == 0
    out, err = capsys.readouterr()
    assert out == export_run(cut, "str") and out.startswith("Topic: ")
    assert err == (
        f"warning: {cut}: incomplete: the run is interrupted; the transcript holds what was written\n"
    )
    # what a kill -9 leaves: the manifest as the run wrote it at its start, 'the run is running'
    manifest = json.loads((cut / "manifest.json").read_text())
    started = {**manifest["counts"], "rounds_completed": 0}
    (cut / "manifest.json").write_text(json.dumps({**manifest, "status": "running", "counts": started}))
    assert export_main([str(cut), "--as", "str"]) == 0
    assert "incomplete: the run is running, or was killed; the transcript" in capsys.readouterr().err
    # its rounds are its newest snapshot's: it said 'running after 0 rounds' of 2 rounds shown
    assert "- **Status:** running after 2 rounds\n" in export_run(cut, "md")
    finished = run("rounds=1").run_dir
    assert export_main([str(finished), "--as", "list"]) == 0
    assert capsys.readouterr().err == ""


# -- transcript views: str, str-all-except-first, list, dict, final -----------------


def test_drift_transcript_views_name_each_team_by_alias(drift: RunResult) -> None:
    said = statements(drift.run_dir)
    alias = {"pros": "PROS", "cons": "CONS"}  # the seats' aliases (a drift argument names none itself)
    expected = [f"Topic: {drift.manifest.topic}", *(f"{alias[r.team or '']}: {r.text}" for r in said)]
    assert export_run(drift.run_dir, "str") == "\n\n".join(expected) + "\n"
    assert export_run(drift.run_dir, "str-all-except-first") == "\n\n".join(expected[1:]) + "\n"
    listed = json.loads(export_run(drift.run_dir, "list"))
    assert listed == [{"role": "Topic", "content": drift.manifest.topic}] + [
        {"role": alias[r.team or ""], "content": r.text} for r in said
    ]
    doc = json.loads(export_run(drift.run_dir, "dict"))
    assert doc["final"] is None and doc["format"] == "drift"
    assert [(m["round"], m["seat"], m["kind"]) for m in doc["messages"][1:]] == [
        (r.round, r.team, "argument") for r in said
    ]


def test_final_is_the_panel_synthesis_and_an_error_for_a_run_without_one(
    panel_cap: RunResult, drift: RunResult
) -> None:
    (synthesis,) = [r for r in public(panel_cap.run_dir, "synthesis") if isinstance(r, SynthesisRecord)]
    done = export_cli(panel_cap.run_dir, "--as", "final")
    assert done.returncode == 0 and done.stdout == synthesis.text + "\n"
    listed = json.loads(export_run(panel_cap.run_dir, "list"))
    assert [m["content"] for m in listed[1:]] == [r.text for r in statements(panel_cap.run_dir)]
    refused = export_cli(drift.run_dir, "--as", "final")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == f"error: {drift.run_dir}: a drift run has no synthesis to print (--as final)\n"

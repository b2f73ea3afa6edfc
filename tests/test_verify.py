"""``verify`` passes a clean run and catches hand-made damage, one test each."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta

import pytest

from harness.verify import main, verify


@pytest.fixture
def clean(run):
    result = run("rounds=4", "model.reject_first=1")
    assert verify(result.run_dir) == ([], [])
    return result.run_dir


def cli_verify(run_dir):
    return subprocess.run(
        [sys.executable, "-m", "harness.verify", str(run_dir)], capture_output=True, text=True, timeout=60
    )


def test_clean_run_passes_on_the_command_line(clean):
    out = cli_verify(clean)
    assert out.returncode == 0 and out.stdout.strip().endswith(f"0 violation(s) in {clean}")


def test_catches_truncation(clean):
    path = clean / "pros" / "critique.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-3]))  # the last three records vanish
    problems, _ = verify(clean)
    assert any("pros/critique.jsonl: shorter than the snapshot saw" in p for p in problems)
    assert any("has no critique in pros/critique.jsonl" in p for p in problems)
    out = cli_verify(clean)
    assert out.returncode == 1 and len(out.stdout.splitlines()) == len(problems) + 1


def test_catches_an_edit_in_the_middle(clean):
    path = clean / "shared_memory.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[2])
    record["text"] = "an argument nobody approved"
    lines[2] = json.dumps(record, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))
    problems, _ = verify(clean)
    assert any(p.startswith("shared_memory.jsonl:4: hash chain broken") for p in problems)


def test_catches_a_duplicated_shared_record(clean):
    path = clean / "shared_memory.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines) + lines[1])
    problems, _ = verify(clean)
    rid = json.loads(lines[1])["id"]
    assert f"shared_memory.jsonl:{len(lines) + 1}: duplicate id {rid}" in problems
    assert any("2 arguments for round 1 cons" in p for p in problems)


def test_catches_private_text_in_the_other_teams_prompts(clean):
    secret = json.loads((clean / "pros" / "thinking.jsonl").read_text().splitlines()[0])["scratchpad"]
    path = clean / "cons" / "prompts.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[-1])
    record["messages"][-1]["content"] += " " + secret
    # rewrite the chain honestly, so only the leak is wrong
    path.write_text("\n".join([*lines[:-1], json.dumps(record, separators=(",", ":"))]) + "\n")
    problems, _ = verify(clean)
    assert any(p.startswith("cons/prompts.jsonl: contains pros's private text") for p in problems)


def rewrite_last(path, edit):
    """Edit the last record of a log; the chain stays honest (no record follows it)."""
    lines = path.read_text().splitlines()
    record = json.loads(lines[-1])
    edit(record)
    path.write_text("\n".join([*lines[:-1], json.dumps(record, separators=(",", ":"))]) + "\n")
    return record


@pytest.mark.parametrize("replied_first", [True, False])
def test_a_seat_may_see_words_its_own_model_wrote_first(clean, replied_first):
    # two seats on one model at temperature 0 can write the same private words,
    # and a repair prompt shows a seat its own failed reply: not a leak; the
    # same words replied only after a prompt showed them are one
    secret = json.loads((clean / "pros" / "thinking.jsonl").read_text().splitlines()[0])["scratchpad"]
    prompt = rewrite_last(
        clean / "cons" / "prompts.jsonl", lambda r: r["messages"][-1].update(content=f"{secret} again")
    )
    shown = datetime.fromisoformat(prompt["ts"].replace("Z", "+00:00"))
    moved = shown + timedelta(seconds=-1 if replied_first else 1)

    def reply(r):
        r.update(text=f"{r['text']} {secret}", ts=moved.isoformat())

    rewrite_last(clean / "cons" / "replies.jsonl", reply)
    problems, _ = verify(clean)
    leaked = [p for p in problems if p.startswith("cons/prompts.jsonl: contains pros's private text")]
    assert bool(leaked) is not replied_first, problems


@pytest.mark.parametrize("echoed", [True, False])
def test_a_seat_that_echoes_its_own_prompt_leaks_nothing(clean, echoed):
    # SmolLM2's critic wrote back the 'Motion: ...' line of its prompt as its feedback,
    # and the other seat's prompts show that line too: an echo, not a leak. Words a
    # seat wrote before its prompts showed them are its own, and a leak when shown.
    line = "Motion: a line of the template that both seats are shown"
    shown = rewrite_last(clean / "cons" / "prompts.jsonl", lambda r: r["messages"][-1].update(content=line))
    at = datetime.fromisoformat(shown["ts"].replace("Z", "+00:00")) + timedelta(seconds=1 if echoed else -1)
    rewrite_last(clean / "cons" / "critique.jsonl", lambda r: r.update(feedback=line, ts=at.isoformat()))
    rewrite_last(clean / "pros" / "prompts.jsonl", lambda r: r["messages"][-1].update(content=line))
    problems, _ = verify(clean)
    leaked = [p for p in problems if p.startswith("pros/prompts.jsonl: contains cons's private text")]
    assert bool(leaked) is not echoed, problems


def test_torn_line_is_reported_then_quarantined_by_resume(clean):
    from harness.resume import resume_run

    # what a kill -9 during the last round's write leaves behind
    (clean / "snapshots" / "round-0004.json").unlink()
    manifest = json.loads((clean / "manifest.json").read_text())
    (clean / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    with open(clean / "events.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"r0009')
    problems, _ = verify(clean)
    assert problems == ["events.jsonl: last line is torn (no newline); resume will quarantine it"]
    assert resume_run(clean).manifest.status == "completed"
    problems, notes = verify(clean)
    assert problems == [] and notes == ["events.jsonl.quarantine: quarantined torn line(s)"]
    assert (clean / "events.jsonl.quarantine").read_text() == '{"schema_version":1,"id":"r0009\n'


def test_a_model_echoing_the_motion_is_not_a_leak(clean):
    """Small models copy prompt text into private fields; text that every
    prompt carries (the motion, the templates) is not the other team's secret."""
    from harness.store.memory import RunMemory
    from harness.store.records import CritiqueRecord

    topic = json.loads((clean / "manifest.json").read_text())["topic"]
    echo = f"Motion: {topic}"
    RunMemory.of_run(clean).seat("pros").critique.append(
        CritiqueRecord(
            id="r0004.pros.critique.i9",
            round=4,
            team="pros",
            role="critique",
            iteration=9,
            is_approved=False,
            feedback=echo,
            draft_id="none",
        )
    )
    assert echo in (clean / "cons" / "prompts.jsonl").read_text()
    assert verify(clean)[0] == []


def test_the_store_alone_runs_no_format_check_and_says_so(clean):
    """The drift check that every argument traces to an approval is the format's:
    the store's verify runs it only when handed it, and notes when it was not."""
    from harness.store.integrity import verify as verify_store

    path = clean / "pros" / "critique.jsonl"
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    with_checks, _ = verify(clean)
    alone, notes = verify_store(clean)
    assert any("has no critique in pros/critique.jsonl" in p for p in with_checks)
    assert not any("has no critique" in p for p in alone) and set(alone) < set(with_checks)
    assert notes == [
        "format 'drift': its own checks were not run (none passed in; python -m harness.verify runs them)"
    ]


def refusal(call):
    """The one-line refusal ``call`` raises (every reader's, from ``read_manifest``)."""
    from harness.store.rundir import FolderVersionError

    with pytest.raises(FolderVersionError) as raised:
        call()
    return str(raised.value)


def resume(run_dir):
    from harness.resume import resume_run

    return refusal(lambda: resume_run(run_dir, overrides=["rounds=5"]))


def read_whole(run_dir):  # the export's, the SQL store's and the viewer's reader
    from harness.store.reader import read_run

    return refusal(lambda: read_run(run_dir))


def analyse(run_dir):
    from analysis import load_runs

    return refusal(lambda: load_runs(run_dir, cache=False))


def verify_one_line(run_dir):
    problems, notes = verify(run_dir)
    assert notes == []
    return "\n".join(problems)


@pytest.mark.parametrize("reader", [resume, verify_one_line, read_whole, analyse])
def test_a_folder_made_before_versions_is_refused_in_one_line_and_left_untouched(clean, reader):
    manifest = json.loads((clean / "manifest.json").read_text())
    del manifest["folder_version"]  # as every manifest made before this field was
    (clean / "manifest.json").write_text(json.dumps(manifest))
    before = {p: p.read_bytes() for p in sorted(clean.rglob("*")) if p.is_file()}
    assert reader(clean) == (
        f"{clean}/manifest.json: run-folder version 0 (made before run folders were versioned); "
        "this harness reads version 1 only; run it again"
    )
    assert {p: p.read_bytes() for p in sorted(clean.rglob("*")) if p.is_file()} == before
    assert not (clean.parent / "_analysis").exists()


@pytest.mark.parametrize("asked", ["--help", "-h"])
def test_help_prints_the_usage(asked, capsys):
    # it was looked for as a folder: 'error: --help: no such folder', exit 2
    assert main([asked]) == 0
    assert capsys.readouterr().out.startswith("usage: python -m harness.verify <run_dir>")

"""The resume contract (``harness.store.fingerprint``): a run's prompts are
fingerprinted per top-level definition of its format's prompt modules, so an
edit to a prompt stops an in-place resume in one line naming the definition
(``--force`` goes on, recorded), while moving a definition between the
modules, or editing a comment or docstring, changes nothing. Its command
line: a folder whose own files cannot be read, or an override the contract
forbids, is one line naming the file or key, in resume, export, fork and verify."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import compose_cfg
from omegaconf import OmegaConf
from test_durable_resume import events

from harness.config import resolve
from harness.engine import resume_run, run_debate
from harness.engine.resuming import ResumeError
from harness.export.__main__ import main as export_main
from harness.fork import main as fork_main
from harness.formats import FORMATS
from harness.resume import main as resume_main
from harness.run import cli as run_cli
from harness.store.fingerprint import definitions, module_file
from harness.store.rundir import read_manifest
from harness.verify import main as verify_main
from harness.verify import verify

# Two prompt modules of the drift format, as a run found them.
FIRST = '''"""Opening lines."""

OPENING = "Argue for the motion."


def opening_line(topic: str) -> str:
    """The first line of a seat's turn."""
    return f"{OPENING} {topic}"


def closing_line(topic: str) -> str:
    return f"In closing: {topic}"
'''
SECOND = '''"""Closing lines."""

from __future__ import annotations

CLOSING = "Sum up."
'''


@pytest.fixture
def prompt_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Two modules, fresh per test, added to the drift format's prompt modules: name -> file."""
    stem = f"contract_{uuid.uuid4().hex[:8]}"
    files = {f"{stem}_first": tmp_path / f"{stem}_first.py", f"{stem}_second": tmp_path / f"{stem}_second.py"}
    for file, text in zip(files.values(), (FIRST, SECOND), strict=True):
        file.write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    drift = FORMATS["drift"]
    monkeypatch.setitem(
        FORMATS, "drift", dataclasses.replace(drift, prompt_modules=drift.prompt_modules + tuple(files))
    )
    return files


def edit(file: Path, old: str, new: str) -> None:
    text = file.read_text()
    assert old in text, old
    file.write_text(text.replace(old, new))


def test_a_prompt_edit_stops_a_resume_in_one_line_naming_it_and_force_is_recorded(run, prompt_modules):
    made = run("rounds=1")
    first, _ = prompt_modules.values()
    edit(first, "Argue for the motion.", "Argue against the motion.")
    with pytest.raises(ResumeError) as refused:
        resume_run(made.run_dir, overrides=["rounds=2"])
    message = str(refused.value)
    assert "\n" not in message and "(1 change(s)): prompts.OPENING: '" in message
    result = resume_run(made.run_dir, force=True, overrides=["rounds=2"])
    assert [h.action for h in result.manifest.history][-2:] == ["resume_forced", "complete"]
    assert "forced past: [\"prompts.OPENING: '" in events(made.run_dir, "resume")[-1]["detail"]
    assert result.manifest.counts.rounds_completed == 2


def move_closing_line(files: dict[str, Path]) -> None:
    first, second = files.values()
    moved = '\n\ndef closing_line(topic: str) -> str:\n    return f"In closing: {topic}"\n'
    edit(first, moved, "")
    second.write_text(second.read_text() + moved)


def reword_comments(files: dict[str, Path]) -> None:
    first, second = files.values()
    edit(first, '"""The first line of a seat\'s turn."""', '"""Where a turn starts."""  # reworded')
    edit(first, '"""Opening lines."""', '"""Opening lines, reworded."""\n\nimport json  # an unused import')
    edit(second, 'CLOSING = "Sum up."', '# the last word\nCLOSING = (\n    "Sum up."\n)')


EDITS = {"moved between the modules": move_closing_line, "comments, docstrings, layout": reword_comments}


@pytest.mark.parametrize("change", EDITS.values(), ids=EDITS.keys())
def test_what_changes_no_prompt_resumes_unforced(run, prompt_modules, change: Callable[..., None]):
    made = run("rounds=1")
    change(prompt_modules)
    result = resume_run(made.run_dir, overrides=["rounds=2"])
    assert [h.action for h in result.manifest.history][-2:] == ["resume", "complete"]


def changed(source: str, old: str, new: str) -> set[str]:
    assert old in source, old
    before, after = definitions(source), definitions(source.replace(old, new))
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def test_an_edit_to_a_real_prompt_module_names_only_its_definition():
    source = module_file("harness.agents.critique").read_text()
    assert changed(source, "the main flaw, or why it passes", "the main flaw") == {"CritiqueOutput"}
    # a reply class's docstring is its schema's description, which the model is shown
    assert changed(FIRST + 'class ReplyOutput:\n    """Say it."""\n', "Say it.", "Say more.") == {
        "ReplyOutput"
    }
    assert changed(FIRST, "The first line of a seat's turn.", "Another docstring.") == set()


# -- the command line: resume, export, fork and verify on a broken folder -------------


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One completed 2-round scripted run, copied by each test before it breaks it."""
    root = tmp_path_factory.mktemp("made")
    cfg = compose_cfg(["model=scripted", f"runs_root={root}", "progress=false", "rounds=2"])
    return run_debate(resolve(cfg), OmegaConf.to_container(cfg, resolve=True)).run_dir  # type: ignore[arg-type]


@pytest.fixture
def copy(made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back what the commands guard
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    return Path(shutil.copytree(made, tmp_path / "run"))


def set_version(run_dir: Path, version: int | None) -> None:
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text())
    data.pop("folder_version") if version is None else data.update(folder_version=version)
    path.write_text(json.dumps(data))


BROKEN = {  # how a folder is broken, and the file each command must name
    "newer version": (lambda d: set_version(d, 9), "manifest.json"),
    "no version": (lambda d: set_version(d, None), "manifest.json"),
    "truncated manifest": (
        lambda d: (d / "manifest.json").write_text((d / "manifest.json").read_text()[:500]),
        "manifest.json",
    ),
    "invalid config": (
        lambda d: (d / "config.yaml").write_text((d / "config.yaml").read_text() + "llm: [unclosed\n"),
        "config.yaml",
    ),
    "no fingerprint": (lambda d: (d / "fingerprint.json").unlink(), "fingerprint.json"),
}


def one_line(command: Callable[[], object], capsys: pytest.CaptureFixture[str]) -> tuple[object, str]:
    """The exit status of an in-process command, and its stderr, which must be one line."""
    try:
        code = command()
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return code, err


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_folder_is_one_line_naming_the_file_in_every_command(copy, capsys, case):
    breaks, name = BROKEN[case]
    breaks(copy)
    named = f"{copy}/{name}: "
    code, err = one_line(lambda: resume_main([str(copy), "rounds=3"]), capsys)
    assert code == 2 and err.startswith(f"error: {named}"), err
    assert verify_main([str(copy)]) == 1 and f"{name}: " in capsys.readouterr().out
    if name == "fingerprint.json":  # the export and a fork read no fingerprint
        return
    code, err = one_line(lambda: export_main([str(copy)]), capsys)
    assert code == 2 and err.startswith(f"error: {named}"), err
    code, err = one_line(lambda: fork_main([str(copy), "--at-round", "1"]), capsys)
    assert code == 2 and err.startswith(f"error: fork.parent: {named}"), err


@pytest.mark.parametrize("group", ["format=panel", "critic=strict"])
def test_a_group_override_on_resume_is_refused_in_one_line(copy, capsys, group):
    code, err = one_line(lambda: resume_main([str(copy), group]), capsys)
    assert code == 2 and err.startswith(f"error: {group}: a config group may not change on resume"), err


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_replicates_on_resume_is_refused_as_meaningless_for_one_run(copy, capsys, force):
    """It was a fingerprint change that --force passed, a run 'of 3 replicates' made of one."""
    code, err = one_line(lambda: resume_main([str(copy), "replicates=3", *force]), capsys)
    assert code == 2 and err.startswith("error: replicates=3: makes cells of a sweep, one run each;"), err
    assert "(its replicates=1)" in err and read_manifest(copy).history[-1].action == "complete"
    assert resume_main([str(copy), "replicates=1"]) == 0  # its own value: no change


@pytest.mark.parametrize("given", ["topic=foo", "budget=5"])
def test_a_value_for_a_section_is_one_line_naming_its_key(copy, capsys, given):
    # OmegaConf's merge error names no key: 'config: Merge error: str is not a subclass of TopicConfig'
    key = given.partition("=")[0]
    code, err = one_line(lambda: resume_main([str(copy), given]), capsys)
    assert code == 2 and err.startswith(f"error: {key}: a section of keys, not a value"), err
    assert f"({key}.<key>=...)" in err and read_manifest(copy).history[-1].action == "complete"


def test_a_resume_with_no_folder_names_only_the_folder_as_missing(capsys):
    # the overrides are optional, yet argparse said 'required: run_dir, overrides'
    with pytest.raises(SystemExit) as done:
        resume_main([])
    assert done.value.code == 2
    assert capsys.readouterr().err.endswith("error: the following arguments are required: run_dir\n")


def test_force_may_stand_before_the_overrides(copy):
    assert resume_main([str(copy), "--force", "rounds=3"]) == 0
    assert read_manifest(copy).counts.rounds_completed == 3


@pytest.mark.parametrize(
    ("typed", "code", "rounds"), [(["rounds=3"], 0, 3), (["rounds=3", "llm.temperature=0.9", "seed=5"], 2, 2)]
)
def test_run_resume_passes_the_typed_overrides_on_as_harness_resume_does(
    copy, capsys, monkeypatch, typed, code, rounds
):
    """``python -m harness.run resume=<dir> KEY=V``, in-process: the overrides reach the resume."""
    monkeypatch.setattr(sys, "argv", ["harness.run", f"resume={copy}", *typed])
    with pytest.raises(SystemExit) as done:
        run_cli()
    assert done.value.code == code and read_manifest(copy).counts.rounds_completed == rounds
    if code:
        assert (
            "fingerprint mismatch (2 change(s)): config.llm.temperature: 0.7 -> 0.9"
            in capsys.readouterr().err
        )


def test_run_resume_with_force_names_the_command_that_takes_it(copy, capsys, monkeypatch):
    # Hydra's answer to a flag it does not know was its whole usage: 'error: usage: run.py [--help] ...'
    monkeypatch.setattr(sys, "argv", ["harness.run", f"resume={copy}", "--force", "rounds=3"])
    code, err = one_line(run_cli, capsys)
    assert code == 2 and err == (
        f"error: --force: harness.run takes no --force; a forced resume is "
        f"python -m harness.resume {copy} --force KEY=V\n"
    )
    assert read_manifest(copy).counts.rounds_completed == 2


def test_overrides_on_resume_read_as_harness_run_reads_them(copy, capsys):
    # harness.run's grammar (and ctl's refusal line's): a dict value, a key's escaped colon,
    # '+' to add; YAML's reading made '{input:1.0}' a key 'input:1.0' and refused '+budget'
    price = "prices.models={scripted\\:other:{input:1.0,output:4.0}}"
    assert resume_main([str(copy), "rounds=3", price, "+budget.usd=0.5"]) == 0
    kept = yaml.safe_load((copy / "config.yaml").read_text())
    assert kept["prices"]["models"]["scripted:other"] == {"input": 1.0, "output": 4.0}
    assert kept["budget"]["usd"] == 0.5 and kept["rounds"] == 3
    code, err = one_line(lambda: resume_main([str(copy), "rounds=4,5"]), capsys)
    assert code == 2 and err == "error: rounds=4,5: a resume takes one value a key, not a sweep\n", err


def test_a_resume_killed_before_its_manifest_keeps_its_event_beside_the_next_ones(copy):
    # killed after its resume event, before the manifest took its history entry: the
    # next resume counts the same history, and its event took the same id, so it was dropped
    manifest = json.loads((copy / "manifest.json").read_text())
    assert resume_main([str(copy), "rounds=3"]) == 0
    (copy / "manifest.json").write_text(json.dumps({**manifest, "status": "running"}))
    (copy / "snapshots" / "round-0003.json").unlink()
    assert resume_main([str(copy), "rounds=3"]) == 0
    events = [json.loads(line) for line in (copy / "events.jsonl").read_text().splitlines()]
    resumes = [e for e in events if e["event"] == "resume"]
    assert len(resumes) == 2 and len({e["id"] for e in resumes}) == 2
    assert verify(copy) == ([], [])


def test_a_log_line_that_does_not_parse_stops_a_resume_in_one_line(copy, capsys):
    shared = copy / "shared_memory.jsonl"
    lines = shared.read_text().splitlines(keepends=True)
    shared.write_text("".join([lines[0], lines[1][:40] + "\n", *lines[2:]]))
    code, err = one_line(lambda: resume_main([str(copy), "rounds=3"]), capsys)
    assert code == 2 and err.startswith(f"error: {shared}: line "), err


def test_a_closed_panel_refuses_an_extension_in_one_line(run, capsys, monkeypatch):
    """The judge's synthesis closed the panel: rounds=6 is refused, where it said
    'already completed' and then 'completed: rounds 2/6'; a plain resume says 2/2."""
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # put back what the commands guard
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    run_dir = run("format=panel", "rounds=2").run_dir
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    code, err = one_line(lambda: resume_main([str(run_dir), "rounds=6"]), capsys)
    assert code == 2 and err.startswith(
        f"error: rounds=6: {run_dir} was closed by its format after round 2"
    ), err
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before
    assert resume_main([str(run_dir)]) == 0
    out = capsys.readouterr()
    assert out.err == "already completed; nothing to do\n" and out.out.startswith("completed: rounds 2/2 ")


def test_a_resume_names_the_torn_last_line_it_set_aside_in_one_line(copy, capsys):
    with open(copy / "shared_memory.jsonl", "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"tor')
    assert resume_main([str(copy), "rounds=3"]) == 0
    (note,) = capsys.readouterr().err.splitlines()
    assert note == (
        "shared_memory.jsonl: torn last line moved to shared_memory.jsonl.quarantine "
        """(set aside: '{"schema_version":1,"id":"tor')"""
    )
    assert (copy / "shared_memory.jsonl.quarantine").read_text() == '{"schema_version":1,"id":"tor\n'


def test_force_resumes_a_folder_that_lost_its_fingerprint_and_rewrites_it(copy, capsys):
    """Without --force: one line saying how to go on. With it: one warning line, the
    fingerprint rewritten from config.yaml, the resume recorded as forced."""
    (copy / "fingerprint.json").unlink()
    code, err = one_line(lambda: resume_main([str(copy), "rounds=3"]), capsys)
    assert code == 2 and f"python -m harness.resume {copy} --force" in err, err
    assert not (copy / "fingerprint.json").exists()
    code, err = one_line(lambda: resume_main([str(copy), "--force", "rounds=3"]), capsys)
    assert code == 0 and err.startswith(f"warning: {copy}/fingerprint.json: missing; rewritten"), err
    manifest = read_manifest(copy)
    assert manifest.counts.rounds_completed == 3 and manifest.history[-2].action == "resume_forced"
    assert verify_main([str(copy)]) == 0
    assert resume_run(copy, overrides=["rounds=4"]).manifest.counts.rounds_completed == 4  # unforced again

"""The resume contract (``harness.store.fingerprint``): a run's prompts are
fingerprinted per top-level definition of its format's prompt modules, so an
edit to a prompt stops an in-place resume in one line naming the definition
(``--force`` goes on, recorded), while moving a definition between the
modules, or editing a comment or docstring, changes nothing."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from test_durable_resume import events

from harness.engine import resume_run
from harness.engine.resuming import ResumeError
from harness.formats import FORMATS
from harness.store.fingerprint import definitions, module_file

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

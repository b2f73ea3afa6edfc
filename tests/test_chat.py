"""Chat mode: a person plays one side of a grounded debate at the terminal.

Driven through prompt_toolkit's pipe input (the REPL as a person meets it)
and through the CLI with piped stdin: searches with the run's own tool,
notes for the synthesiser, citations checked like a model's, ``/quit``
leaving the run interrupted, and resume waiting for the person again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from harness.chat import overrides
from harness.engine import resume_run
from harness.formats.checks import verify
from harness.models import build_model
from harness.models.human import HumanConsole, HumanModel
from harness.store.records import CitedTurnRecord, NoteRecord

CLAIM = 'topic.text="Job\'s suffering is deserved"'


class Seen(HumanConsole):
    """A console on a pipe that keeps what it showed the person."""

    def __init__(self, pipe) -> None:  # type: ignore[no-untyped-def]
        super().__init__(input=pipe, output=DummyOutput())
        self.shown: list[str] = []

    def show(self, text: str) -> None:
        self.shown.append(text)


def person(lines: list[str]):  # type: ignore[no-untyped-def]
    """A model factory whose human seats read ``lines`` from a pipe, then end of input."""
    consoles: list[Seen] = []
    opened: list = []

    def build(cfg):  # type: ignore[no-untyped-def]
        if not cfg.spec.startswith("human:"):
            return build_model(cfg)
        pipe_cm = create_pipe_input()
        pipe = pipe_cm.__enter__()
        opened.append(pipe_cm)  # kept: a collected context manager closes its pipe
        pipe.send_text("".join(f"{line}\n" for line in lines))
        pipe.close()  # what is not typed is the person leaving: end of input
        consoles.append(Seen(pipe))
        return HumanModel(cfg.spec, consoles[-1])

    build.consoles = consoles  # type: ignore[attr-defined]
    return build


@pytest.fixture
def chat(search_cache: Path) -> tuple[str, ...]:
    return (
        "format=grounded",
        CLAIM,
        "search.transport=local",
        f"search.cache_dir={search_cache}",
        "chat=against",
    )


ROUND_1 = [
    "/search suffering Job",
    "/note Job was blameless and upright, by the book's own first verse",
    'Job did not deserve it: the book calls him [Job.1.1] "perfect and upright" and [Job.1.1] "a man in Babylon".',
]


def test_a_person_searches_notes_and_cites_then_quits_and_resumes(run, records, chat):
    build = person(ROUND_1 + ["/quit"])
    result = run(*chat, "rounds=2", build=build)
    run_dir = result.run_dir
    assert result.manifest.status == "interrupted" and result.manifest.counts.rounds_completed == 1
    assert "AGAINST quit at round 2" in result.manifest.history[-1].detail
    (turn,) = [t for t in records(run_dir / "shared_memory.jsonl") if t.team == "against"]
    assert isinstance(turn, CitedTurnRecord) and turn.model == "human" and turn.text.startswith("Job did not")
    assert [(c.id, c.status) for c in turn.citations] == [
        ("Job.1.1", "supported"),
        ("Job.1.1", "unsupported"),
    ]
    (search,) = records(run_dir / "against" / "searches.jsonl")
    assert search.query == "suffering Job" and search.hits and turn.searches == [search.id]
    (note,) = records(run_dir / "public" / "notes.jsonl")
    assert isinstance(note, NoteRecord) and note.text.startswith("Job was blameless")
    shown = "\n".join(build.consoles[0].shown)
    first_for = records(run_dir / "shared_memory.jsonl")[0]
    assert first_for.team == "for" and first_for.text[:60] in shown  # the person saw the other side's turn
    assert "[" in shown and search.hits[0].id in shown  # and the passages their search found
    assert verify(run_dir)[0] == []

    later = person(['Still undeserved: [Job.2.3] "he holdeth fast his integrity", and God says so.'])
    resumed = resume_run(run_dir, build=later)
    assert resumed.manifest.status == "completed"
    turns = [t for t in records(run_dir / "shared_memory.jsonl") if t.team == "against"]
    assert [t.round for t in turns] == [1, 2] and turns[1].citations[0].status == "supported"
    (synthesis,) = records(run_dir / "public" / "synthesis.jsonl")
    prompt = records(run_dir / "public" / "prompts.jsonl")[-1].messages[-1]["content"]
    assert "Job was blameless" in prompt  # the person's note reached the synthesiser
    assert synthesis.round == 3 and verify(run_dir)[0] == []


def test_searches_stop_at_max_searches_and_end_of_input_is_a_quit(run, records, chat):
    build = person(["/search Job", "/search Satan", "/search Uz"])  # then the pipe ends
    result = run(*chat, "rounds=1", "format.max_searches=2", build=build)
    assert result.manifest.status == "interrupted"
    assert [s.query for s in records(result.run_dir / "against" / "searches.jsonl")] == ["Job", "Satan"]
    assert any("no searches left" in line for line in build.consoles[0].shown)
    resumed = resume_run(
        result.run_dir, build=person(["/search Uz", "Job's losses were a test, not a sentence."])
    )
    assert resumed.manifest.status == "completed"
    (turn,) = [t for t in records(result.run_dir / "shared_memory.jsonl") if t.team == "against"]
    assert len(turn.searches) == 2  # the searches made before the quit still count, and stay the only ones


def test_chat_overrides_pick_the_side_and_default_to_the_grounded_format():
    assert overrides(["side=for", "rounds=2"]) == [
        "format=grounded",
        "rounds=2",
        "chat=for",
        "progress=false",
    ]
    assert overrides(["format=grounded"])[-2] == "chat=against"


def test_the_chat_cli_with_piped_input_quits_and_resumes(tmp_path, search_cache):
    # the claim as a shell passes topic.text="Job's suffering is deserved": no quotes left for Hydra
    args = [
        "topic.text=Job's suffering is deserved",
        "side=against",
        "model=scripted",
        "rounds=1",
        "search.transport=local",
        f"search.cache_dir={search_cache}",
        f"runs_root={tmp_path}",
    ]
    first = subprocess.run(
        [sys.executable, "-m", "harness.chat", *args],
        input="/search Job\n/quit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert first.returncode == 130, first.stderr
    run_dir = Path(first.stdout.strip().splitlines()[-1])
    assert f"resume with: python -m harness.resume {run_dir}" in first.stderr
    assert "Claim: Job's suffering is deserved" in first.stdout
    second = subprocess.run(
        [sys.executable, "-m", "harness.resume", str(run_dir)],
        input='My turn: [Job.1.1] "perfect and upright" says enough.\n',
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 0, second.stderr
    assert "completed" in (run_dir / "manifest.json").read_text()


def test_a_person_plays_a_drift_team_under_the_hostile_critic(run, records, runs_root):
    build = person(
        ["/search anything", "Remote work cuts commutes.", "Remote work cuts commutes and the emissions."]
    )
    result = run("chat=against", "rounds=1", "model.reject_first=1", build=build)  # drift: against is cons
    run_dir = result.run_dir
    assert result.manifest.status == "completed" and result.manifest.model_specs["cons"] == "human:you"
    drafts = records(run_dir / "cons" / "thinking.jsonl")
    assert [(d.iteration, d.model, d.draft) for d in drafts] == [
        (0, "human", "Remote work cuts commutes."),
        (1, "human", "Remote work cuts commutes and the emissions."),
    ]
    verdicts = records(run_dir / "cons" / "critique.jsonl")
    assert [v.is_approved for v in verdicts] == [False, True] and {v.model for v in verdicts} == {
        "scripted:default"
    }
    (persona, *_) = records(run_dir / "cons" / "persona.jsonl")
    assert persona.model == "human" and persona.usage.calls == 0
    argument = [a for a in records(run_dir / "shared_memory.jsonl") if a.team == "cons"][0]
    assert argument.text == drafts[1].draft and argument.model == "human"
    shown = "\n".join(build.consoles[0].shown)
    assert f"The critic rejected your last draft: {verdicts[0].feedback}" in shown
    assert "no search tool" in shown
    assert verify(run_dir)[0] == []


def pane(sock: str) -> str:
    out = subprocess.run(
        ["tmux", "-L", sock, "capture-pane", "-p", "-t", "chat"], capture_output=True, text=True
    )
    return out.stdout


def wait_for(sock: str, text: str, timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in (shown := pane(sock)):
            return shown
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared; the pane shows:\n{pane(sock)}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")
def test_the_real_terminal_through_tmux(tmp_path, search_cache):
    """prompt_toolkit on a real pseudo-terminal: type a search and a turn, then Ctrl-C, then resume."""
    sock = f"drift-{os.getpid()}"
    root, done = tmp_path / "runs", tmp_path / "exit"
    command = (
        f'cd {REPO} && {sys.executable} -m harness.chat topic.text="Job\'s suffering is deserved" side=against '
        f"model=scripted rounds=2 search.transport=local search.cache_dir={search_cache} runs_root={root}; "
        f"echo $? > {done}; sleep 60"
    )
    subprocess.run(
        ["tmux", "-L", sock, "new-session", "-d", "-s", "chat", "-x", "150", "-y", "45", command], check=True
    )
    try:
        wait_for(sock, "AGAINST round 1>")
        subprocess.run(
            ["tmux", "-L", sock, "send-keys", "-t", "chat", "/search blameless and upright", "Enter"]
        )
        wait_for(sock, "[Luke.1.6]")  # the hits, shown in the terminal
        turn = 'Job was no sinner: [Job.1.1] "perfect and upright"'
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "chat", turn, "Enter"])
        wait_for(sock, "AGAINST round 2>")
        subprocess.run(["tmux", "-L", sock, "send-keys", "-t", "chat", "C-c"])
        shown = wait_for(sock, "resume with: python -m harness.resume")
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.read_text().strip() == "130", shown
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
    (run_dir,) = root.iterdir()
    (mine,) = [
        json.loads(line)
        for line in (run_dir / "shared_memory.jsonl").read_text().splitlines()
        if '"team":"against"' in line.replace(" ", "")
    ]
    assert mine["text"] == turn and mine["model"] == "human" and mine["citations"][0]["status"] == "supported"
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"

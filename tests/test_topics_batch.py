"""Batched topics: one sweep cell per line of ``topic.file``, resumable as a
sweep, and ``python -m harness.export <sweep_dir> --as final`` printing each
cell's final synthesis in input order. The sweeps run the real command line
in a subprocess, as tests/test_sweep.py does."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_durable_faults import Outcome, cut_at, landed
from test_sweep import REPO, environment, sweep_dir_of

from harness.engine import RunResult
from harness.export.styles import export_sweep, sweep_cells
from harness.run import checked_argv, topic_range
from harness.schema import ConfigError
from harness.store.reader import read_run
from harness.store.records import EvaluationRecord
from harness.sweep.cell_status import CELLS_DIR
from harness.sweep.index import read_index

TOPICS = [
    "Cities should ban private cars from their centres.",
    "Schools should start later in the morning.",
    "Remote work is better for society than office work.",
]
TOPICS_FILE = "# one motion per line\n{}\n\n{}\n# skipped\n{}\n".format(*TOPICS)
BASE = ["model=scripted", "progress=false", "format=judge_refine", "rounds=3"]


def harness(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def topics_file(tmp_path: Path) -> Path:
    path = tmp_path / "topics.txt"
    path.write_text(TOPICS_FILE)
    return path


def last_synthesis(run_dir: Path) -> str:
    evaluations = read_run(run_dir).of("public/evaluations.jsonl")
    last = evaluations[-1]
    assert isinstance(last, EvaluationRecord) and last.final
    return last.synthesis


def test_one_cell_per_topic_resumes_as_a_sweep_and_exports_in_input_order(tmp_path: Path) -> None:
    path, root = topics_file(tmp_path), tmp_path / "runs"
    done = harness("harness.run", "-m", *BASE, f"runs_root={root}", f"topic.file={path}", "topic.index=0,1,2")
    assert done.returncode == 0, done.stderr
    sweep_dir = sweep_dir_of(root)
    cells = [sweep_dir / f"index-{i}" for i in range(3)]
    assert [read_run(c).manifest.topic for c in cells] == TOPICS
    # the config each cell keeps names its topic, not the file: a resume never reads it again
    topic_cfg = yaml.safe_load((cells[1] / "config.yaml").read_text())["topic"]
    assert (topic_cfg["text"], topic_cfg["file"], topic_cfg["index"]) == (TOPICS[1], None, 1)

    # cell 1 crashed right after Pro's turn of round 2; cell 2 never started
    whole = shutil.copytree(cells[1], tmp_path / "whole")
    cut_at(cells[1], landed(cells[1], "shared_memory.jsonl", "r0002.pro.turn.i0"))
    (sweep_dir / CELLS_DIR / "index-1.json").unlink()
    shutil.rmtree(cells[2])
    (sweep_dir / CELLS_DIR / "index-2.json").unlink()

    resumed = harness("harness.sweep", "resume", str(sweep_dir))
    assert resumed.returncode == 0, resumed.stderr
    assert "1 completed (skipped), 1 to resume, 1 never started" in resumed.stdout
    index = read_index(sweep_dir)
    assert [(c.status, c.action) for c in index.cells] == [
        ("completed", "skip"),
        ("completed", "resume"),
        ("completed", "run"),
    ]
    # the resumed cell's transcript and public logs equal the uninterrupted ones
    assert Outcome.of(cells[1]).logs == Outcome.of(whole).logs
    assert harness("harness.verify", str(cells[1])).returncode == 0

    final = harness("harness.export", str(sweep_dir), "--as", "final")
    assert final.returncode == 0, final.stderr
    expected = [f"Topic: {TOPICS[i]} [index-{i}]\n{last_synthesis(c)}" for i, c in enumerate(cells)]
    assert final.stdout == "\n\n".join(expected) + "\n"


def test_the_topics_preset_makes_one_cell_per_line_whatever_the_file_length(tmp_path: Path) -> None:
    path, root = topics_file(tmp_path), tmp_path / "runs"
    done = harness(
        "harness.run", "-m", *BASE, "rounds=1", f"runs_root={root}", f"topic.file={path}", "sweep=topics"
    )
    assert done.returncode == 0, done.stderr
    index = read_index(sweep_dir_of(root))
    assert [(c.name, c.params) for c in index.cells] == [
        (f"index-{i}", {"topic.index": str(i)}) for i in range(3)
    ]


def test_the_topics_preset_without_a_file_is_one_error_line(tmp_path: Path) -> None:
    done = harness("harness.run", "-m", *BASE, f"runs_root={tmp_path}", "sweep=topics")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "topic.file: sweep=topics needs topic.file=<path>" in line
    assert not any(tmp_path.iterdir())


def test_topic_range_counts_the_topics_as_topic_file_reads_them(tmp_path: Path) -> None:
    assert topic_range(str(topics_file(tmp_path))) == "range(0,3)"
    for bad in (None, str(tmp_path / "missing.txt")):
        try:
            topic_range(bad)
        except ConfigError as exc:
            assert str(exc).startswith("topic.file: ")
        else:
            raise AssertionError(f"no error for {bad}")


def test_an_index_out_of_range_in_a_sweep_is_refused_before_any_cell(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # a sweep composes its first cell only: index-0 ran, in a sweep folder, before index-5 failed
    path = topics_file(tmp_path)
    argv = ["-m", "model=scripted", f"topic.file={path}", "topic.index=0,2"]
    assert checked_argv(argv) == argv
    with pytest.raises(SystemExit) as exit_:
        checked_argv(["-m", "model=scripted", f"topic.file={path}", "topic.index=0,5"])
    assert exit_.value.code == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: topic.index: must be in [0, 3) for the 3 topics of {path}, got 5"
    )


def test_sweep_cells_go_by_topic_index_then_name(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result: RunResult = run("format=judge_refine", "rounds=1")
    sweep_dir = tmp_path / "sweep"
    for name, index in (("index-10", 10), ("index-2", 2), ("b-rep", 2), ("a-none", 0)):
        cell = Path(shutil.copytree(result.run_dir, sweep_dir / name))
        config = yaml.safe_load((cell / "config.yaml").read_text())
        config["topic"]["index"] = index
        (cell / "config.yaml").write_text(yaml.safe_dump(config))
    assert [c.name for c in sweep_cells(sweep_dir)] == ["a-none", "b-rep", "index-2", "index-10"]
    text, missing = export_sweep(sweep_dir)
    assert missing == [] and text.count(f"Topic: {result.manifest.topic} [") == 4

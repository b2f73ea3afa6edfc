"""Fault injection: kill the CLI at random points, resume, and compare.

Each case starts ``python -m harness.run`` on the scripted model with a small
per-call latency, waits until a chosen number of progress lines has landed
(drafts in the drift format; the analysts' notes and the round summaries in
the panel, so kills land mid-round, between the last analyst and the
summary, and mid-judge), kills it, sometimes leaves a torn half-line in a
random log (what a kill during a write leaves on disk), resumes, and
repeats. At the end: ``verify`` passes, the shared transcript (and, for the
panel, every public log and the stop reason) equals an uninterrupted
reference run's, and no record is lost or duplicated. Across the suite there
are 26 + 9 (panel) SIGKILL points and 8 + 2 SIGTERM points. The last tests
choose the crash instant exactly, by cutting a finished run back to it.
"""

from __future__ import annotations

import glob
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import resume_run, run_debate
from harness.formats.checks import verify
from harness.store.records import parse_record
from harness.store.rundir import read_manifest, write_manifest
from harness.store.snapshot import list_snapshots, read_snapshot

ROUNDS = 5
ARGS = [
    "model=scripted",
    f"rounds={ROUNDS}",
    "model.latency_s=0.01",
    "model.reject_first=1",
    "progress=false",
]
LOGS = ["shared_memory.jsonl", "events.jsonl", "pros/thinking.jsonl", "cons/critique.jsonl"]
DRAFTS_TOTAL = ROUNDS * 2 * 2  # rounds x teams x (one rejection + one approval)
CONF = Path(__file__).resolve().parents[1] / "conf"


@dataclass(frozen=True)
class Case:
    """A run to crash: its CLI arguments, the logs whose lines measure its
    progress (globs under the runs root), how many such lines a whole run
    writes, and the logs a torn half-line may be left in."""

    args: tuple[str, ...]
    progress: tuple[str, ...]
    total: int
    logs: tuple[str, ...]


DRIFT = Case(tuple(ARGS), ("*/*/thinking.jsonl",), DRAFTS_TOTAL, tuple(LOGS))


def texts(run_dir: Path) -> list[tuple[str, str]]:
    lines = (run_dir / "shared_memory.jsonl").read_text().splitlines()
    return [(r.id, r.text) for r in map(parse_record, lines)]  # type: ignore[union-attr]


def run_cli(args: tuple[str, ...] | list[str], root: Path) -> Path:
    """An uninterrupted run; its run folder."""
    out = subprocess.run(
        [sys.executable, "-m", "harness.run", *args, f"runs_root={root}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    return texts(run_cli(ARGS, tmp_path_factory.mktemp("reference")))


def count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def kill_after(proc: subprocess.Popen[str], root: Path, lines: int, sig: int, case: Case = DRIFT) -> str:
    """Send ``sig`` once ``lines`` progress lines of ``case`` have landed under
    ``root`` (or let it finish); return its stderr."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        # glob.glob: skips the hidden staging folder a run is filled in, and
        # does not fail when that folder is renamed away mid-scan, as Path.glob may
        landed = sum(
            count_lines(Path(p)) for pattern in case.progress for p in glob.glob(str(root / pattern))
        )
        if landed >= lines:
            proc.send_signal(sig)
            break
        time.sleep(0.002)
    _, err = proc.communicate(timeout=60)
    return err


def tear(run_dir: Path, rng: random.Random, case: Case = DRIFT) -> None:
    """Leave half a record at the end of a random log, as a kill mid-write would."""
    path = run_dir / rng.choice(case.logs)
    with open(path, "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"r0099.pros.torn","seq":')


def resume_to_end(run_dir: Path) -> None:
    final = subprocess.run(
        [sys.executable, "-m", "harness.resume", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert final.returncode == 0, final.stderr


def crash_at(root: Path, case: Case, points: list[int], sig: int, torn: bool, rng: random.Random) -> Path:
    """Start a run and stop it at each progress point in turn, resuming in
    between (a torn line left before each resume if ``torn``); the run folder,
    still to be resumed to the end."""
    err = kill_after(start(["harness.run", *case.args, f"runs_root={root}"]), root, points[0], sig, case)
    assert len(list(root.iterdir())) == 1, err
    (run_dir,) = root.iterdir()
    for point in points[1:]:
        if torn:
            tear(run_dir, rng, case)
        kill_after(start(["harness.resume", str(run_dir)]), root, point, sig, case)
    if torn:
        tear(run_dir, rng, case)
    return run_dir


def crash_and_resume(root: Path, seed: int, kills: int, sig: int, torn: bool) -> Path:
    rng = random.Random(seed)
    points = sorted(rng.sample(range(1, DRAFTS_TOTAL), kills))
    run_dir = crash_at(root, DRIFT, points, sig, torn, rng)
    resume_to_end(run_dir)
    return run_dir


def assert_same_as_reference(run_dir: Path, reference: list[tuple[str, str]]) -> None:
    problems, _ = verify(run_dir)
    assert problems == []
    got = texts(run_dir)
    assert got == reference  # same arguments, same order, none lost, none twice
    assert len({rid for rid, _ in got}) == len(got) == ROUNDS * 2


@pytest.mark.parametrize("seed", range(13))
def test_sigkill_at_random_points_then_resume(tmp_path: Path, reference, seed: int) -> None:
    run_dir = crash_and_resume(tmp_path, seed, kills=2, sig=signal.SIGKILL, torn=seed % 2 == 0)
    assert_same_as_reference(run_dir, reference)
    if seed % 2 == 0:  # torn lines were moved aside, never silently dropped
        assert list(run_dir.rglob("*.quarantine"))


@pytest.mark.parametrize("seed", range(4))
def test_sigterm_stops_cleanly_then_resume(tmp_path: Path, reference, seed: int) -> None:
    rng = random.Random(100 + seed)
    proc = start(["harness.run", *ARGS, f"runs_root={tmp_path}"])
    err = kill_after(proc, tmp_path, rng.randrange(1, DRAFTS_TOTAL), signal.SIGTERM)
    (run_dir,) = tmp_path.iterdir()
    assert proc.returncode == 130, err  # stopped after the node in flight, not finished
    assert '"status": "interrupted"' in (run_dir / "manifest.json").read_text()
    assert f"python -m harness.resume {run_dir}" in err
    run_dir = crash_and_resume_existing(run_dir, rng, signal.SIGTERM)
    assert_same_as_reference(run_dir, reference)


def crash_and_resume_existing(run_dir: Path, rng: random.Random, sig: int) -> Path:
    """One more stop during a resume, then a final resume to the end."""
    kill_after(start(["harness.resume", str(run_dir)]), run_dir.parent, rng.randrange(1, DRAFTS_TOTAL), sig)
    resume_to_end(run_dir)
    assert '"status": "completed"' in (run_dir / "manifest.json").read_text()
    return run_dir


# -- the panel format ----------------------------------------------------------
#
# Progress is counted in the analysts' notes (one per analyst per round) and
# the round summaries, so with 4 analysts round r ends at line 5r: a kill at
# 5r - 1 lands between the last analyst's notes and the summary, one at 5r
# (r >= 2, judge on) in the judge's call. References and the last resume run
# in-process: a CLI start costs ~2 s of imports on a small machine.

PANEL_PROGRESS = ("*/analyst_*/thinking.jsonl", "*/public/summaries.jsonl")
PANEL_LOGS = (
    "shared_memory.jsonl",
    "events.jsonl",
    "analyst_b/thinking.jsonl",
    "public/roles.jsonl",
    "public/summaries.jsonl",
    "public/decisions.jsonl",
    "public/synthesis.jsonl",
)
PANEL_ARGS = ("model=scripted", "format=panel", "model.latency_s=0.01", "progress=false")


def panel(*args: str, rounds: int) -> Case:
    return Case((*PANEL_ARGS, *args), PANEL_PROGRESS, rounds * 5, PANEL_LOGS)


PANEL_ROUNDS = panel("format.judge=false", "rounds=4", rounds=4)  # no judge: every round runs
PANEL_CAP = panel("model.synthesize_rate=0.0", rounds=4)  # the judge always continues: closes at the cap
PANEL_JUDGE = panel("model.synthesize_rate=1.0", rounds=2)  # the judge closes at its first decision


@dataclass
class Outcome:
    """What a finished run must reproduce: status, stop reason, and the
    shared transcript's and every public log's records (ids and what they
    say), in order."""

    run_dir: Path
    status: str
    stop_reason: str | None
    logs: dict[str, list[tuple[str, dict[str, Any]]]]

    @classmethod
    def of(cls, run_dir: Path) -> Outcome:
        manifest = read_manifest(run_dir)
        assert manifest.layout is not None
        names = ["shared_memory.jsonl", *(f"public/{n}.jsonl" for n in manifest.layout.public_logs)]
        return cls(run_dir, manifest.status, manifest.stop_reason, {n: said(run_dir / n) for n in names})


# what differs between two identical runs: when, how fast, and the hash chain over `ts`
VOLATILE: dict[str, Any] = {"ts": True, "prev_hash": True, "usage": {"latency_s"}}


def said(path: Path) -> list[tuple[str, dict[str, Any]]]:
    records = map(parse_record, path.read_text().splitlines())
    return [(r.id, r.model_dump(mode="json", exclude=VOLATILE)) for r in records]  # type: ignore[union-attr]


def run_in_process(args: tuple[str, ...], root: Path) -> Path:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[*args, f"runs_root={root}"])
    raw: Any = OmegaConf.to_container(cfg, resolve=True)
    return run_debate(resolve(cfg), raw).run_dir


@pytest.fixture(scope="module")
def reference_outcome(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Case], Outcome]:
    """``reference_outcome(case)``: the outcome of one uninterrupted run of ``case``."""
    done: dict[Case, Outcome] = {}

    def get(case: Case) -> Outcome:
        if case not in done:
            done[case] = Outcome.of(run_in_process(case.args, tmp_path_factory.mktemp("reference")))
        return done[case]

    return get


def assert_same_outcome(run_dir: Path, reference: Outcome) -> None:
    problems, _ = verify(run_dir)
    assert problems == []
    got = Outcome.of(run_dir)
    assert texts(run_dir) == [(rid, r["text"]) for rid, r in reference.logs["shared_memory.jsonl"]]
    for name, records in reference.logs.items():
        assert got.logs[name] == records, name  # none lost, none twice, same order, same words
    assert (got.status, got.stop_reason) == ("completed", reference.stop_reason)


def resumes(run_dir: Path) -> int:
    return sum(h.action == "resume" for h in read_manifest(run_dir).history)


@pytest.mark.parametrize(
    ("case", "points", "torn"),
    [
        pytest.param(PANEL_ROUNDS, [3, 9, 19], True, id="no-judge-mid-round-before-summary-before-last"),
        pytest.param(PANEL_CAP, [10, 15], True, id="cap-mid-judge-twice"),
        pytest.param(PANEL_CAP, [4, 20], False, id="cap-before-summary-then-after-last-summary"),
        pytest.param(PANEL_JUDGE, [5, 10], True, id="judge-closes-mid-judge"),
    ],
)
def test_panel_sigkill_then_resume(
    tmp_path: Path, reference_outcome: Callable[[Case], Outcome], case: Case, points: list[int], torn: bool
) -> None:
    run_dir = crash_at(tmp_path, case, points, signal.SIGKILL, torn, random.Random(sum(points)))
    # the last kill landed before the run ended (its note may name a torn line set aside)
    assert "nothing to do" not in resume_run(run_dir).note
    assert_same_outcome(run_dir, reference_outcome(case))
    if torn:  # torn lines were moved aside, never silently dropped
        assert list(run_dir.rglob("*.quarantine"))


def test_panel_sigterm_stops_cleanly_then_resume(
    tmp_path: Path, reference_outcome: Callable[[Case], Outcome]
) -> None:
    proc = start(["harness.run", *PANEL_CAP.args, f"runs_root={tmp_path}"])
    err = kill_after(proc, tmp_path, 7, signal.SIGTERM, PANEL_CAP)
    (run_dir,) = tmp_path.iterdir()
    assert proc.returncode == 130, err  # stopped after the node in flight, not finished
    assert read_manifest(run_dir).status == "interrupted"
    kill_after(start(["harness.resume", str(run_dir)]), tmp_path, 15, signal.SIGTERM, PANEL_CAP)
    assert read_manifest(run_dir).status == "interrupted"
    resume_run(run_dir)
    assert resumes(run_dir) == 2
    assert_same_outcome(run_dir, reference_outcome(PANEL_CAP))


# -- exact crash points, made by cutting a finished run back -------------------
#
# A kill lands where the scheduler puts it; these tests choose the instant.
# Runs are single-threaded, so the record and snapshot timestamps order every
# write: cutting a copy of a finished run back to one instant leaves what a
# SIGKILL at that instant would have left.

PANEL_CAP_WINDOW_1 = panel("model.synthesize_rate=0.0", "memory.window_rounds=1", rounds=4)


def cut_at(run_dir: Path, when: datetime) -> None:
    """Drop every log line and snapshot written after ``when``; the manifest
    goes back to what the run wrote when it started (status "running")."""
    manifest = read_manifest(run_dir)
    assert manifest.layout is not None
    for name in manifest.layout.files():
        path = run_dir / name
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(line for line in lines if parse_record(line).ts <= when))
    for snap in list_snapshots(run_dir):
        if read_snapshot(snap).ts > when:
            snap.unlink()
    manifest.history = [h for h in manifest.history if h.ts <= when]
    manifest.status, manifest.stop_reason, manifest.ended_at = "running", None, None
    write_manifest(run_dir, manifest)


def landed(run_dir: Path, log: str, record_id: str) -> datetime:
    lines = (run_dir / log).read_text().splitlines()
    return next(r.ts for r in map(parse_record, lines) if r.id == record_id)


def crashed_copy(reference: Outcome, root: Path, when: Callable[[Path], datetime]) -> Path:
    run_dir = Path(shutil.copytree(reference.run_dir, root / reference.run_dir.name))
    cut_at(run_dir, when(run_dir))
    return run_dir


@pytest.mark.parametrize(
    ("case", "log", "record_id"),
    [
        (PANEL_CAP, "public/roles.jsonl", "r0000.analyst_b.role_card.i0"),  # half the role cards
        (PANEL_CAP, "analyst_d/thinking.jsonl", "r0002.analyst_d.thinking.i0"),  # notes, not the statement
        (PANEL_CAP, "public/summaries.jsonl", "r0003.all.summary.i0"),  # the summary, not the decision
        (PANEL_JUDGE, "public/decisions.jsonl", "r0002.all.decision.i0"),  # SYNTHESIZE, not the synthesis
        (PANEL_ROUNDS, "public/synthesis.jsonl", "r0004.all.synthesis.i0"),  # the synthesis, not its snapshot
    ],
    ids=["roles", "notes", "summary", "decision", "synthesis"],
)
def test_panel_resume_right_after_a_record(
    tmp_path: Path, reference_outcome: Callable[[Case], Outcome], case: Case, log: str, record_id: str
) -> None:
    reference = reference_outcome(case)
    run_dir = crashed_copy(reference, tmp_path, lambda d: landed(d, log, record_id))
    assert record_id in (run_dir / log).read_text()  # the cut kept the record, and nothing after it
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)


def test_panel_resume_with_a_one_round_window_shows_the_judge_the_same_summaries(
    tmp_path: Path, reference_outcome: Callable[[Case], Outcome]
) -> None:
    reference = reference_outcome(PANEL_CAP_WINDOW_1)
    run_dir = crashed_copy(
        reference, tmp_path, lambda d: landed(d, "public/summaries.jsonl", "r0003.all.summary.i0")
    )
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)


def last_snapshot(run_dir: Path) -> datetime:
    return read_snapshot(list_snapshots(run_dir)[-1]).ts


@pytest.mark.parametrize(
    "case", [PANEL_ROUNDS, PANEL_JUDGE, DRIFT], ids=["panel-rounds", "panel-judge", "drift"]
)
def test_resume_after_the_last_snapshot_adds_nothing(
    tmp_path: Path, reference_outcome: Callable[[Case], Outcome], case: Case
) -> None:
    reference = reference_outcome(case)
    run_dir = crashed_copy(reference, tmp_path, last_snapshot)
    assert read_manifest(run_dir).status == "running"
    resume_run(run_dir)
    assert_same_outcome(run_dir, reference)

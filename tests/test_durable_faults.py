"""Fault injection: kill the CLI at random points, resume, and compare.

Each case starts ``python -m harness.run`` on the scripted model with a small
per-call latency, waits until a randomly chosen number of drafts has landed
(so kill points spread over the whole run, mid-round included), kills it,
sometimes leaves a torn half-line in a random log (what a kill during a
write leaves on disk), resumes, and repeats. At the end: ``verify`` passes,
the shared transcript equals an uninterrupted reference run's, and no record
is lost or duplicated. Across the suite there are 26 SIGKILL points and 8
SIGTERM points.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.verify import verify

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


def texts(run_dir: Path) -> list[tuple[str, str]]:
    from harness.store.records import parse_record

    lines = (run_dir / "shared_memory.jsonl").read_text().splitlines()
    return [(r.id, r.text) for r in map(parse_record, lines)]  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    root = tmp_path_factory.mktemp("reference")
    out = subprocess.run(
        [sys.executable, "-m", "harness.run", *ARGS, f"runs_root={root}"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return texts(Path(out.stdout.strip().splitlines()[-1]))


def count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def kill_after_drafts(proc: subprocess.Popen[str], root: Path, drafts: int, sig: int) -> str:
    """Send ``sig`` once ``drafts`` thinking records have landed (or let it
    finish); return its stderr."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        landed = sum(count_lines(p) for p in root.glob("*/*/thinking.jsonl"))
        if landed >= drafts:
            proc.send_signal(sig)
            break
        time.sleep(0.002)
    _, err = proc.communicate(timeout=60)
    return err


def tear(run_dir: Path, rng: random.Random) -> None:
    """Leave half a record at the end of a random log, as a kill mid-write would."""
    path = run_dir / rng.choice(LOGS)
    with open(path, "ab") as fh:
        fh.write(b'{"schema_version":1,"id":"r0099.pros.torn","seq":')


def crash_and_resume(root: Path, seed: int, kills: int, sig: int, torn: bool) -> Path:
    rng = random.Random(seed)
    proc = start(["harness.run", *ARGS, f"runs_root={root}"])
    points = sorted(rng.sample(range(1, DRAFTS_TOTAL), kills))
    err = kill_after_drafts(proc, root, points[0], sig)
    assert len(list(root.iterdir())) == 1, err
    (run_dir,) = root.iterdir()
    for point in points[1:]:
        if torn:
            tear(run_dir, rng)
        kill_after_drafts(start(["harness.resume", str(run_dir)]), root, point, sig)
    if torn:
        tear(run_dir, rng)
    final = subprocess.run(
        [sys.executable, "-m", "harness.resume", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert final.returncode == 0, final.stderr
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
    err = kill_after_drafts(proc, tmp_path, rng.randrange(1, DRAFTS_TOTAL), signal.SIGTERM)
    (run_dir,) = tmp_path.iterdir()
    assert proc.returncode == 130, err  # stopped after the node in flight, not finished
    assert '"status": "interrupted"' in (run_dir / "manifest.json").read_text()
    assert f"python -m harness.resume {run_dir}" in err
    run_dir = crash_and_resume_existing(run_dir, rng, signal.SIGTERM)
    assert_same_as_reference(run_dir, reference)


def crash_and_resume_existing(run_dir: Path, rng: random.Random, sig: int) -> Path:
    """One more stop during a resume, then a final resume to the end."""
    kill_after_drafts(
        start(["harness.resume", str(run_dir)]), run_dir.parent, rng.randrange(1, DRAFTS_TOTAL), sig
    )
    final = subprocess.run(
        [sys.executable, "-m", "harness.resume", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert final.returncode == 0, final.stderr
    assert '"status": "completed"' in (run_dir / "manifest.json").read_text()
    return run_dir

"""Fault soak: SIGKILL real runs at random instants, resume them, and count
what durability lost.

One uninterrupted reference run of the format's scripted run (``--format``:
``experiment=debug`` for drift; ``all`` soaks the five formats in turn;
``model.latency_s=0.1``, so a run lasts a few seconds) is made first and
timed. Then each cycle starts the same run as ``python -m harness.run`` in a
fresh runs root and SIGKILLs its process group after a random delay drawn
over the run's whole life: counted from its first write (the folder's
``mkdir``; imports before it take seconds, more under load) to just past the
moment the reference's manifest said completed. It resumes the run with
``python -m harness.resume <dir>``, the command the harness prints; with
probability ``--kill-resume`` each resume is SIGKILLed the same way (the
delay counted from its first change to the folder, over the share of the
reference's records still missing, since records that landed replay without
model calls) and resumed again, until ``manifest.json`` says ``completed``
(giving up after 3 failed resumes in a row). Then
``python -m harness.verify <dir>`` must exit 0 and the folder is compared
with the reference run's:

- kills mid-run: kills that landed before the manifest said completed
  (resumes included; kills after completion are counted apart);
- resume failures: resumes that exited non-zero other than by our kill;
- verify failures: ``harness.verify`` exiting non-zero on the completed run;
- transcript mismatches: cycles whose ``shared_memory.jsonl`` ids and texts
  differ from the reference's (order included);
- lost records: ids in any reference log (every file of the run's layout,
  prompt and kept-reply logs included) missing from the same log of the
  soaked run; ``verify`` also fails a prompt whose reply was not kept;
- duplicated records: an id appearing twice in one log file.

``events.jsonl`` is left out of the lost-record comparison: resume events
legitimately exist only in the soaked run. It is still checked for duplicates.
Indented lines under the table are context: records the reference never
wrote, first runs failing by themselves, cycles never completed, hangs
(any process past TIMEOUT_S), resumes run, kills that landed after completion.

Kill times come from ``random.Random(--seed)`` (one derived seed per cycle, so
``--jobs`` does not change them); where they land in a run still depends on
the machine's load. Folders of cycles that found a problem are kept and their
path printed; everything else is deleted. Prints figures; asserts nothing.

    .venv/bin/python benchmarks/fault_soak.py [--format drift|panel|moderated|judge_refine|grounded|all]
        [--cycles 72] [--rounds 3] [--seed 0] [--jobs 2] [--fsync record|round]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

from harness.store.jsonl import scan
from harness.store.reader import read_manifest
from harness.store.records import RunManifest

TIMEOUT_S = 120.0  # no single process of a 3-round scripted run comes near this
MAX_RESUMES = 25  # a run still not completed after this many resumes is reported, not retried forever


# Each format's scripted run: multi-step turns (drift's critic loop, grounded's
# search steps, moderated's speech retries) give kills inside a turn to land in.
FORMATS = {
    "drift": ["experiment=debug"],
    "panel": ["format=panel", "model=scripted", "format.judge=false"],
    "moderated": [
        "format=moderated",
        "model=scripted",
        "model.factcheck_fail_rate=0.3",
        "format.max_strikes=5",
    ],
    "judge_refine": ["format=judge_refine", "model=scripted"],
    "grounded": ["format=grounded", "model=scripted", "search.collection=kjv", "search.transport=local"],
}


def run_args(args: argparse.Namespace) -> list[str]:
    return [
        *FORMATS[args.format],
        "model.latency_s=0.1",
        f"rounds={args.rounds}",
        f"seed={args.seed}",
        f"memory.fsync={args.fsync}",
        "progress=false",
    ]


def harness(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", f"harness.{module}", *args]


@dataclass
class Timing:
    """The reference run: its folder, when (seconds from exec) the folder
    appeared, the manifest said completed and the process ended, its logs
    (events aside) and their line count."""

    run_dir: Path
    folder_s: float
    done_s: float
    total_s: float
    logs: list[str] = field(default_factory=list)
    lines: int = 1

    def __post_init__(self) -> None:
        layout = read_manifest(self.run_dir).layout
        assert layout is not None
        self.logs = [name for name in layout.files() if name != "events.jsonl"]
        self.lines = max(1, lines_in(self.run_dir, self.logs))


def lines_in(run_dir: Path, names: list[str]) -> int:
    total = 0
    for name in names:
        try:
            total += (run_dir / name).read_bytes().count(b"\n")
        except FileNotFoundError:
            continue
    return total


@dataclass
class Tally:
    """Counts for one cycle or, summed, for the whole soak."""

    cycles: int = 0
    kills_mid_run: int = 0
    kills_after_completion: int = 0
    resumes: int = 0
    resume_failures: int = 0
    run_failures: int = 0  # the first `harness.run` exiting non-zero by itself
    never_completed: int = 0
    hangs: int = 0  # a process past TIMEOUT_S, killed
    verify_failures: int = 0
    transcript_mismatches: int = 0
    lost_records: int = 0
    duplicated_records: int = 0
    extra_records: int = 0  # ids the reference never wrote (events.jsonl aside)
    notes: list[str] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def failed(self) -> bool:
        bad = (
            "resume_failures",
            "run_failures",
            "never_completed",
            "hangs",
            "verify_failures",
            "transcript_mismatches",
            "lost_records",
            "duplicated_records",
            "extra_records",
        )
        return any(getattr(self, name) for name in bad)


def only_folder(root: Path) -> Path | None:
    # a name starting with "." is the staging folder a run is filled in before it appears
    folders = (
        [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")] if root.exists() else []
    )
    return folders[0] if len(folders) == 1 else None


def time_reference(root: Path, args: list[str]) -> Timing:
    """Run once uninterrupted, polling for the folder and the completed manifest,
    so kill delays can cover the run's life (and not the process's exit after it)."""
    started = time.perf_counter()
    proc = subprocess.Popen(harness("run", *args, f"runs_root={root}"), stdout=subprocess.PIPE, text=True)
    folder_s = done_s = None
    while proc.poll() is None and time.perf_counter() - started < TIMEOUT_S:
        if folder_s is None and only_folder(root) is not None:
            folder_s = time.perf_counter() - started
        manifest = manifest_of(only_folder(root)) if folder_s is not None and done_s is None else None
        if manifest is not None and manifest.status == "completed":
            done_s = time.perf_counter() - started
        time.sleep(0.005)
    out, _ = proc.communicate(timeout=TIMEOUT_S)
    total_s = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"reference run failed (exit {proc.returncode})")
    return Timing(Path(out.strip().splitlines()[-1]), folder_s or total_s, done_s or total_s, total_s)


def folder_state(run_dir: Path | None) -> tuple[tuple[str, int, int], ...]:
    """Names, sizes and mtimes: equal before and after a kill means the process wrote nothing."""
    if run_dir is None:
        return ()
    state = []
    for path in sorted(run_dir.rglob("*")):
        try:
            st = path.stat()
        except FileNotFoundError:  # a writer's temp file, renamed away as we looked
            continue
        if path.is_file() and path.name != ".lock":
            state.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(state)


def wrote_to(run_dir: Path) -> Callable[[], bool]:
    """A probe: has anything in ``run_dir`` changed since now?"""
    before = folder_state(run_dir)
    return lambda: folder_state(run_dir) != before


def manifest_of(run_dir: Path | None) -> RunManifest | None:
    try:
        return read_manifest(run_dir) if run_dir is not None else None
    except (OSError, ValueError):  # no manifest yet (it is replaced atomically, never torn)
        return None


def run_until(cmd: list[str], started: Callable[[], bool], delay: float | None) -> tuple[str, int, str]:
    """Run ``cmd`` in its own session; once ``started()`` (it wrote to the folder),
    SIGKILL its process group after ``delay`` seconds unless it ended first
    (``None``: only past TIMEOUT_S). Returns ("exited" | "killed" | "hung",
    exit code, last stderr line)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    deadline = time.monotonic() + TIMEOUT_S
    # the delay counts from the first write, not from exec: imports take seconds, more under load
    while proc.poll() is None and not started() and time.monotonic() < deadline:
        time.sleep(0.005)
    outcome = "exited"
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()) if delay is None else delay)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the group: no child outlives the kill
            outcome = "killed" if delay is not None and time.monotonic() < deadline else "hung"
        except ProcessLookupError:  # it ended in between
            pass
    _, err = proc.communicate(timeout=TIMEOUT_S)
    return outcome, proc.returncode, (err.strip().splitlines() or [""])[-1]


def record_kill(tally: Tally, run_dir: Path | None) -> None:
    """Classify a kill that landed by the manifest it left: completed or not."""
    manifest = manifest_of(run_dir)
    if manifest is not None and manifest.status == "completed":
        tally.kills_after_completion += 1
    else:
        tally.kills_mid_run += 1


def kill_delay(rng: random.Random, timing: Timing, run_dir: Path | None = None) -> float:
    """From the first write to just past the end: of a whole run, or for a
    resume of ``run_dir`` of what is left of it (landed records replay at no cost)."""
    left = 1.0 if run_dir is None else 1.0 - lines_in(run_dir, timing.logs) / timing.lines
    return rng.uniform(0.0, 1.05 * max(0.05, left) * (timing.done_s - timing.folder_s))


def first_run(root: Path, args: list[str], rng: random.Random, timing: Timing, tally: Tally) -> Path | None:
    """Start the run and kill it once, timed from the moment its folder appears."""
    cmd = harness("run", *args, f"runs_root={root}")
    outcome, code, err = run_until(cmd, lambda: only_folder(root) is not None, kill_delay(rng, timing))
    run_dir = only_folder(root)
    if outcome == "killed":
        record_kill(tally, run_dir)
    elif outcome == "hung":
        tally.hangs += 1
        tally.notes.append(f"harness.run hung past {TIMEOUT_S:.0f} s")
    elif code != 0:
        tally.run_failures += 1
        tally.notes.append(f"harness.run exit {code}: {err}")
    return run_dir


def resume_to_completion(
    run_dir: Path, rng: random.Random, timing: Timing, p_kill: float, tally: Tally
) -> bool:
    """Resume (sometimes killing the resume too) until the manifest says completed;
    give up after MAX_RESUMES resumes or 3 failures in a row."""
    failures = 0
    for _ in range(MAX_RESUMES):
        manifest = manifest_of(run_dir)
        if manifest is not None and manifest.status == "completed":
            return True
        if failures >= 3:
            break
        delay = kill_delay(rng, timing, run_dir) if rng.random() < p_kill else None
        outcome, code, err = run_until(harness("resume", str(run_dir)), wrote_to(run_dir), delay)
        tally.resumes += 1
        if outcome == "hung":
            tally.hangs += 1
            tally.notes.append(f"resume hung past {TIMEOUT_S:.0f} s")
        elif outcome == "killed":
            record_kill(tally, run_dir)
        elif code != 0:
            tally.resume_failures += 1
            tally.notes.append(f"resume exit {code}: {err}")
        failures = failures + 1 if outcome == "exited" and code != 0 else 0
    tally.never_completed += 1
    return False


def log_ids(path: Path) -> list[str]:
    """Ids of every readable line (verify reports unreadable ones)."""
    return [line.record.id for line in scan(path) if line.record is not None]


def transcript(run_dir: Path) -> list[tuple[str, str]]:
    lines = scan(run_dir / "shared_memory.jsonl")
    return [(r.record.id, getattr(r.record, "text", "")) for r in lines if r.record is not None]


def compare(run_dir: Path, reference: Path, tally: Tally) -> None:
    """Verify the finished run and count what differs from the reference."""
    out = subprocess.run(harness("verify", str(run_dir)), capture_output=True, text=True, timeout=TIMEOUT_S)
    if out.returncode != 0:
        tally.verify_failures += 1
        tally.notes.append(f"verify exit {out.returncode}: {out.stdout.strip().splitlines()[:3]}")
    if transcript(run_dir) != transcript(reference):
        tally.transcript_mismatches += 1
        tally.notes.append("shared_memory.jsonl ids/texts differ from the reference")
    ref_manifest, manifest = read_manifest(reference), read_manifest(run_dir)
    assert ref_manifest.layout is not None and manifest.layout is not None
    for name in manifest.layout.files():  # duplicates: every log, events.jsonl included
        ids = log_ids(run_dir / name)
        if dup := len(ids) - len(set(ids)):
            tally.duplicated_records += dup
            tally.notes.append(f"{name}: {dup} duplicated id(s)")
    for name in ref_manifest.layout.files():
        if name == "events.jsonl":  # resume events exist only in the soaked run
            continue
        want, got = set(log_ids(reference / name)), set(log_ids(run_dir / name))
        if lost := want - got:
            tally.lost_records += len(lost)
            tally.notes.append(f"{name}: lost {sorted(lost)[:3]}")
        if extra := got - want:
            tally.extra_records += len(extra)
            tally.notes.append(f"{name}: extra {sorted(extra)[:3]}")


def cycle(index: int, root: Path, args: argparse.Namespace, timing: Timing, seed: int) -> Tally:
    """One run killed, resumed (and maybe killed again) to the end, then checked."""
    rng, tally = random.Random(seed), Tally(cycles=1)
    runs_root = root / f"cycle-{index:04d}"
    run_dir = first_run(runs_root, run_args(args), rng, timing, tally)
    if run_dir is None:
        tally.never_completed += 1
    elif resume_to_completion(run_dir, rng, timing, args.kill_resume, tally):
        compare(run_dir, timing.run_dir, tally)
    tally.notes = [f"cycle {index} ({runs_root}): {note}" for note in tally.notes]
    if not tally.failed():
        shutil.rmtree(runs_root, ignore_errors=True)  # keep only the evidence
    return tally


def report(total: Tally, timing: Timing, args: argparse.Namespace, wall: float) -> None:
    print(
        f"fault soak, format {args.format}: {args.cycles} cycles x {args.rounds}-round scripted runs "
        "(latency 0.1 s/call), "
        f"seed {args.seed}, {args.jobs} job(s), resumes killed with p={args.kill_resume}"
    )
    print(
        f"  reference run: folder at {timing.folder_s:.1f} s, completed at {timing.done_s:.1f} s, "
        f"exited at {timing.total_s:.1f} s"
    )
    rows = [
        ("cycles", total.cycles),
        ("kills mid-run (runs and resumes)", total.kills_mid_run),
        ("resume failures", total.resume_failures),
        ("verify failures", total.verify_failures),
        ("transcript mismatches", total.transcript_mismatches),
        ("lost records", total.lost_records),
        ("duplicated records", total.duplicated_records),
        ("  extra records (not in the reference)", total.extra_records),
        ("  first runs failing by themselves", total.run_failures),
        ("  cycles never completed / hangs", f"{total.never_completed} / {total.hangs}"),
        ("  resumes run", total.resumes),
        ("  kills after completion (not counted)", total.kills_after_completion),
    ]
    for label, value in rows:
        print(f"  {label:<40} {value:>8}")
    print(f"  wall {wall:.0f} s, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("goal: 0 of each over >= 100 kills mid-run")
    for note in total.notes[:20]:
        print(f"  ! {note}")


def soak(args: argparse.Namespace, root: Path) -> Tally:
    """Every cycle of one format's soak, reported; the summed tally."""
    started = time.perf_counter()
    master = random.Random(args.seed)
    seeds = [master.getrandbits(64) for _ in range(args.cycles)]  # fixed per cycle, whatever runs first
    total = Tally()
    timing = time_reference(root / "reference", run_args(args))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for tally in pool.map(lambda i: cycle(i, root, args, timing, seeds[i]), range(args.cycles)):
            total.add(tally)
    report(total, timing, args, time.perf_counter() - started)
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", default="drift", choices=[*FORMATS, "all"], help="all: each in turn")
    parser.add_argument("--cycles", type=int, default=72, help="per format")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="the runs' seed and the kill times' seed")
    parser.add_argument("--jobs", type=int, default=2, help="cycles run at once")
    parser.add_argument("--kill-resume", type=float, default=0.5, help="chance each resume is killed too")
    parser.add_argument(
        "--fsync", default="record", choices=["record", "round"], help="memory.fsync (record)"
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="fault-soak-"))
    failed = False
    try:
        for fmt in FORMATS if args.format == "all" else [args.format]:
            failed |= soak(argparse.Namespace(**{**vars(args), "format": fmt}), root / fmt).failed()
    finally:
        if failed:  # the reference stays beside them, to diff against
            print(f"kept the reference and the folders of cycles with problems under {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

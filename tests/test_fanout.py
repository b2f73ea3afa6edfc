"""A panel round's analysts asked together (``format.fan_out``) write the
run folder a sequential round writes, and a round killed or failed midway
resumes without paying any call twice (issue 27 item 3).

The model wrapper makes each analyst's call slower the earlier its seat, so
in a fanned-out round the last seat finishes first: only writing in seat
order, not completion order, can make the two folders agree.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import compose_cfg
from omegaconf import OmegaConf
from test_durable_faults import Outcome, assert_same_outcome

from harness.config import resolve
from harness.engine import resume_run, run_debate
from harness.formats import validate
from harness.formats.checks import verify
from harness.models import build_model
from harness.models.base import ChatModel, Completion, ModelRequest, ProviderError
from harness.runtime.context import ModelCallError
from harness.runtime.fanout import fans_out
from harness.schema import ConfigError, ModelConfig
from harness.store.records import EventRecord, parse_record
from harness.store.rundir import read_manifest

# model.latency_s > 0: the scripted model stands in for an API, so the analysts fan out
PANEL = ("format=panel", "model.latency_s=0.001", "retry.initial_s=0", "retry.jitter_s=0")
# retries and repairs in every round: events from several seats of one round
FAULTS = ("model.error_rate=0.3", "model.malformed_rate=0.3", "structured.max_repairs=1")
ANALYST_DELAY_S = 0.01  # per seat after yours: analyst_a waits longest
# what differs between two identical runs: when, how fast, and the hash chain over `ts`
VOLATILE: dict[str, Any] = {"ts": True, "prev_hash": True, "usage": {"latency_s"}}


@dataclass
class Watched:
    """Wraps every model built; counts the calls and the most in flight at
    once; an analyst's call sleeps longer the earlier its seat; ``fault``
    may raise instead of answering."""

    fault: Callable[[ModelRequest], BaseException | None] = lambda request: None
    made: int = 0
    most: int = 0
    now: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def build(self, cfg: ModelConfig) -> ChatModel:
        inner, watched = build_model(cfg), self

        class Model:
            spec = inner.spec

            def complete(self, request: ModelRequest) -> Completion:
                with watched.lock:
                    watched.made += 1
                    watched.now += 1
                    watched.most = max(watched.most, watched.now)
                try:
                    team = request.tags.get("team") or ""
                    if team.startswith("analyst_"):
                        time.sleep(ANALYST_DELAY_S * (ord("h") - ord(team[-1])))
                    if (exc := watched.fault(request)) is not None:
                        raise exc
                    return inner.complete(request)
                finally:
                    with watched.lock:
                        watched.now -= 1

            def model_files(self) -> dict[str, str]:
                return inner.model_files()

        return Model()


def logs(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every JSONL log of a run folder, its records without the volatile fields."""
    return {
        str(path.relative_to(run_dir)): [
            parse_record(line).model_dump(mode="json", exclude=VOLATILE)
            for line in path.read_text().splitlines()
        ]
        for path in sorted(run_dir.rglob("*.jsonl"))
    }


def analyst_events(run_dir: Path) -> list[EventRecord]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    records = [parse_record(line) for line in lines]
    return [e for e in records if isinstance(e, EventRecord) and (e.team or "").startswith("analyst_")]


def test_a_fanned_out_panel_writes_what_a_sequential_one_writes(run) -> None:
    args = (*PANEL, *FAULTS, "rounds=3", "model.synthesize_rate=0.0")
    one_by_one, together = Watched(), Watched()
    seq = run(*args, "format.fan_out=false", "run_name=sequential", build=one_by_one.build)
    fan = run(*args, "run_name=fanned", build=together.build)

    assert one_by_one.most == 1 and together.most >= 2  # the analysts' calls were in flight at once
    assert logs(fan.run_dir) == logs(seq.run_dir)  # every log, record for record, in the same order
    counts = lambda r: r.manifest.counts.model_dump(exclude={"usage_by_role", "usage_by_stage"})  # noqa: E731
    assert counts(fan) == counts(seq)
    assert fan.manifest.status == seq.manifest.status == "completed"
    # the order was put to the test: one round's events came from several seats
    seats_by_round: dict[int, set[str | None]] = {}
    for event in analyst_events(fan.run_dir):
        seats_by_round.setdefault(event.round, set()).add(event.team)
    assert max(len(s) for s in seats_by_round.values()) >= 2
    assert verify(fan.run_dir)[0] == []


def fatal_for(*seats: str) -> Callable[[ModelRequest], BaseException | None]:
    """A 400 (fatal) for these analysts' round-1 calls."""
    hit = lambda t: t["round"] == 1 and t["team"] in seats  # noqa: E731
    return lambda request: ProviderError("bad request", 400) if hit(request.tags) else None


def test_a_failed_fanned_out_round_fails_on_the_first_seat_and_resumes_paying_nothing_twice(
    run, runs_root
) -> None:
    args = (*PANEL, "rounds=2", "format.judge=false")
    reference = Watched()
    ref = run(*args, "format.fan_out=false", "run_name=reference", build=reference.build)

    failing = Watched(fault=fatal_for("analyst_b", "analyst_d"))
    with pytest.raises(ModelCallError, match="team=analyst_b"):  # d failed first; b is the first seat
        run(*args, "run_name=failed", build=failing.build)
    run_dir = runs_root / "failed"
    assert read_manifest(run_dir).status == "failed"
    assert [(e.event, e.team) for e in analyst_events(run_dir)] == [
        ("error", "analyst_b"),
        ("error", "analyst_d"),
    ]
    noted = [p.parent.name for p in sorted(run_dir.glob("analyst_*/thinking.jsonl")) if p.stat().st_size]
    assert noted == ["analyst_a", "analyst_c"]  # their notes landed; nothing was published
    assert (run_dir / "shared_memory.jsonl").read_text() == ""

    again = Watched()
    resume_run(run_dir, build=again.build, overrides=["format.fan_out=false"])  # free to change
    # the two failed calls are made again; a's and c's replies replay
    assert (failing.made - 2) + again.made == reference.made
    assert_same_outcome(run_dir, Outcome.of(ref.run_dir))


def test_fan_out_follows_the_key_and_the_models(settings) -> None:
    assert fans_out(settings(*PANEL), ["analyst_a"])
    assert not fans_out(settings(*PANEL, "format.fan_out=false"), ["analyst_a"])
    assert not fans_out(settings("format=panel"), ["analyst_a"])  # no latency: pure CPU, in turn
    api = settings("format=panel", "model.spec=openai:gpt-4o-mini")
    assert fans_out(api, ["analyst_a"])
    local = settings(
        "format=panel", "roles.analyst_a.spec=local:smollm2", "roles.analyst_b.spec=local:smollm2"
    )
    assert not fans_out(local, ["analyst_a", "analyst_b"])  # one llama.cpp lock per process


def test_a_bad_fan_out_value_fails_in_one_line(make_cfg) -> None:
    with pytest.raises(ConfigError, match=r"^format\.fan_out"):
        validate(make_cfg("format=panel", "format.fan_out=sometimes"))


# -- a real SIGKILL in the middle of a fanned-out round ---------------------------------

KILL_ARGS = (*PANEL, "rounds=2", "format.judge=false", "model.latency_s=0.05")


def kept(run_dir: Path, seat: str, round_: int) -> bool:
    path = run_dir / seat / "replies.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return any(line.endswith("}") and json.loads(line)["round"] == round_ for line in lines)


def run_then_die(runs_root: str) -> None:
    """In a child process: the panel, SIGKILLed by analyst_a's round-2 call once
    the other analysts' round-2 replies are kept (their calls went out with it)."""
    run_dir = Path(runs_root) / "killed"

    def build(cfg: ModelConfig) -> ChatModel:
        inner = build_model(cfg)

        class Dying:
            spec = inner.spec

            def complete(self, request: ModelRequest) -> Completion:
                if (request.tags["round"], request.tags["team"]) == (2, "analyst_a"):
                    deadline = time.monotonic() + 60
                    while time.monotonic() < deadline and not all(
                        kept(run_dir, f"analyst_{x}", 2) for x in "bcd"
                    ):
                        time.sleep(0.01)
                    os.kill(os.getpid(), signal.SIGKILL)
                return inner.complete(request)

            def model_files(self) -> dict[str, str]:
                return inner.model_files()

        return Dying()

    cfg = compose_cfg(
        ["model=scripted", f"runs_root={runs_root}", "progress=false", *KILL_ARGS, "run_name=killed"]
    )
    raw = OmegaConf.to_container(cfg, resolve=True)
    run_debate(resolve(cfg), raw, build=build)  # type: ignore[arg-type]


@pytest.mark.heavy  # spawns a process
def test_a_round_killed_mid_fan_out_resumes_to_the_same_run_paying_nothing_twice(run, runs_root) -> None:
    reference = Watched()
    ref = run(*KILL_ARGS, "format.fan_out=false", "run_name=reference", build=reference.build)
    child = multiprocessing.get_context("spawn").Process(target=run_then_die, args=(str(runs_root),))
    child.start()
    child.join(timeout=300)
    assert child.exitcode == -signal.SIGKILL
    run_dir = runs_root / "killed"
    assert read_manifest(run_dir).status == "running"  # as a SIGKILL leaves it
    assert [kept(run_dir, f"analyst_{x}", 2) for x in "abcd"] == [False, True, True, True]
    paid = sum(len(p.read_text().splitlines()) for p in run_dir.rglob("replies.jsonl"))

    again = Watched()
    resume_run(run_dir, build=again.build)
    assert paid + again.made == reference.made  # only analyst_a's cut-off call is asked again
    assert_same_outcome(run_dir, Outcome.of(ref.run_dir))
    resumed, first = logs(run_dir), logs(ref.run_dir)
    resumed["events.jsonl"] = [e for e in resumed["events.jsonl"] if e["event"] != "resume"]
    assert resumed == first

"""Breaking a long run's graph stream at snapshot boundaries changes nothing.

The engine streams a format's graph anew every ``RESTREAM_ROUNDS`` rounds so
LangGraph's per-stream bookkeeping cannot grow with the run. Each restart
starts from the state a snapshot holds, exactly as a resume would; these
tests restart after every round and compare every log with one long stream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.engine import execute
from harness.models.scripted import ScriptedModel
from harness.verify import verify

# what differs between two identical runs: when, how fast, and the hash chain over `ts`
VOLATILE = {"ts", "prev_hash", "latency_s"}


def scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def every_log(run_dir: Path) -> dict[str, list[Any]]:
    """Every JSONL log of a run, record by record, without timings."""
    return {
        str(path.relative_to(run_dir)): [scrub(json.loads(line)) for line in path.read_text().splitlines()]
        for path in sorted(run_dir.rglob("*.jsonl"))
    }


def test_restarting_the_stream_calls_the_graph_again(run, monkeypatch):
    streams = []
    real = execute.stream

    def counted(*args: Any, **kwargs: Any) -> bool:
        streams.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(execute, "stream", counted)
    monkeypatch.setattr(execute, "RESTREAM_ROUNDS", 2)
    result = run("rounds=5")
    assert result.manifest.status == "completed"
    assert len(streams) == 3  # rounds 1-2, 3-4, 5


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("rounds=4", "model.reject_first=1", "probes.enabled=true"), id="drift-probes"),
        pytest.param(("rounds=3", "format=moderated"), id="moderated"),
        pytest.param(("rounds=3", "format=judge_refine"), id="judge-refine"),
        pytest.param(("rounds=3", "format=panel", "format.judge=false"), id="panel"),
        pytest.param(("format=panel", "model.synthesize_rate=1.0", "rounds=3"), id="panel-judge-closes"),
    ],
)
def test_a_stream_restarted_every_round_writes_what_one_stream_writes(run, runs_root, monkeypatch, args):
    one = run(*args, "run_name=one")
    monkeypatch.setattr(execute, "RESTREAM_ROUNDS", 1)
    many = run(*args, "run_name=many")
    assert verify(many.run_dir)[0] == []
    ended = (many.manifest.status, many.manifest.stop_reason)
    assert ended == (one.manifest.status, one.manifest.stop_reason)
    assert scrub(many.manifest.counts.model_dump()) == scrub(one.manifest.counts.model_dump())
    assert every_log(many.run_dir) == every_log(one.run_dir)


def test_the_scripted_model_forgets_old_requests_but_not_a_retry(monkeypatch):
    from harness.models import scripted
    from harness.models.base import ModelRequest

    monkeypatch.setattr(scripted, "_REMEMBERED_REQUESTS", 8)
    model = ScriptedModel(seed=1)

    def ask(round_: int) -> None:
        model.complete(ModelRequest(messages=[], tags={"round": round_, "role": "thinking"}, seed=0))

    for round_ in range(1, 40):
        ask(round_)
        ask(round_)  # a retry comes straight after: its count is 2
    assert len(model._calls) == 8
    assert list(model._calls.values()) == [2] * 8


def test_a_grounded_debate_restarted_every_round_writes_what_one_stream_writes(run, grounded, monkeypatch):
    one = run(*grounded, "rounds=2", "run_name=one")
    monkeypatch.setattr(execute, "RESTREAM_ROUNDS", 1)
    many = run(*grounded, "rounds=2", "run_name=many")
    assert verify(many.run_dir)[0] == []
    assert every_log(many.run_dir) == every_log(one.run_dir)

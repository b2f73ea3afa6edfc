"""Behavioural probes in a run: where their records go, what they leave
alone, what verify catches, how a crash mid-probe resumes, and the
instruction-stability table (docs/probes.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from test_replay import Calls, Crash

from analysis.probes import instruction_stability, probe_table
from harness.engine import resume_run
from harness.probes.catalog import active_probes
from harness.schema import ConfigError
from harness.store.memory import JsonlLog
from harness.store.records import ArgumentRecord, ProbeRecord, PromptRecord, parse_record
from harness.store.rundir import read_manifest
from harness.verify import verify

PROBED = ("rounds=2", "model.reject_first=1", "probes.enabled=true")
N_PROBES = 12  # conf/probes/default.yaml
VOLATILE = ("ts", "prev_hash", "seq")


def read(path: Path) -> list:
    return [parse_record(line) for line in path.read_text().splitlines()] if path.is_file() else []


def stable(records: list, *, prompt_sized: bool = True) -> list[dict]:
    """Records less what differs between two identical runs (times, hashes,
    latencies), and less the prompt's size if not ``prompt_sized``."""
    out = []
    for r in records:
        d = r.model_dump(mode="json", exclude=set(VOLATILE))
        d["usage"].pop("latency_s")
        if not prompt_sized:
            d["usage"].pop("input_tokens")
        out.append(d)
    return out


def probes_of(run_dir: Path) -> list[ProbeRecord]:
    return [r for team in ("pros", "cons") for r in read(run_dir / team / "probes.jsonl")]


@pytest.fixture
def pair(run):  # type: ignore[no-untyped-def]
    """The same debate, probed and not, at the same seed."""
    return run(*PROBED), run(*PROBED[:-1])


def test_each_turn_is_probed_once_per_probe_in_its_own_log(pair):
    on, _ = pair
    for team in ("pros", "cons"):
        records = read(on.run_dir / team / "probes.jsonl")
        assert all(isinstance(r, ProbeRecord) and r.team == team and r.role == "probe" for r in records)
        assert [(r.round, r.iteration) for r in records] == [(n, i) for n in (1, 2) for i in range(N_PROBES)]
        assert all(
            r.persona_id and r.persona_id.startswith(f"r{r.round:04d}.{team}.persona") for r in records
        )
    layout = read_manifest(on.run_dir).layout
    assert layout is not None and all("probes" in seat.logs for seat in layout.seats)
    verdicts = [r.passed for r in probes_of(on.run_dir)]
    assert True in verdicts and False in verdicts  # the scripted replies pass some probes, fail others
    assert verify(on.run_dir) == ([], [])


def test_probing_changes_nothing_of_the_debate_nor_of_the_other_team(pair):
    """Same seed, probes on and off: the scripted model's replies do not depend
    on the prompt, so every debate record is equal, and each team's prompt and
    reply logs differ only by its own probes' calls."""
    on, off = pair
    assert stable(read(on.run_dir / "shared_memory.jsonl")) == stable(
        read(off.run_dir / "shared_memory.jsonl")
    )
    assert stable(read(on.run_dir / "events.jsonl")) == stable(read(off.run_dir / "events.jsonl"))
    for team in ("pros", "cons"):
        for log in ("persona", "thinking", "critique"):
            path = f"{team}/{log}.jsonl"
            # the rules the persona carries lengthen its prompts: all else is equal
            on_records, off_records = read(on.run_dir / path), read(off.run_dir / path)
            assert stable(on_records, prompt_sized=False) == stable(off_records, prompt_sized=False), path
        for log in ("prompts", "replies"):
            got, had = (read(d / team / f"{log}.jsonl") for d in (on.run_dir, off.run_dir))
            added = [r for r in got if r.id not in {h.id for h in had}]
            assert {h.id for h in had} <= {r.id for r in got}
            assert len(added) == 2 * N_PROBES  # one prompt (reply) per probe per turn
            assert all(r.role == "probe" and r.team == team for r in added), f"{team}/{log}"
    assert not (off.run_dir / "pros" / "probes.jsonl").exists()
    # probe calls are counted apart: the debate's calls and replies are as unprobed
    c_on, c_off = on.manifest.counts, off.manifest.counts
    assert (c_on.model_calls, c_on.output_tokens, c_on.published) == (
        c_off.model_calls,
        c_off.output_tokens,
        c_off.published,
    )
    assert c_on.probe_calls == 2 * 2 * N_PROBES and c_off.probe_calls == 0
    assert c_on.probe_tokens == sum(
        r.usage.input_tokens + r.usage.output_tokens for r in probes_of(on.run_dir)
    )
    assert "probe" not in c_on.usage_by_role


def test_the_prompts_carry_the_rules_and_the_probe_sees_the_team_view(run, settings):
    result = run(*PROBED)
    instructions = [p.instruction for p in active_probes(settings(*PROBED).probes)]
    prompts = [r for r in read(result.run_dir / "pros" / "prompts.jsonl") if isinstance(r, PromptRecord)]
    for role in ("persona", "thinking", "probe"):
        system = next(r for r in prompts if r.role == role).messages[0]["content"]
        assert all(i in system for i in instructions), role
    # the probe of round 2 sees the persona the team held and its own argument of the round
    probe = next(r for r in prompts if r.role == "probe" and r.round == 2)
    persona = read(result.run_dir / "pros" / "persona.jsonl")[-1]
    argument = next(a for a in read(result.run_dir / "shared_memory.jsonl") if a.round == 2)
    assert persona.persona in probe.messages[0]["content"]
    assert argument.text[:80] in probe.messages[1]["content"]
    assert "Question: " in probe.messages[1]["content"]


def forge(path: Path, record) -> None:  # type: ignore[no-untyped-def]
    JsonlLog(path, fsync=False).append(record)  # chained as the engine would: only the forgery shows


@pytest.mark.parametrize("leak", ["other_team_log", "shared_memory", "prompt_in_other_team", "wrong_id"])
def test_verify_catches_a_forged_probe_leak(run, leak):
    run_dir = run(*PROBED).run_dir
    assert verify(run_dir)[0] == []
    pros = read(run_dir / "pros" / "probes.jsonl")
    victim = next(r for r in pros if r.reply and len(r.reply) >= 24)
    if leak == "other_team_log":
        forge(run_dir / "cons" / "probes.jsonl", victim.model_copy(update={"id": "r0002.pros.probe.i99.x"}))
        expect = "outside pros/probes.jsonl"
    elif leak == "shared_memory":
        argument = ArgumentRecord(
            id="r0003.pros.argument.i0",
            round=3,
            team="pros",
            role="argument",
            text=f"As we said: {victim.reply}",
            draft_id="x",
            critique_id=None,
            source="approved",
        )
        forge(run_dir / "shared_memory.jsonl", argument)
        expect = f"holds the reply of probe {victim.id}"
    elif leak == "prompt_in_other_team":
        prompt = PromptRecord(
            id="r0002.pros.probe.i0.prompt.copy", round=2, team="pros", role="probe", messages=[]
        )
        forge(run_dir / "cons" / "prompts.jsonl", prompt)
        expect = "was written by a probe of team pros"
    else:
        forge(run_dir / "pros" / "probes.jsonl", victim.model_copy(update={"id": "r0009.pros.probe.i0.zz"}))
        expect = "has an id its position does not give"
    problems, _ = verify(run_dir)
    assert any(expect in p for p in problems), problems


def probe_calls(requests) -> list[int]:  # type: ignore[no-untyped-def]
    """1-based call numbers of the probe calls."""
    return [n for n, r in enumerate(requests, 1) if r.tags["role"] == "probe"]


@pytest.mark.parametrize(
    "which", [0, 5, 2 * N_PROBES + 7], ids=["before_first_probe", "mid_probe", "round_2"]
)
def test_a_crash_mid_probe_resumes_exactly(run, runs_root, which):
    calls = Calls()
    reference = run(*PROBED, build=calls.build)
    crash_at = probe_calls(calls.requests)[which]
    first = Calls(fault=lambda n, request: Crash() if n == crash_at else None)
    with pytest.raises(Crash):
        run(*PROBED, build=first.build)
    (run_dir,) = [p for p in runs_root.iterdir() if p != reference.run_dir]
    assert len(probes_of(run_dir)) == which  # every probe before the crash landed, none after
    second = Calls()
    resume_run(run_dir, build=second.build)
    assert (first.made - 1) + second.made == calls.made  # only the cut-off call is made again
    assert stable(probes_of(run_dir)) == stable(probes_of(reference.run_dir))
    assert stable(read(run_dir / "shared_memory.jsonl")) == stable(
        read(reference.run_dir / "shared_memory.jsonl")
    )
    assert verify(run_dir)[0] == []
    assert read_manifest(run_dir).counts.probe_calls == reference.manifest.counts.probe_calls


def test_a_crash_after_the_reply_before_its_record_asks_nothing_twice(run, runs_root, monkeypatch):
    calls = Calls()
    reference = run(*PROBED, build=calls.build)
    real, landed = JsonlLog.append, []

    def append(self, record):  # type: ignore[no-untyped-def]
        if isinstance(record, ProbeRecord) and self.get(record.id) is None and len(landed) == 3:
            raise Crash()  # the fourth probe's reply is kept, its record never lands
        out = real(self, record)
        if isinstance(record, ProbeRecord):
            landed.append(record.id)
        return out

    monkeypatch.setattr(JsonlLog, "append", append)
    first = Calls()
    with pytest.raises(Crash):
        run(*PROBED, build=first.build)
    monkeypatch.setattr(JsonlLog, "append", real)
    (run_dir,) = [p for p in runs_root.iterdir() if p != reference.run_dir]
    second = Calls()
    resume_run(run_dir, build=second.build)
    assert first.made + second.made == calls.made  # the kept reply was replayed, not asked again
    assert stable(probes_of(run_dir)) == stable(probes_of(reference.run_dir))
    assert verify(run_dir)[0] == []


def test_instruction_stability_on_a_hand_made_table():
    rows = [
        # run a, pros: 2/4 then 1/4 then 3/4 (one reply never validated in round 3)
        *[("a", 1, "pros", p) for p in (True, True, False, False)],
        *[("a", 2, "pros", p) for p in (True, False, False, False)],
        *[("a", 3, "pros", p) for p in (True, True, True, None)],
        # run a, cons: 0 at its first turn: stability has no base
        *[("a", 1, "cons", p) for p in (False, False)],
        *[("a", 2, "cons", p) for p in (True, False)],
    ]
    probes = pd.DataFrame(rows, columns=["run_id", "round", "team", "passed"])
    probes["passed"] = probes.passed.astype("boolean")
    got = instruction_stability(probes).set_index(["team", "round"])
    assert list(got.loc["pros"].probes) == [4, 4, 3]
    assert list(got.loc["pros"].pass_rate) == [0.5, 0.25, 1.0]
    assert list(got.loc["pros"].stability) == [1.0, 0.5, 2.0]
    assert list(got.loc["cons"].pass_rate) == [0.0, 0.5]
    assert all(math.isnan(s) for s in got.loc["cons"].stability)


def test_the_probes_table_has_a_row_per_record(run, runs_root):
    on = run(*PROBED)
    table = probe_table(runs_root, cache=False)
    assert len(table) == len(probes_of(on.run_dir)) == 2 * 2 * N_PROBES
    row = table.iloc[0]
    assert (row["round"], row.team, row.probe, row.checker) == (1, "cons", "short_answer", "max_words")
    assert row.reply_words > 0 and row.tokens > 0 and row.calls == 1
    stability = instruction_stability(table)
    assert len(stability) == 4 and set(stability.team) == {"pros", "cons"}
    assert (stability.groupby("team").stability.first() == 1.0).all()
    assert probe_table(run("rounds=1").run_dir, cache=False).empty  # an unprobed run has no rows


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("probes.use=[nope]", "probes.use"),
        ("probes.catalog.short_answer.checker=nope", "probes.catalog.short_answer.checker"),
        ("probes.catalog.short_answer.params.n=0", "probes.catalog.short_answer.params"),
        ("probes.catalog.short_answer.question=''", "probes.catalog.short_answer.question"),
        ("probes.catalog.open_indeed.instruction='Say {what}'", "probes.catalog.open_indeed.instruction"),
        ("probes.use=[]", "probes.use"),
        ("format=panel", "probes.enabled"),
    ],
)
def test_config_errors_are_one_line_naming_the_key(run, runs_root, override, key):
    with pytest.raises(ConfigError) as caught:
        run("probes.enabled=true", override)
    assert str(caught.value).startswith(f"{key}: ") and "\n" not in str(caught.value)
    assert not runs_root.exists()  # checked before any folder is made


def test_an_unprobed_run_keeps_no_probe_set(run):
    result = run("rounds=1")
    assert "probes" not in (result.run_dir / "config.yaml").read_text()
    assert "probes" not in json.loads((result.run_dir / "fingerprint.json").read_text())["parts"]["config"]

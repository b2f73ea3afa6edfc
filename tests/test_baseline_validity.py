"""analysis.baseline_splices: ``baseline_similarity`` on persona fades spliced from
real turns (tests/fixtures/real_turns/, its no-persona turns in nopersona/) rises
where a persona hands over to no-persona turns, not where nothing is planted, and
the validity summary counts what it rates. benchmarks/baseline_validity.py writes
its block into the JSON without touching the others, and so does detector_validity."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from analysis import baseline_splices as bs
from analysis import splice

FIXTURE = Path(__file__).parent / "fixtures" / "real_turns"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODEL = "local:smollm2"
# No-persona turns written by hand: plain, on-topic and alike, so a fade into them is unmistakable.
PLAIN = [
    "Remote work is better for society because it saves commuting time and gives families more time.",
    "Remote work lets people live where they want, saves commuting time and gives families flexibility.",
    "Working remotely saves commuting time, cuts traffic and gives families more time together.",
    "Remote work is better for society: less commuting time, less traffic and more time for families.",
    "Remote work saves commuting time and money and gives families time, so society is better off.",
]


def plain_runs(n: int = 3) -> list[splice.SeatRun]:
    rows = [
        {"model": MODEL, "cell": "plain", "run": f"plain/rep-{i}", "seat": "pros", "side": "FOR the motion"}
        | {"round": r, "text": PLAIN[(r + i) % len(PLAIN)]}  # each run words its rounds differently
        for i in range(n)
        for r in range(1, len(PLAIN) + 1)
    ]
    return splice.from_rows(rows)


def pilot(cell: str) -> list[splice.SeatRun]:
    """The fixture's pilot seats of one cell (``debate``, ``control_no_critic``) arguing FOR."""
    return [
        s
        for s in splice.load_fixture(FIXTURE)
        if s.run.startswith(f"pilot/smollm2-{cell}/") and s.side == "FOR the motion"
    ]


def test_a_switch_into_no_persona_turns_rises_after_k_and_a_stable_handover_does_not():
    persona, plain = pilot("debate"), plain_runs()
    assert persona and persona[0].side == plain[0].side  # the fixture's FOR seats, as the plain runs
    k, length = 3, 5
    fade = splice.switch(persona[:1], plain[:1], k, length)
    still = splice.stable(persona[:2], k, length)
    switched = bs.score(fade, plain[1:], "hash:512")
    steady = bs.score(still, plain[1:], "hash:512")
    assert switched["post"] - switched["pre"] == pytest.approx(switched["rise"])
    assert switched["rise"] > 0.3  # hand-written turns share most words with each other
    assert abs(steady["rise"]) < switched["rise"] / 3
    assert min(switched["values"][k - 1 :]) > max(switched["values"][: k - 1])
    with pytest.raises(ValueError, match="baseline holds a run the splice took"):
        bs.score(fade, plain, "hash:512")  # the run spliced in is never its own baseline


def test_the_validity_summary_counts_its_rates_and_never_compares_a_splice_with_its_own_run():
    persona = pilot("debate") + pilot("control_no_critic")
    free = [s for s in splice.load_fixture(FIXTURE / "nopersona") if s.side == "FOR the motion"]
    out = bs.validity(persona, free, "hash:512", length=4)
    assert out["ks"] == [2, 3, 4] and len(out["folds"]) == 2 * 3  # (persona cell, no-persona run) each
    for part in (out["held_out"], *out["held_out_by_cell"].values()):
        assert list(part["hit_by_k"]) == ["switch k=2", "switch k=3", "switch k=4"]
        for r in (part["hit"], part["power"], part["false_alarm"], *part["hit_by_k"].values()):
            assert r["n"] >= 1 and 0 <= r["count"] <= r["n"] and 0.0 <= r["rate"] <= 1.0
    assert {r["kind"] for r in out["rows"]["held_out"]} == {"switch", "drift", "stable"}
    for row in out["rows"]["tuning"] + out["rows"]["held_out"]:
        spliced = set(row["truth"]["a"]["runs"]) | set(row["truth"]["b"]["runs"])
        assert row["left_out"] not in row["baseline"] and not spliced & set(row["baseline"])
    held = {r["truth"]["a"]["cell"] for r in out["rows"]["held_out"] if r["fold"] == 0}
    tuned = {r["truth"]["a"]["cell"] for r in out["rows"]["tuning"] if r["fold"] == 0}
    assert len(held) == 1 and not held & tuned  # a fold holds one persona cell out of tuning


def load(name: str, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def test_the_json_block_and_its_section_and_other_keys_kept(monkeypatch, tmp_path, capsys):
    path = tmp_path / "dv.json"
    path.write_text(json.dumps({"real_text": {"kept": 1}, "params": {"old": 1}}))
    assert "_Not available" in bs.baseline_validity_section(path)[0]
    load("baseline_validity", monkeypatch).main(["--quick", "--json", str(path), "--rounds", "3"])
    assert "NOT THE VALIDATION" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert data["real_text"] == {"kept": 1} and data["params"] == {"old": 1}
    assert data["baseline_similarity"]["hash:512"]["quick"] is True
    lines = bs.baseline_validity_section(path)
    assert any(line.startswith("| hash:512 | all |") for line in lines)
    assert any("QUICK" in line for line in lines)
    # the scripted validation rewrites its own keys and keeps this block
    load("detector_validity", monkeypatch).write_json(path, {"params": {"new": 2}})
    data = json.loads(path.read_text())
    assert data["params"] == {"new": 2} and "baseline_similarity" in data and data["real_text"] == {"kept": 1}

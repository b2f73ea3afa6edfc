"""``python -m analysis calibrate`` on the scripted model (issue 36, part 3):
planted forks of the researcher's own runs (a seat's persona replaced from
round k + 1, in the prompt) and seed-only controls, run through the fork
code; the scripted model follows the persona it is shown, so the detectors
(and the checkpoint interviews) find the switches, the controls raise no
alarm and the personas' turns separate."""

from __future__ import annotations

import json

import pytest

from analysis.__main__ import main
from analysis.plant import PERSONAS, make_forks
from harness.store.rundir import read_manifest


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):  # type: ignore[no-untyped-def]
    """Two 8-round scripted parents, interviewed at rounds 1, 5 and 6, forked after round 4
    and calibrated (hash embedder)."""
    from conftest import compose_cfg
    from omegaconf import OmegaConf

    from harness.config import resolve
    from harness.engine import run_debate

    root = tmp_path_factory.mktemp("calibrate")
    for seed in (0, 1):
        over = [
            "model=scripted",
            f"runs_root={root / 'parents'}",
            "progress=false",
            "rounds=8",
            "interviews.rounds=[1,5,6]",
        ]
        cfg = compose_cfg([*over, f"seed={seed}", f"run_name=p{seed}"])
        run_debate(resolve(cfg), OmegaConf.to_container(cfg, resolve=True))  # type: ignore[arg-type]
    argv = [
        "calibrate",
        str(root / "parents"),
        "--at-round",
        "4",
        "--embedder",
        "hash:512",
        "--out",
        str(root / "forks"),
    ]
    assert main(argv) == 0
    return root


def test_the_forks_plant_a_persona_or_change_only_the_seed(calibrated):
    forks = sorted((calibrated / "forks").iterdir())
    assert [f.name for f in forks if f.is_dir()] == [
        f"p{s}-{kind}" for s in (0, 1) for kind in ("control-0", "planted-cons", "planted-pros")
    ]
    for fork in (f for f in forks if f.is_dir()):
        lineage = read_manifest(fork).lineage
        assert lineage is not None and lineage.at_round == 4
        seat = fork.name.rpartition("-")[2]
        if "planted" in fork.name:
            assert lineage.changed == {
                f"personas.{seat}.text": PERSONAS["hostile"],
                f"personas.{seat}.from_round": 5,
            }
            personas = [json.loads(line) for line in (fork / seat / "persona.jsonl").read_text().splitlines()]
            assert [p["decision"] == "planted" for p in personas] == [p["round"] >= 5 for p in personas]
        else:
            assert list(lineage.changed) == ["seed"]
    # asked again, the forks already made are kept, not made anew
    kept = make_forks([calibrated / "parents" / "p0"], 4, calibrated / "forks")
    assert [f.name for f in kept] == ["p0-planted-cons", "p0-planted-pros", "p0-control-0"]


def test_the_report_finds_the_planted_switches_and_separates_the_personas(calibrated):
    report = json.loads((calibrated / "forks" / "calibration.json").read_text())
    assert report["forks"] == {"planted": 4, "control": 2} and report["switch_rounds"] == [5]
    assert report["auc"]["lexical"] > 0.9 and report["auc"]["embedding"] > 0.9
    best = next(d for d in report["detectors"] if d["detector"] == report["recommendation"]["detector"])
    assert best["hit"]["rate"] == 1 and best["false_alarm"]["rate"] == 0
    assert (
        best["hit"]["n"] == 4 and best["false_alarm"]["n"] == 4
    )  # planted seats; both seats of each control
    assert "separable" in report["recommendation"]["signal"]
    # the interviews too: a seat answers in the persona its prompt shows, a control as at round 1
    asked = next(d for d in report["detectors"] if d["detector"] == "interview changed_share at least=0.5")
    assert (
        asked["hit"]["count"],
        asked["hit"]["n"],
        asked["false_alarm"]["count"],
        asked["false_alarm"]["n"],
    ) == (4, 4, 0, 4)


def test_no_fork_to_measure_is_one_line(tmp_path, capsys):
    assert main(["calibrate", str(tmp_path), "--measure"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: calibrate: no fork under {tmp_path} (a fork's manifest.json has a lineage)"
    )


def test_the_findings_section_reads_the_calibration_block(calibrated, tmp_path):
    from analysis.calibrate import calibration_section

    report = json.loads((calibrated / "forks" / "calibration.json").read_text())
    path = tmp_path / "detector_validity.json"
    assert calibration_section(path)[0].startswith("_Not available: no `calibration`")
    path.write_text(json.dumps({"calibration": report}))
    text = "\n".join(calibration_section(path))
    assert "4 planted forks" in text and "2 controls" in text
    assert f"- trust: {report['recommendation']['detector']} (hit 100%, false alarms 0%)" in text
    assert "| pelt affect penalty=2 | 100% (4/4) | 0% (0/4) |" in text

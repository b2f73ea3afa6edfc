"""The planted forks of a calibration (``analysis.calibrate``): from each
parent run, forks at round k (``harness.fork``), per seat a planted fork whose
seat takes another persona from round k + 1 on (``personas.<seat>``: one of
the shipped pair, a file, or a text), and stable controls that change only
the continuation's seed. Each runs in process, through the fork code."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from harness.store.reader import find_runs
from harness.store.rundir import read_manifest

# The shipped pair: contrasting registers, so a model that follows its persona shows the switch.
PERSONAS = {
    "hostile": "A furious contrarian who mocks every opposing claim as absurd, ridiculous nonsense "
    "and never concedes a single point.",
    "calm": "A calm, courteous analyst who weighs the evidence on both sides and concedes fair "
    "points before answering them.",
}


def persona_text(given: str) -> str:
    """A shipped persona by name, a file's text, or the text itself."""
    if given in PERSONAS:
        return PERSONAS[given]
    path = Path(given).expanduser()
    return path.read_text(encoding="utf-8").strip() if path.is_file() else given


def fork_plan(
    parents: Sequence[Path],
    at_round: int,
    persona: str,
    seats: Sequence[str],
    controls: int,
    planted: int = 1,
) -> list[tuple[Path, str, list[str]]]:
    """(parent, fork name, overrides) per fork: ``planted`` forks per seat (the first at the
    parent's seed, the others also at a control's seed) and ``controls`` seed-only ones."""
    plan = []
    for parent in parents:
        seed = int(_config(parent).get("seed", 0))
        seeds = [f"seed={seed + 1000 * (i + 1)}" for i in range(max(controls, planted))]
        for seat in seats or _seats(parent):
            text = json.dumps(persona)  # quoted: Hydra's grammar reads commas and brackets otherwise
            given = [f"personas.{seat}.text={text}", f"personas.{seat}.from_round={at_round + 1}"]
            plan.append((parent, f"{parent.name}-planted-{seat}", given))
            plan += [
                (parent, f"{parent.name}-planted-{seat}-{i}", [*given, seeds[i]]) for i in range(1, planted)
            ]
        plan += [(parent, f"{parent.name}-control-{i}", [seeds[i]]) for i in range(controls)]
    return plan


def _config(run_dir: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text()) or {}


def _seats(run_dir: Path) -> list[str]:
    """The parent's seats, from its layout (a format names its own)."""
    from harness.store.rundir import read_manifest

    return sorted(seat.name for seat in read_manifest(run_dir).layout.seats)


def make_forks(
    parents: Sequence[Path],
    at_round: int,
    out: Path,
    *,
    persona: str = "hostile",
    seats: Sequence[str] = (),
    controls: int = 1,
    planted: int = 1,
    overrides: Sequence[str] = (),
) -> list[Path]:
    """Fork and run each fork of ``fork_plan`` in process, under ``out``; their folders.
    A fork already there and completed is kept, so a calibration can be extended."""
    from harness.fork import fork

    text, made = persona_text(persona), []
    for parent, name, changed in fork_plan(parents, at_round, text, seats, controls, planted):
        if (out / name / "manifest.json").is_file() and read_manifest(out / name).status == "completed":
            made.append(out / name)
            continue
        extra = [f"runs_root={out}", f"run_name={name}", "progress=false", *overrides, *changed]
        made.append(fork(parent, at_round, extra).run_dir)
    return made


def parents_of(paths: Iterable[Path]) -> list[Path]:
    """Every run folder at or under ``paths`` that is no fork itself."""
    out = []
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"calibrate: no such run folder or tree: {path}")
        out += [d for d in find_runs(path) if read_manifest(d).lineage is None]
    if not out:
        raise ValueError(f"calibrate: no parent run under {', '.join(map(str, paths))}")
    return out

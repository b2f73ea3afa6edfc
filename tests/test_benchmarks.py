"""``make bench`` runs every script in ``benchmarks/`` with the arguments its
recipe names; a script that does not accept them would stop the whole target."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UNKNOWN = "--zz-not-an-option"


def bench_arguments() -> dict[str, list[str]]:
    """Each benchmark the bench recipe gives arguments, with those arguments."""
    recipe = (REPO / "Makefile").read_text().split("\nbench:", 1)[1].split("\n\n", 1)[0]
    found: dict[str, list[str]] = {}
    for names, args in re.findall(r"^\s*([\w.|]+\.py)\) args=([^;]*);;", recipe, re.MULTILINE):
        for name in names.split("|"):
            found[name] = args.strip('"').split()
    return found


def test_the_recipe_names_arguments_for_the_long_benchmarks():
    found = bench_arguments()
    assert found["sweep_scale.py"] == ["--quick"] and found["sweep_launchers.py"][0] == "scripted"
    assert all((REPO / "benchmarks" / name).is_file() for name in found)


@pytest.mark.parametrize(("name", "args"), sorted(bench_arguments().items()))
def test_each_benchmark_accepts_the_arguments_make_bench_gives_it(name, args):
    # an extra unknown option makes argparse stop before any work and list what it rejects
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), *args, UNKNOWN],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].endswith(f"error: unrecognized arguments: {UNKNOWN}")

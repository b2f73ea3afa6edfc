"""Ctrl-C while a command is still importing ends in one line (``harness.__init__``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness

CHECKOUT = Path(harness.__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "command", [["harness.run", "-m", "experiment=debug"], ["harness.sweep", "resume", "x"]]
)
def test_ctrl_c_during_the_imports_is_one_line(tmp_path: Path, command: list[str]) -> None:
    # the first third-party import of each command (hydra, pydantic) is where Ctrl-C lands
    for name in ("hydra", "pydantic"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise KeyboardInterrupt\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{CHECKOUT}"}
    done = subprocess.run(
        [sys.executable, "-m", *command], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stderr.splitlines() == ["error: interrupted (Ctrl-C)"], done.stderr
    assert done.returncode in (130, -2)  # killed by SIGINT, as Python ends on Ctrl-C


def test_a_library_user_keeps_python_s_own_hook() -> None:
    assert sys.excepthook is sys.__excepthook__  # pytest imported harness: no command of ours

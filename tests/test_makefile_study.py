"""``make study`` writes a report of its own day, never over an earlier study's."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_study_dates_its_report() -> None:
    """It wrote docs/findings-exploratory.md, undated: a second study's report replaced the first's."""
    dry = subprocess.run(
        ["make", "-n", "study", f"VENV={Path(sys.executable).parent.parent}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reports = re.findall(r"--report (\S+)", dry.stdout)
    assert len(reports) == 1 and re.fullmatch(r"docs/findings-exploratory-\d{4}-\d\d-\d\d\.md", reports[0])

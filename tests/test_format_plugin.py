"""A format installed from outside the package is a true plugin: a
distribution that declares the ``drift_harness.formats`` and
``drift_harness.conf`` entry points (``harness.plugins``) runs, resumes and
verifies in new processes with no ``hydra.searchpath=`` and no import of its
own. The distribution here is the worked example of docs/adding-a-format.md
(``formats_example``), "installed" as a dist-info folder on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import ConfigError
from harness.formats import FORMATS, get_format

TESTS = Path(__file__).parent


def install(site: Path, formats: str = "formats_example:INTERVIEW") -> Path:
    """A dist-info folder declaring the example's two entry points, as pip writes one."""
    info = site / "interview_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: interview-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[drift_harness.formats]\ninterview = {formats}\n\n"
        f"[drift_harness.conf]\ninterview = file://{TESTS / 'conf'}\n"
    )
    return site


def harness(module: str, *args: str, site: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=180, env=env
    )


def test_an_installed_format_runs_resumes_and_verifies_in_new_processes(tmp_path):
    site, runs = install(tmp_path / "site"), tmp_path / "runs"
    args = (
        "format=interview",
        "model=scripted",
        "rounds=2",
        f"runs_root={runs}",
        "run_name=iv",
        "progress=false",
    )
    first = harness("harness.run", *args, site=site)
    assert first.returncode == 0, first.stderr
    (run_dir,) = runs.glob("iv*")
    again = harness("harness.resume", str(run_dir), "rounds=3", site=site)
    assert again.returncode == 0, again.stderr
    checked = harness("harness.verify", str(run_dir), site=site)
    assert checked.returncode == 0 and "OK: 0 violation(s)" in checked.stdout, checked.stdout
    assert "not run" not in checked.stdout  # the format's own checks ran
    # without the distribution the name is unknown again: nothing was copied into the harness
    missing = harness("harness.run", *args, site=tmp_path / "empty")
    assert missing.returncode == 2 and "format=interview: no such option" in missing.stderr


def test_a_broken_plugin_is_one_line_naming_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(install(tmp_path, formats="no_such_module:FORMAT")))
    monkeypatch.delitem(FORMATS, "interview", raising=False)
    with pytest.raises(
        ConfigError, match=r"^format.name: plugin 'interview' \(no_such_module:FORMAT\) does not load"
    ):
        get_format("interview")
    with pytest.raises(ConfigError, match=r"^format.name: unknown format 'nope'; known: .*interview"):
        get_format("nope")

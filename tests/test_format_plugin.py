"""A format installed from outside the package is a true plugin: a
distribution that declares the ``drift_harness.formats`` and
``drift_harness.conf`` entry points (``harness.plugins``) runs, resumes and
verifies in new processes with no ``hydra.searchpath=`` and no import of its
own, and its runs export and load into the SQL store, whose readers import
only the plugin's records module (``drift_harness.records``). The distribution here is the worked example of docs/adding-a-format.md
(``formats_example``), "installed" as a dist-info folder on the path."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.formats import FORMATS, get_format
from harness.schema import ConfigError

TESTS = Path(__file__).parent


def install(site: Path, formats: str = "formats_example:INTERVIEW") -> Path:
    """A dist-info folder declaring the example's two entry points, as pip writes one."""
    info = site / "interview_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: interview-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[drift_harness.formats]\ninterview = {formats}\n\n"
        f"[drift_harness.conf]\ninterview = file://{TESTS / 'conf'}\n\n"
        "[drift_harness.records]\ninterview = formats_example_records\n"
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
        "rounds=3",
        f"runs_root={runs}",
        "run_name=iv",
        "progress=false",
    )
    first = harness("harness.run", *args, "budget.tokens=400", site=site)  # stops mid-run (exit 75)
    assert first.returncode == 75, first.stderr
    (run_dir,) = runs.glob("iv*")
    again = harness("harness.resume", str(run_dir), "budget.tokens=100000", site=site)
    assert again.returncode == 0, again.stderr
    history = json.loads((run_dir / "manifest.json").read_text())["history"]
    assert [h["action"] for h in history][-2:] == ["resume", "complete"]
    checked = harness("harness.verify", str(run_dir), site=site)
    assert checked.returncode == 0 and "OK: 0 violation(s)" in checked.stdout, checked.stdout
    assert "not run" not in checked.stdout  # the format's own checks ran
    # readers import the plugin's records module only, once they meet its kind
    shown = harness("harness.export", str(run_dir), "--as", "json", site=site)
    assert shown.returncode == 0 and '"phase": "question"' in shown.stdout, shown.stderr
    stored = harness("harness.store", str(runs), site=site)
    assert stored.returncode == 0, stored.stderr
    db = sqlite3.connect(runs / "_store.sqlite")
    kinds = dict(db.execute("select kind, count(*) from records group by kind").fetchall())
    assert kinds.get("follow_up") == 2, kinds  # rounds 2 and 3 follow an answer up
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

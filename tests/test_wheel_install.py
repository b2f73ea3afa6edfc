"""The package installs like one: a wheel built from a copy of the source
tree, installed (not editable) into a fresh virtual environment outside the
repo, runs every step of a run through its console scripts from an unrelated
folder, with the configs it ships inside itself (docs/install.md).

The new environment installs no dependency: a ``.pth`` file with the plain
path of this environment's site-packages lends it ours, without running our
``.pth`` files, so the checkout's editable-install finder stays off."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "harness", "analysis", "conf", "hydra_plugins")


def source_packages() -> set[str]:
    """Every folder that holds a shipped file, as setuptools names it (conf/ is harness.conf)."""
    found = set()
    tops = (("harness", "harness"), ("analysis", "analysis"), ("conf", "harness.conf"))
    tops += (("hydra_plugins/drift_harness_launcher", "hydra_plugins.drift_harness_launcher"),)
    for top, name in tops:
        for folder in [REPO / top, *(REPO / top).rglob("*")]:
            if (
                folder.is_dir()
                and "__pycache__" not in folder.parts
                and any(f.is_file() and f.suffix != ".pyc" for f in folder.iterdir())
            ):
                found.add(".".join([name, *folder.relative_to(REPO / top).parts]))
    return found


def test_pyproject_lists_every_package():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    missing, stale = sorted(source_packages() - listed), sorted(listed - source_packages())
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not stale, f"remove from [tool.setuptools] packages in pyproject.toml: {stale}"


def start(cmd: list[str | Path], cwd: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PYTHONPATH"}
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], code: int = 0) -> str:
    """The command's stdout once it exits 0, or its stderr once it fails with the expected ``code``."""
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, (proc.args, out, err)
    return out if code == 0 else err


def check(cmd: list[str | Path], cwd: Path) -> str:
    return finish(start(cmd, cwd))


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel (built from a copy, so nothing lands in the checkout) installed into a new venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    # --no-build-isolation: this environment's setuptools, nothing downloaded (1.5-3 s; isolated,
    # pip wheel took 4-6 s and python -m build 3-5 s, and build is no dependency)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    check([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("drift_harness-*.whl")
    env = tmp / "venv"
    check([sys.executable, "-m", "venv", "--without-pip", env], cwd=tmp)
    check([*pip, "--python", env / "bin" / "python", "install", "--no-deps", "--no-index", wheel], cwd=tmp)
    # after the install: pip would otherwise see the editable drift-harness and try to replace it
    site = check(
        [env / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp
    )
    (Path(site.strip()) / "_drift_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env


@pytest.mark.slow
def test_console_scripts_run_resume_verify_export_from_anywhere(venv: Path, tmp_path: Path):
    bin_, cwd = venv / "bin", tmp_path / "elsewhere"
    cwd.mkdir()
    where = check(
        [bin_ / "python", "-c", "import harness.paths as p; print(p.__file__); print(p.conf_dir())"], cwd
    )
    module, conf = (Path(line) for line in where.split())
    assert module.is_relative_to(venv) and conf.is_relative_to(venv), where
    assert (conf / "config.yaml").is_file() and (conf / "model" / "scripted.yaml").is_file()

    runs = tmp_path / "runs"
    ran = check(
        [bin_ / "drift-run", "model=scripted", "rounds=1", f"runs_root={runs}", "progress=false"], cwd
    )
    run_dir = Path(ran.strip().splitlines()[-1])
    assert run_dir.parent == runs
    for name in ("manifest.json", "config.yaml", "pros", "cons"):
        assert (run_dir / name).exists(), name
    check([bin_ / "drift-resume", run_dir, "rounds=2"], cwd)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["counts"]["rounds_completed"]) == ("completed", 2)
    assert check([bin_ / "drift-verify", run_dir], cwd).strip().splitlines()[-1].startswith("OK: 0")
    check([bin_ / "drift-export", run_dir, "--out", tmp_path / "report.md"], cwd)
    assert "Remote work" in (tmp_path / "report.md").read_text()
    # the in-process launcher is found by Hydra's plugin scan of the installed hydra_plugins
    swept = check(
        [
            bin_ / "drift-run",
            "-m",
            "model=scripted",
            "rounds=1",
            "llm.temperature=0.2,0.9",
            "sweep.concurrency=2",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "progress=false",
        ],
        cwd,
    )
    assert "2 cells: 2 completed" in swept
    assert list(cwd.iterdir()) == []  # Hydra wrote nothing of its own into the working folder


@pytest.mark.slow
def test_a_user_config_dir_extends_the_shipped_configs(venv: Path, tmp_path: Path):
    user = tmp_path / "my_conf"
    (user / "model").mkdir(parents=True)
    (user / "model" / "mine.yaml").write_text("defaults:\n  - scripted\nreject_first: 3\n")
    (user / "lab.yaml").write_text("defaults:\n  - config\n  - override model: mine\n  - _self_\nrounds: 7\n")
    drift_run = venv / "bin" / "drift-run"
    # three independent commands at once: each spends its ~2 s importing
    shown = start([drift_run, "--config-dir", user, "model=mine", "--cfg", "job", "-p", "model"], tmp_path)
    lab = start([drift_run, f"--config-dir={user}", "--config-name", "lab", "--cfg", "job"], tmp_path)
    bad = start([drift_run, "-cd", user, "model=nope"], tmp_path)
    model = finish(shown)
    assert "reject_first: 3" in model and "spec: scripted:default" in model, model
    composed = finish(lab)
    assert "rounds: 7" in composed and "reject_first: 3" in composed, composed
    assert "model=nope: no such option (known: anthropic, gemma3_270m, mine," in finish(bad, 2)

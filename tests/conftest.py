"""Shared fixtures: configs composed from conf/ exactly as the CLI composes
them, with every run folder under pytest's tmp_path."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from socketserver import BaseServer

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from harness.config import Resolved, resolve
from harness.engine import RunResult, run_debate
from harness.engine.execute import ModelFactory
from harness.formats import validate
from harness.models import build_model
from harness.schema import Config

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
REPO = CONF_DIR.parent

# Modules whose tests spawn processes (the CLI, kills and resumes, servers, sweeps),
# load MiniLM, run the notebook or build the wheel: `make check` leaves them out
# (marker `heavy`) to stay within two minutes; `make test` runs them.
HEAVY_MODULES = frozenset(
    {
        "test_analysis_cli",
        "test_analysis_embed_cache",
        "test_analysis_grounding",
        "test_analysis_notebook",
        "test_analysis_panel",
        "test_benchmarks",
        "test_chat",
        "test_cli",
        "test_compare",
        "test_console_and_disk",
        "test_docs_commands",
        "test_durable_faults",
        "test_durable_smollm2",
        "test_fault_proxy",
        "test_format_plugin",
        "test_fork_grid",
        "test_grounded",
        "test_local_model",
        "test_moderated",
        "test_real_models",
        "test_rundir",
        "test_search",
        "test_study",
        "test_sweep",
        "test_sweep_inprocess",
        "test_topics_batch",
        "test_tracing",
        "test_view_browser",
        "test_wheel_install",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__ in HEAVY_MODULES:
            item.add_marker(pytest.mark.heavy)


def compose_cfg(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def make_cfg(runs_root: Path) -> Callable[..., DictConfig]:
    """Compose a config on the scripted model (unless overridden) under tmp_path."""

    def make(*overrides: str) -> DictConfig:
        base = ["model=scripted", f"runs_root={runs_root}", "progress=false"]
        return compose_cfg([*base, *overrides])

    return make


@pytest.fixture
def settings(make_cfg: Callable[..., DictConfig]) -> Callable[..., Config]:
    def make(*overrides: str) -> Config:
        return validate(make_cfg(*overrides))

    return make


@pytest.fixture
def resolved(make_cfg: Callable[..., DictConfig]) -> Callable[..., Resolved]:
    """``settings``, resolved as a run starts: the config with its format and role models."""

    def make(*overrides: str) -> Resolved:
        return resolve(make_cfg(*overrides))

    return make


@pytest.fixture
def run(make_cfg: Callable[..., DictConfig]) -> Callable[..., RunResult]:
    """Run a whole debate in-process and return its result; ``build=`` passes
    a model factory (a fake, a wrapper) instead of the registry's."""

    def go(*overrides: str, build: ModelFactory = build_model) -> RunResult:
        cfg = make_cfg(*overrides)
        raw = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(raw, dict)
        return run_debate(resolve(cfg), raw, build=build)

    return go


GROUNDED_CLAIM = 'topic.text="Job\'s suffering is deserved"'


@pytest.fixture(scope="session")
def search_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One BM25 index cache for the session: each collection is indexed once."""
    return tmp_path_factory.mktemp("search-cache")


@pytest.fixture
def grounded(search_cache: Path) -> tuple[str, ...]:
    """A grounded debate on the KJV, searched in-process, with the session's index cache."""
    return ("format=grounded", GROUNDED_CLAIM, "search.transport=local", f"search.cache_dir={search_cache}")


@contextlib.contextmanager
def serving(server: BaseServer) -> Iterator[BaseServer]:
    """``server`` answering on a daemon thread until the block ends, then shut and closed."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def read_records(path: Path) -> list:
    """Every record of one JSONL log, parsed and validated."""
    from harness.store.records import parse_record

    return [parse_record(line) for line in path.read_text().splitlines()]


@pytest.fixture
def records() -> Callable[[Path], list]:
    """``records(path)``: the parsed records of one log file."""
    return read_records


@pytest.fixture
def cli(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run ``python -m harness.run`` as a subprocess in a scratch cwd.

    The cwd is an empty folder under tmp_path, so a test can also assert that
    Hydra wrote nothing of its own anywhere.
    """
    import os
    import subprocess
    import sys

    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def go(*args: str, env: dict[str, str] | None = None, timeout: float = 120):  # type: ignore[no-untyped-def]
        # no real provider key leaks in from the developer's shell
        full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        full_env.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "harness.run", *args],
            cwd=cwd,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    go.cwd = cwd  # type: ignore[attr-defined]
    return go

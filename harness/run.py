"""python -m harness.run — run one debate from the command line.

    python -m harness.run rounds=50 llm.temperature=1.0 critic=strict model=gemma3_270m

The story: check the group choices on the command line, let Hydra compose the
config, validate every value, run the debate into a fresh run folder, print
a one-line summary, and print the run folder's path as the last line.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import NoReturn, TextIO

import hydra
from omegaconf import DictConfig, OmegaConf

from harness.config import ConfigError, validate
from harness.context import ModelCallError
from harness.engine import run_debate
from harness.models.base import ModelConfigError
from harness.resume import main as resume_main
from harness.resume import report
from harness.sweep_cell import is_sweep_job, run_cell

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
_GROUP_CHOICE = re.compile(r"^\+{0,2}([a-z_]+)=([A-Za-z0-9_.,\-]+)$")


def fail(message: str, code: int) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def check_group_choices(argv: list[str]) -> None:
    """Reject ``model=nope`` in one line, before Hydra prints a page about it."""
    for arg in argv:
        match = _GROUP_CHOICE.match(arg)
        if not match or not (CONF_DIR / match.group(1)).is_dir():
            continue
        group = match.group(1)
        for option in match.group(2).split(","):
            if option != "null" and not (CONF_DIR / group / f"{option}.yaml").is_file():
                known = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
                fail(f"{group}={option}: no such option (known: {', '.join(known)})", 2)


class _HeldStderr(io.StringIO):
    """Hydra reports a bad override as a page of text before ``main`` runs;
    ``cli`` holds stderr until ``main`` starts, so it can say it in one line."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real

    def release(self) -> str:
        sys.stderr = self.real
        return self.getvalue()


def _release_stderr() -> None:
    if isinstance(sys.stderr, _HeldStderr):
        sys.stderr.real.write(sys.stderr.release())


def one_line(report: str) -> str:
    """The gist of Hydra's multi-line error report."""
    noise = ("full_key:", "object_type=", "reference_type=", "Set the environment variable")
    lines = [ln.strip() for ln in report.splitlines() if ln.strip() and not ln.strip().startswith(noise)]
    return " ".join(lines[:3]) or "invalid command line"


def main(cfg: DictConfig) -> None:
    _release_stderr()
    if is_sweep_job():  # a multirun cell: its own folder, log and status; it never exits
        run_cell(cfg, main)
        return
    if cfg.get("resume"):  # python -m harness.run resume=<run_dir>: the run's own config wins
        sys.exit(resume_main([str(cfg.resume)]))
    container = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(container, dict)
    raw = {str(k): v for k, v in container.items()}
    try:
        result = run_debate(validate(cfg), raw)
    except (ConfigError, ModelConfigError) as exc:
        fail(str(exc), 2)
    except ModelCallError as exc:
        fail(str(exc), 1)
    except KeyboardInterrupt:
        fail("interrupted twice; the run folder is resumable with python -m harness.resume", 130)
    code = report(result)
    if code:
        sys.exit(code)


hydra_main = hydra.main(config_path="../conf", config_name="config", version_base="1.3")(main)


def cli() -> None:
    check_group_choices(sys.argv[1:])
    held = _HeldStderr(sys.stderr)
    sys.stderr = held
    try:
        hydra_main()
    except SystemExit as exc:
        if sys.stderr is held and exc.code not in (0, None):  # failed before main() ran
            fail(one_line(held.release()), 2)
        raise
    finally:
        _release_stderr()


if __name__ == "__main__":
    cli()

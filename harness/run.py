"""python -m harness.run — run one debate from the command line.

    python -m harness.run rounds=50 llm.temperature=1.0 critic=strict model=gemma3_270m

The story: check the group choices on the command line, let Hydra compose the
config (its own errors held back and said in one line), validate every value,
run the debate into a fresh run folder, print a one-line summary, and print
the run folder's path as the last line. ``-m`` runs each cell of a sweep
(``harness.sweep.cell``); ``resume=<run_dir>`` continues a run instead, and
``fork.parent=<run_dir> fork.at_round=k`` forks one (``harness.fork``).
"""

# ruff: noqa: E402 (the collector is paused before the imports, resumed after them)
from __future__ import annotations

import gc
import threading

# Run as a command, start-up pauses the cyclic collector: the imports below
# (LangGraph, LangChain, Hydra, the harness's pydantic models) make some 220,000
# objects that live as long as the process, and collecting them as they came
# (full passes over all of them) cost ~0.17 s of the ~1.4 s of CPU they take.
# They are then frozen out of every later collection; the little cyclic garbage
# among them is kept (~2 MB).
COMMAND = __name__ == "__main__" and threading.current_thread() is threading.main_thread()
if COMMAND:
    gc.disable()

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from harness.cli.console import guarded
from harness.cli.errors import (
    BAD_INPUT,
    INTERRUPTED,
    HeldStderr,
    check_group_choices,
    config_dirs,
    exit_code,
    fail,
    flags_first,
    one_line,
    parent_keys_forced,
    quote_text_values,
    release_stderr,
)
from harness.cli.exiting import run_then_exit
from harness.config import Resolved, resolve
from harness.engine import RunResult, run_debate
from harness.engine.forking import fork_run
from harness.formats.sections import interpolates
from harness.models.base import ModelConfigError
from harness.paths import conf_dir
from harness.resume import main as resume_main
from harness.resume import report
from harness.runtime.context import ModelCallError
from harness.runtime.interrupt import SecondSignal
from harness.schema import ConfigError, read_topics
from harness.schema_sections import check_topic_index
from harness.store.rundir import DiskFullError
from harness.sweep.callback import discard_unstarted, end_stopped_launch
from harness.sweep.cell import in_cell, is_sweep_job, run_cell, task_overrides
from harness.sweep.grid import check_one_run, check_topic_file
from harness.sweep.launcher import launcher_overrides
from harness.sweep.ready import fork_ready

if COMMAND:
    gc.freeze()
    gc.enable()


def topic_range(path: str | None) -> str:
    """``${topics:${topic.file}}`` (conf/sweep/topics.yaml): the sweep
    ``range(0,N)`` over the N topics of the file, counted as topic.file reads them."""
    if not path:
        raise ConfigError("topic.file: sweep=topics needs topic.file=<path>")
    return f"range(0,{len(read_topics(path))})"


OmegaConf.register_new_resolver("topics", topic_range, replace=True)

# What a run may end in that the command says in one line, with its exit status (``exit_code``).
RUN_ERRORS = (ConfigError, ModelConfigError, ModelCallError, DiskFullError, KeyboardInterrupt)


def run_error(exc: BaseException) -> str:
    """The one line a run's ``RUN_ERRORS`` end in."""
    if isinstance(exc, SecondSignal):
        return "interrupted twice; the run folder is resumable with python -m harness.resume"
    if isinstance(exc, KeyboardInterrupt):  # one Ctrl-C, before the run's stop handler was set
        return "interrupted (Ctrl-C)"
    if isinstance(exc, ModelCallError) and exc.run_dir:
        # recorded failed, and resumable once the cause is fixed: still one line
        return f"{exc}; resume it with: python -m harness.resume {exc.run_dir}"
    return str(exc)


def start(cfg: DictConfig) -> RunResult:
    """A fresh run, or a fork (``fork.parent``: harness.engine.forking) made and run."""
    if (cfg.get("fork") or {}).get("parent") is not None:
        return fork_run(cfg, task_overrides())
    container = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(container, dict)
    if interpolates(container):  # the check merges such a config whole; config.yaml keeps it resolved
        container = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(container, dict)
        plain = {str(k): v for k, v in container.items()}
        resolved = resolve(cfg)
    else:  # nothing to resolve: one plain copy serves the check and config.yaml (~1 ms a sweep cell)
        plain = {str(k): v for k, v in container.items()}
        resolved = resolve(plain)
    say_length(resolved, plain)
    check_interviews_reached(resolved)
    return run_debate(resolved, plain)


def check_interviews_reached(resolved: Resolved) -> None:
    """``interviews.rounds`` past the run's last round: that interview is never asked,
    and the run completed without it, unsaid (a resume that extends the run may ask
    for it: ``interviews.rounds`` is one of its keys)."""
    cfg, fmt = resolved.cfg, resolved.fmt
    last = fmt.planned_rounds(cfg)
    if late := [r for r in cfg.interviews.rounds if r > last]:
        key, value = fmt.length_key[0], OmegaConf.select(OmegaConf.structured(cfg), fmt.length_key[0])
        length = f"{key}={value}" if key == "rounds" else f"{key}={value}: {last} rounds"
        raise ConfigError(
            f"interviews.rounds: {late} past this run's last round ({length}), so never asked; "
            f"name rounds from 1 to {last}, or plan more rounds"
        )


def say_length(resolved: Resolved, plain: dict[str, Any]) -> None:
    """``rounds=N`` typed for a format whose length another key sets (the moderated
    format's ``format.exchanges``) is said in one line: the run goes on at its own
    length, as a grid over formats wants, but not silently."""
    key, _ = resolved.fmt.length_key
    typed = [o for o in task_overrides() if o.lstrip("+").partition("=")[0] == "rounds"]
    if key == "rounds" or not typed:
        return
    cfg, value = resolved.cfg, OmegaConf.select(OmegaConf.create(plain), key)
    print(
        f"note: {typed[-1]} does not set the length of format={cfg.format.name}: {key}={value} does "
        f"({resolved.fmt.planned_rounds(cfg)} rounds); this run has that many",
        file=sys.stderr,
    )


def main(cfg: DictConfig) -> None:
    release_stderr()
    if is_sweep_job():  # a multirun cell: its own folder, log and status; it never exits
        run_cell(cfg, main)
        return
    check_one_command(cfg)
    if cfg.get("resume"):  # python -m harness.run resume=<run_dir>: harness.resume, with the overrides typed
        typed = [o for o in task_overrides() if o.partition("=")[0].lstrip("+~") != "resume"]
        sys.exit(resume_main([str(cfg.resume), *typed]))
    try:
        result = start(cfg)
    except RUN_ERRORS as exc:
        fail(run_error(exc), exit_code(exc))
    code = report(result)
    if code:
        sys.exit(code)


def check_one_command(cfg: DictConfig) -> None:
    """What one command may not ask at once, said in one line before anything starts
    (else a part of it is dropped unsaid): ``resume=`` with a fork, outside a sweep's
    cell ``replicates=N`` or a ``sweep=`` grid without ``-m`` (one run would be made),
    and ``topic.index`` with no ``topic.file``."""
    if cfg.get("resume") and (cfg.get("fork") or {}).get("parent") is not None:
        fail(
            f"fork.parent: resume={cfg.resume} continues that run, and a fork makes a new one; "
            "give one: python -m harness.fork <parent> --at-round K, or harness.resume <run>",
            BAD_INPUT,
        )
    try:
        if not in_cell():  # a cell's replicates=N is its sweep's
            hydra = HydraConfig.get() if HydraConfig.initialized() else None
            grid = hydra.sweeper.get("params") if hydra is not None else None
            preset = hydra.runtime.choices.get("sweep") if hydra is not None else None
            check_one_run(cfg.get("replicates") or 1, grid, preset)
        check_topic_file(task_overrides(), (cfg.get("topic") or {}).get("file"))
    except ConfigError as exc:
        fail(str(exc), BAD_INPUT)


# an absolute path, so the configs are found from any folder and in a wheel too (harness.paths)
hydra_main = hydra.main(config_path=str(conf_dir()), config_name="config", version_base="1.3")(main)


def cli() -> None:
    # numpy comes in only to write a sweep's sweep.parquet (through pyarrow), and its
    # BLAS threads then spun ~0.1 s of CPU each, for no work
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.argv[1:] = checked_argv(sys.argv[1:])
    if fork_ready(sys.argv[1:]):  # a worker of sweep.processes=P, forked as its driver started
        sys.argv[1:] = checked_argv(sys.argv[1:])  # the command its driver sent it
        run_then_exit(command)  # the copy's process is its own, whatever called cli
    command()


def command() -> None:
    """The command line in ``sys.argv``, checked, run by Hydra."""
    sys.stdout = guarded(sys.stdout)  # a closed pipe or a lost terminal ends no run
    held = HeldStderr(guarded(sys.stderr))
    sys.stderr = held
    try:
        with mode_known(sys.argv[1:]):
            hydra_main()
    except SystemExit as exc:
        if sys.stderr is held and exc.code not in (0, None):  # failed before main() ran
            discard_unstarted()
            fail(one_line(held.release()), BAD_INPUT)
        if exc.code == INTERRUPTED:  # a sweep stopped: its index, as Hydra's end would have
            end_stopped_launch()
        raise
    finally:
        release_stderr()


def checked_argv(argv: list[str]) -> list[str]:
    """The command line as Hydra is to read it, or a one-line error before anything starts."""
    argv = quote_text_values(flags_first(argv))
    try:
        argv = launcher_overrides(argv)  # sweep.concurrency=N: cells as threads
    except ConfigError as exc:
        fail(str(exc), exit_code(exc))
    check_group_choices(argv)
    check_topic_indices(argv)
    check_no_force(argv)
    return parent_keys_forced(argv)


def check_no_force(argv: list[str]) -> None:
    """``--force`` is harness.resume's, no Hydra flag: Hydra's answer to it is its whole usage."""
    if "--force" in argv:
        resumed = next((a.partition("=")[2] for a in argv if a.partition("=")[0].lstrip("+") == "resume"), "")
        fail(
            f"--force: harness.run takes no --force; a forced resume is "
            f"python -m harness.resume {resumed or '<run_dir>'} --force KEY=V",
            BAD_INPUT,
        )


def check_topic_indices(argv: list[str]) -> None:
    """``topic.file=<path> topic.index=0,5`` given literally: each index checked
    against the file now, since a sweep composes only its first cell up front
    (docs/sweeps.md) and would make its folder and run the cells that fit first."""
    given = dict(
        arg.lstrip("+").partition("=")[::2] for arg in argv if "=" in arg and not arg.startswith("~")
    )
    path, indices = given.get("topic.file", ""), given.get("topic.index", "")
    if path in ("", "null") or not re.fullmatch(r"\d+(,\d+)*", indices) or re.search(r"[,$\[('\"]", path):
        return  # a sweep over files, an interpolation, a range(...): each cell checks its own
    try:
        count = len(read_topics(path))
        for index in indices.split(","):
            check_topic_index(path, count, int(index))
    except ConfigError as exc:
        fail(str(exc), exit_code(exc))


# a YAML key that sets hydra.mode (hydra: {mode: ...}, # @package hydra), or adds config folders
_SETS_MODE = re.compile(r"""\bmode['"]?\s*:|\bsearchpath\b""")


@contextmanager
def mode_known(argv: list[str]) -> Iterator[None]:
    """Hydra composes the whole config once just to read ``hydra.mode``
    (``Hydra.get_mode``, ~0.15 s) before composing it again for the run. That
    look is skipped when its answer is known: under ``-m`` the mode is MULTIRUN
    whatever the config says, and Hydra then adds ``hydra.mode=MULTIRUN`` itself,
    as it does for a config that sets none; without ``-m``, when nothing can set
    it (``sets_no_mode``), the look would find none, and Hydra runs one run."""
    if not ("-m" in argv or "--multirun" in argv or sets_no_mode(argv)):
        yield
        return
    from hydra._internal.hydra import Hydra

    get_mode = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        Hydra.get_mode = get_mode  # type: ignore[method-assign]


def sets_no_mode(argv: list[str]) -> bool:
    """Whether nothing in this command can set ``hydra.mode``: no argument names a
    ``mode`` (or is a flag: another config name or folder), and no YAML file of the
    config folders Hydra searches holds a ``mode:`` key, or a search path of its own
    (a ``pkg://`` folder, unread here, may: ``config_dirs`` is None)."""
    if any(arg.startswith("-") or re.search(r"\bmode\b", arg) for arg in argv):
        return False
    dirs = config_dirs(argv)
    files = [path for folder in dirs or [] for path in sorted(folder.rglob("*.y*ml"))]
    return dirs is not None and not any(_SETS_MODE.search(path.read_text(errors="replace")) for path in files)


def script() -> None:
    """``python -m harness.run`` and ``drift-run``: ``cli``, then an exit that
    skips the interpreter's teardown (``harness.cli.exiting``). Only the main
    thread owns the process: run as ``__main__`` on another (a Ray actor's share,
    ``harness.sweep.ray_workers``), ``cli`` returns or raises as it always did."""
    if threading.current_thread() is threading.main_thread():
        run_then_exit(cli)
    else:
        cli()


if __name__ == "__main__":
    script()

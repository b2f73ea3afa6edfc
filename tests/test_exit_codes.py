"""One map from an exception to a command's exit status (``harness.cli.errors``)."""

from __future__ import annotations

import importlib

import pytest

from harness.cli.errors import EXIT_CODES, exit_code
from harness.engine import ResumeError
from harness.run import run_error
from harness.runtime.context import ModelCallError
from harness.runtime.interrupt import SecondSignal
from harness.schema import ConfigError
from harness.store.memory import CorruptLogError
from harness.store.records import ErrorInfo
from harness.store.rundir import DiskFullError, RunInUseError


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ConfigError("llm.temperature: bad"), 2),
        (ResumeError("fingerprint mismatch"), 2),
        (RunInUseError("in use"), 2),
        (CorruptLogError("shared_memory.jsonl: line 2 is unreadable"), 2),
        (ModelCallError("gave up", ErrorInfo(kind="fatal", type="X", message="")), 1),
        (DiskFullError(None, OSError(28, "No space left on device")), 1),
        (KeyboardInterrupt(), 130),
        (FileNotFoundError("nope"), 2),
        (RuntimeError("a bug"), 1),
    ],
)
def test_one_map_gives_every_command_s_exit_status(exc: BaseException, code: int) -> None:
    assert exit_code(exc) == code


def test_every_exit_code_key_names_a_class() -> None:
    for key in EXIT_CODES:
        module, _, name = key.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type), key


def test_one_ctrl_c_is_not_called_a_second_one() -> None:
    # a Ctrl-C before a run's stop handler was set (its config composing, its model loading)
    # was reported as 'interrupted twice; the run folder is resumable', with no folder made
    assert run_error(KeyboardInterrupt()) == "interrupted (Ctrl-C)"
    assert run_error(SecondSignal()).startswith("interrupted twice; the run folder is resumable")
    assert exit_code(SecondSignal()) == 130

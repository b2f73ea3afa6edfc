"""A sweep's grid: its cells, planned before any runs: every job Hydra's basic sweeper
launches for a multirun's overrides, each named after what varies
(``temp-0.2_model-smollm2_rep-1``, also its run folder's name), and each
replicate's seed. The driver plans every cell first (``plan_cells``), so a
resume knows the cells that never started; ``harness.sweep.index`` keeps
their rows.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel

CellStatus = Literal["pending", "running", "completed", "failed", "interrupted", "crashed"]
_SHORT_KEYS = {"temperature": "temp", "replicate": "rep"}
_UNSAFE = re.compile(r"[^A-Za-z0-9.+-]+")
_MAX_NAME = 120


class Cell(BaseModel):
    """One row of the index: the cell as planned, then what its runs did."""

    num: int
    name: str  # also the run folder's name, inside the sweep folder
    overrides: list[str]  # the job's task overrides, as Hydra received them
    params: dict[str, str]  # the overrides that vary across the sweep
    status: CellStatus = "pending"
    action: str | None = None
    rounds_done: int = 0
    rounds: int | None = None
    wall_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0  # None: unknown
    seed: int | None = None
    exit_code: int | None = None
    error: str | None = None


def safe_value(value: str) -> str:
    """One path component: ``openai:gpt-4o`` -> ``openai-gpt-4o``; ``a/b`` never nests.
    (A name is always ``label-value``, so it can never be ``.`` or ``..`` either.)"""
    return re.sub(r"\.{2,}", ".", _UNSAFE.sub("-", value)) or "empty"


def _labels(keys: list[str]) -> dict[str, str]:
    """Short labels for the varying keys: the last dotted part, unless two collide."""
    last = [k.split(".")[-1] for k in keys]
    out = {}
    for key, short in zip(keys, last, strict=True):
        label = short if last.count(short) == 1 else key
        out[key] = _SHORT_KEYS.get(label, label).replace("_", "-").replace(".", "-")
    return out


def _shown(key: str, value: str) -> str:
    """What a cell's name shows of a value: a fork grid's parent by its folder's name."""
    return value.strip("'\"").rstrip("/").rsplit("/", 1)[-1] if key == "fork.parent" else value


def cell_name(params: dict[str, str], num: int) -> str:
    """``temp-0.2_model-smollm2_rep-1``; truncated with a hash suffix if very long."""
    if not params:
        return f"cell-{num:03d}"
    labels = _labels(list(params))
    name = "_".join(f"{labels[k]}-{safe_value(_shown(k, v))}" for k, v in params.items())
    if len(name) > _MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: _MAX_NAME - 9]}-{digest}"
    return name


def override_key(override: str) -> str:
    """The key an override sets: ``+a.b=1`` -> ``a.b``."""
    return override.split("=", 1)[0].lstrip("+~")


def plan_cells(arguments: list[str]) -> list[Cell]:
    """Every cell of the sweep, in the order Hydra's basic sweeper launches them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(arguments)
    varying = [override_key(o.input_line or "") for o in parsed if o.is_sweep_override()]
    jobs = BasicSweeper.split_arguments(parsed, max_batch_size=None)[0]
    cells, seen = [], set()
    for num, job in enumerate(jobs):
        # values as typed: the sweeper escapes ":" and the like (openai\:gpt-4o)
        params = {
            override_key(o): re.sub(r"\\(.)", r"\1", o.split("=", 1)[1])
            for o in job
            if override_key(o) in varying
        }
        name = base = cell_name(params, num)
        for n in range(2, len(jobs) + 2):  # two values that sanitise alike
            if name not in seen:
                break
            name = f"{base}-{n}"
        seen.add(name)
        cells.append(Cell(num=num, name=name, overrides=list(job), params=params))
    return cells


def check_one_run(replicates: int, grid: Mapping[str, Any] | None = None, preset: str | None = None) -> None:
    """``replicates=N``, or a sweep preset's grid (``sweep=smoke``: ``hydra.sweeper.params``),
    outside ``-m``: they are a sweep's cells, and one run would be made with none of them."""
    from harness.schema import ConfigError  # the sweep's grid never needs it otherwise

    if replicates > 1:
        raise ConfigError(
            f"replicates={replicates}: makes {replicates} cells of a sweep, one run each; add -m"
        )
    if grid:
        name = f"sweep={preset}" if preset else "hydra.sweeper.params"
        raise ConfigError(
            f"{name}: a sweep's grid over {', '.join(map(str, grid))}; without -m one run is made "
            "and the grid is ignored; add -m"
        )


def check_topic_file(overrides: list[str], topic_file: object) -> None:
    """``topic.index=N`` typed where no ``topic.file`` is composed: the index picks a motion
    of that file, and with none the run debated ``topic.text``, the index unsaid."""
    from harness.schema import ConfigError

    typed = [o for o in overrides if override_key(o) == "topic.index"]
    if typed and topic_file in (None, ""):
        raise ConfigError(
            f"{typed[-1]}: picks a motion of topic.file, and no topic.file is set "
            "(the run would debate topic.text); add topic.file=<path>"
        )

"""The cells a ``harness.run`` command line would run, composed as it composes them.

One run: Hydra composes the overrides in run mode. ``-m``: Hydra composes
the sweep's master config in multirun mode, the cells are planned as the
sweep callback plans them (``plan_cells``: the ``sweep=`` preset's params,
then the command line's, ``replicates=N`` expanded), and each cell's config
is made as the in-process launcher makes it (``CellConfigs``), with its
replicate's seed (``cell_config``). A fork (``fork.parent``, ``fork.at_round``)
is planned as ``harness.engine.forking`` makes it: its parent's
``config.yaml`` with only its own overrides applied (``fork_config``), its
rounds 1..k the parent's. Every cell is validated before anything runs; a
bad override or value is a ``PlanError`` of one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from harness.cli.errors import check_group_choices, hydra_report, one_line, quote_text_values
from harness.config import resolve
from harness.engine.execute import check_prices
from harness.engine.forking import checked, checked_snapshot, parent_held
from harness.engine.resuming import unredacted
from harness.formats import validate
from harness.models.base import ModelConfigError
from harness.paths import conf_dir
from harness.run import check_interviews_reached  # registers ${topics:...} (sweep=topics)
from harness.schema import Config, ConfigError
from harness.store.rundir import run_dir_name
from harness.sweep.callback import concurrent_workers, replicate_override
from harness.sweep.cell import cell_config
from harness.sweep.configs import CellConfigs
from harness.sweep.grid import check_one_run, check_topic_file, plan_cells
from harness.sweep.launcher import launcher_overrides


class PlanError(ValueError):
    """A command line the plan cannot compose; ``str()`` is one line."""


@dataclass(frozen=True)
class PlannedCell:
    name: str  # the sweep's folder name for the cell, or the run's folder name
    cfg: DictConfig  # as harness.run would hand it to the engine
    settings: Config  # validated
    at_round: int = 0  # a fork's k: its rounds 1..k are its parent's, paid already
    parent: Path | None = None  # a fork's parent run folder


@dataclass(frozen=True)
class Cells:
    cells: list[PlannedCell]
    in_flight: int  # cells that run at once under the chosen launcher
    # cells on an embedded model that run at once: the in-process launcher runs them one
    # at a time a driver process (they share its llama.cpp model); others as in_flight
    local_lanes: int = 1


def compose_cells(argv: list[str]) -> Cells:
    """Every cell of ``argv`` (``harness.run``'s overrides, ``-m`` included), validated."""
    multirun = any(a in ("-m", "--multirun") for a in argv)
    args = quote_text_values([a for a in argv if a not in ("-m", "--multirun")])
    if flags := [a for a in args if a.startswith("-")]:
        raise PlanError(
            f"{flags[0]}: not an override; harness.plan takes harness.run's overrides, -m and its own options (--help)"
        )
    if any(a.partition("=")[0].lstrip("+") == "resume" for a in args):
        raise PlanError("resume: a plan is of a fresh run; plan it with the run's own overrides")
    try:
        args = launcher_overrides([*args, *(["-m"] if multirun else [])])
        args = [a for a in args if a != "-m"]
        check_group_choices(args)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        try:
            return _sweep(args) if multirun else _single(args)
        except (HydraException, OmegaConfBaseException) as exc:
            raise PlanError(one_line(hydra_report(exc), args)) from None


def _single(args: list[str]) -> Cells:
    hydra = GlobalHydra.instance().hydra
    assert hydra is not None
    cfg = hydra.compose_config("config", args, run_mode=RunMode.RUN, from_shell=True)
    hydra_cfg = cfg.hydra
    with open_dict(cfg):
        del cfg["hydra"]
    # as typed (a fork's parent may be a cell); harness.run refuses it
    check_one_run(
        int(cfg.get("replicates") or 1),
        hydra_cfg.sweeper.get("params"),
        hydra_cfg.runtime.choices.get("sweep"),
    )
    _check_topic_file(args, cfg, None)
    cfg, k, parent = _forked(cfg, args, None)
    settings = _validated(cfg, None)
    name = f"{parent.name}-fork{k}" if parent else run_dir_name(settings)  # as fork_run names it
    return Cells([PlannedCell(settings.run_name or name, cfg, settings, k, parent)], 1, 1)


def _sweep(args: list[str]) -> Cells:
    hydra = GlobalHydra.instance().hydra
    assert hydra is not None
    master = hydra.compose_config("config", args, run_mode=RunMode.MULTIRUN, from_shell=True)
    task = [str(o) for o in OmegaConf.to_container(master.hydra.overrides.task)]  # type: ignore[union-attr]
    # the basic sweeper puts hydra.sweeper.params (conf/sweep presets) before the command line's
    params = [f"{k}={v}" for k, v in (master.hydra.sweeper.get("params") or {}).items()]
    planned = plan_cells(params + task + replicate_override(params + task))
    configs = CellConfigs(hydra.config_loader, master)
    cells = []
    for cell in planned:
        cfg = cell_config(configs.compose(cell.overrides), Path("."), cell.name)
        _check_topic_file(cell.overrides, cfg, cell.name)
        cfg, k, parent = _forked(cfg, cell.overrides, cell.name)
        cells.append(PlannedCell(cell.name, cfg, _validated(cfg, cell.name), k, parent))
    launcher = master.hydra.launcher
    if "InProcessLauncher" in str(launcher.get("_target_", "")):
        in_flight = max(1, min(int(launcher.concurrency), len(cells)))
        return Cells(cells, in_flight, min(in_flight, int(launcher.get("processes", 1) or 1)))
    in_flight = max(1, concurrent_workers(launcher, len(cells)))
    return Cells(cells, in_flight, in_flight)


def _forked(cfg: DictConfig, overrides: list[str], cell: str | None) -> tuple[DictConfig, int, Path | None]:
    """A fork's config as ``fork_run`` makes it (the fork section cleared: a dry pass
    runs it fresh), its k and its parent; any other cell as it is, with k = 0."""
    if (cfg.get("fork") or {}).get("parent") is None:
        return cfg, 0, None
    try:  # the checks the fork itself makes, with their lines (a refused fork is planned as none)
        fork = checked(cfg, overrides)
        with parent_held(fork.parent):
            checked_snapshot(fork)
    except ConfigError as exc:
        raise PlanError(f"cell {cell}: {exc}" if cell else str(exc)) from None
    raw = {**fork.raw, "fork": {"parent": None, "at_round": None}}
    return OmegaConf.create(unredacted(raw)), fork.k, fork.parent


def _check_topic_file(overrides: list[str], cfg: DictConfig, cell: str | None) -> None:
    """``topic.index`` with no ``topic.file``, as ``harness.run`` refuses it."""
    try:
        check_topic_file(overrides, (cfg.get("topic") or {}).get("file"))
    except ConfigError as exc:
        raise PlanError(f"cell {cell}: {exc}" if cell else str(exc)) from None


def _validated(cfg: DictConfig, cell: str | None) -> Config:
    """The cell's settings, its price table readable and a price for every model a
    dollar budget charges, as ``harness.run`` checks them; else one line naming the cell."""
    try:
        settings = validate(cfg)
        resolved = resolve(cfg)
        check_prices(resolved)
        check_interviews_reached(resolved)
    except (ConfigError, ModelConfigError) as exc:
        raise PlanError(f"cell {cell}: {exc}" if cell else str(exc)) from None
    return settings

"""The control channel of a running in-process sweep, through its folder:

    python -m harness.sweep ctl <sweep> pause [endpoint] | resume
    python -m harness.sweep ctl <sweep> set sweep.concurrency=N | model.max_concurrency=N
    python -m harness.sweep ctl <sweep> set budget.sweep_usd=X | budget.sweep_tokens=N
    python -m harness.sweep ctl <sweep> cancel <cell> | requeue <cell>
    python -m harness.sweep ctl <sweep> wait        # until the driver has ended
    python -m harness.sweep ctl <sweep> … --wait S  # a script: first wait S s for the driver to start

- ``control.jsonl``: append-only, one ``ControlEntry`` a line: each command
  as sent (``kind: command``) and what the driver did with it (``kind:
  effect``, the same ``id``, with the sweep's state after it). Made by the
  driver with mode 0600: only the driver's user may append to it.
- ``driver.lock``: the driver holds an exclusive ``flock`` on it while it
  runs (released by the kernel however the driver ends, a SIGKILL too), so
  "driver not running" needs no heartbeat and no pid guess.

A command is checked here before anything is written (a bad value, a
model key no cell's config has, a pause of an endpoint no cell calls, or a dollar limit on a cell whose model has
no price, where ``budget.sweep_tokens`` is the cap to set, is one line, the
sweep untouched), appended,
and then ``ctl`` waits for its effect. The driver's side is ``harness.sweep.steer``.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Literal

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, Field

from harness.appended import lines_after
from harness.schema import ConfigError
from harness.sweep.cell_status import read_cell_record, utcnow
from harness.sweep.concurrency import MAX_CONCURRENCY, check_concurrency
from harness.sweep.index import read_index

CONTROL_JSONL = "control.jsonl"  # harness.view.watch reads both by these names
DRIVER_LOCK = "driver.lock"
ANSWER_S = 10.0  # how long ctl waits for the driver's effect
SETTABLE = ("sweep.concurrency", "model.max_concurrency", "budget.sweep_usd", "budget.sweep_tokens")
VERBS = ("pause", "resume", "set", "cancel", "requeue")
USAGE = (
    "usage: python -m harness.sweep ctl <sweep_dir> pause [endpoint] | resume | "
    "set {sweep.concurrency=N, model.max_concurrency=N, budget.sweep_usd=X, budget.sweep_tokens=N} "
    "| cancel <cell> | requeue <cell> "
    "| wait [--wait S]"
)


class ControlError(ValueError):
    """A command that cannot be sent, in one line."""


class ControlEntry(BaseModel):
    """One line of ``control.jsonl``: a command, or the driver's effect of one."""

    schema_version: int = 1
    kind: Literal["command", "effect"]
    id: str
    time: datetime = Field(default_factory=utcnow)
    words: list[str]  # the command as typed after ``ctl <sweep>``
    pid: int = Field(default_factory=os.getpid)
    ok: bool | None = None  # effects only
    detail: str = ""  # effects: what changed, or why nothing did
    paused: list[str] = Field(default_factory=list)  # effects: the holds after it ("*": every call)
    concurrency: int | None = None  # effects: cells in flight allowed after it


def check_command(words: list[str]) -> tuple[str, str, str]:
    """(verb, key or cell or endpoint, value) of a well-formed command, or a ``ControlError``."""
    verb, rest = (words[0], words[1:]) if words else ("", [])
    if verb not in VERBS or len(rest) > 1 or (verb in ("set", "cancel", "requeue") and not rest):
        raise ControlError(USAGE)
    if verb == "resume" and rest:
        raise ControlError("resume: takes no argument (it lifts every pause)")
    arg = rest[0] if rest else ""
    if verb != "set":
        return verb, arg, ""
    key, sep, value = arg.partition("=")
    if key not in SETTABLE or not sep:
        raise ControlError(f"set: one of {', '.join(k + '=…' for k in SETTABLE)}, got {arg!r}")
    if key == "sweep.concurrency":
        check_concurrency(value)
    elif key == "model.max_concurrency" and not (value.isdigit() and 1 <= int(value) <= MAX_CONCURRENCY):
        raise ControlError(
            f"model.max_concurrency: a whole number from 1 to {MAX_CONCURRENCY}, got {value!r}"
        )
    elif key == "budget.sweep_usd" and not _positive(value):
        raise ControlError(f"budget.sweep_usd: a number of dollars above 0, got {value!r}")
    elif key == "budget.sweep_tokens" and not (value.isdigit() and int(value) >= 1):
        raise ControlError(f"budget.sweep_tokens: a whole number of tokens above 0, got {value!r}")
    return verb, key, value


def _positive(value: str) -> bool:
    try:
        return 0 < float(value) < float("inf")
    except ValueError:
        return False


def append_entry(sweep_dir: Path, entry: ControlEntry) -> None:
    """One ``os.write`` on O_APPEND: the client's and the driver's lines never interleave."""
    fd = os.open(sweep_dir / CONTROL_JSONL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (entry.model_dump_json() + "\n").encode())
    finally:
        os.close(fd)


class ControlLog:
    """``control.jsonl`` read from where the last read stopped (a half-written line waits)."""

    def __init__(self, sweep_dir: Path, *, from_end: bool = False, offset: int | None = None) -> None:
        self.path = sweep_dir / CONTROL_JSONL
        end = self.path.stat().st_size if from_end and self.path.exists() else 0
        self.offset = end if offset is None else offset

    def read(self) -> list[ControlEntry]:
        lines, self.offset = lines_after(self.path, self.offset)
        out = []
        for line in lines:
            try:
                out.append(ControlEntry.model_validate_json(line))
            except ValueError:
                continue  # not ours to act on: an entry is whole or ignored
        return out


def commands_from(sweep_dir: Path) -> int | None:
    """Where the commands to this process's driver begin in ``control.jsonl``, as its
    ``driver.lock`` says (None: this process holds no lock there)."""
    from harness.view.watch import lock_holder

    held = lock_holder(sweep_dir)  # read once: the pid and where its commands begin
    since = held.get("control_from")
    return since if isinstance(since, int) and held.get("pid") == os.getpid() else None


@contextmanager
def driver_lock(sweep_dir: Path, launcher: str) -> Iterator[None]:
    """Hold ``driver.lock`` while the driver runs, and open the control log to this user alone."""
    fd = os.open(sweep_dir / DRIVER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RuntimeError(f"{sweep_dir}: another driver runs this sweep ({DRIVER_LOCK} is held)") from None
    try:
        log = os.open(sweep_dir / CONTROL_JSONL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(log, 0o600)  # one made by an older driver with a wider umask is narrowed
        # where this driver's commands begin: ctl may send one as soon as the lock is
        # held, before the launcher reads the log (harness.sweep.steer)
        since = os.fstat(log).st_size
        os.close(log)
        os.ftruncate(fd, 0)
        held = {"pid": os.getpid(), "uid": os.getuid(), "launcher": launcher, "control_from": since}
        os.write(fd, json.dumps(held).encode())
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def driver_running(sweep_dir: Path) -> bool:
    """Whether a driver holds the sweep's lock now (the live page asks the same)."""
    from harness.view.watch import driver_alive

    return driver_alive(sweep_dir)


def reachable(sweep_dir: Path) -> None:
    """A ``ControlError`` saying why commands cannot reach this sweep's driver, if they cannot."""
    index = read_index(sweep_dir)
    if not index.launcher.endswith("InProcessLauncher"):
        launcher = index.launcher.rsplit(".", 1)[-1] or "a process launcher"
        raise ControlError(
            f"{sweep_dir}: runs on {launcher}, which ctl cannot steer (it steers the in-process launcher only); "
            f"stop it with Ctrl-C and continue with: python -m harness.sweep resume {sweep_dir} "
            "(start a sweep with sweep.concurrency=N to steer it)"
        )
    if any(
        o.startswith(("hydra.launcher.processes=", "hydra.launcher.engine="))
        and o not in ("hydra.launcher.processes=1", "hydra.launcher.engine=local")
        for o in index.hydra_overrides
    ):
        raise ControlError(
            f"{sweep_dir}: runs in several driver processes or on Ray (sweep.processes, sweep.engine), "
            "which ctl does not steer yet"
        )
    if not driver_running(sweep_dir):
        raise ControlError(
            f"{sweep_dir}: driver not running; continue with: python -m harness.sweep resume {sweep_dir}"
        )
    owner = (sweep_dir / CONTROL_JSONL).stat().st_uid
    if owner != os.getuid():
        raise ControlError(f"{sweep_dir}: only the driver's user (uid {owner}) may steer this sweep")


def cell_configs(
    sweep_dir: Path, shapes: bool = False, skip: Callable[[str], bool] = lambda name: False
) -> Iterator[tuple[str, DictConfig | None]]:
    """(cell, its config) for each cell of the sweep, made as the driver makes them
    (``CellConfigs``, from the sweep's ``multirun.yaml``); ``shapes``: one cell for each
    set of overrides that can change the keys; cells ``skip`` names are not composed.
    A config made otherwise here (another config folder?) is None, and the caller
    refuses nothing on a guess."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from harness.paths import conf_dir
    from harness.sweep.configs import CellConfigs

    master = OmegaConf.load(sweep_dir / "multirun.yaml") if (sweep_dir / "multirun.yaml").is_file() else None
    if not isinstance(master, DictConfig):
        yield "", None
        return
    seen = set()
    GlobalHydra.instance().clear()  # this process's own (ctl's): the harness.plan way
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        configs = CellConfigs(hydra.config_loader, master)
        for cell in read_index(sweep_dir).cells:
            if skip(cell.name):
                continue
            if shapes:
                if (shape := configs.shape(cell.overrides) or tuple(cell.overrides)) in seen:
                    continue
                seen.add(shape)
            try:
                yield cell.name, configs.compose(cell.overrides)
            except Exception:
                yield cell.name, None
                return


def check_model_key(sweep_dir: Path, key: str) -> None:
    """A ``ControlError`` if no cell's model config has ``key``: set in a config that lacks
    it (``model.max_concurrency`` on the scripted model), every cell started after would fail."""
    specs = set()
    for _, cfg in cell_configs(sweep_dir, shapes=True):
        if cfg is None:
            return
        model = cfg.get("model") or {}
        if key.partition(".")[2] in model:
            return
        specs.add(str(model.get("spec")))
    raise ControlError(
        f"{key}: no cell of this sweep has it in its model config ({', '.join(sorted(specs))}); nothing sent"
    )


def check_priced(sweep_dir: Path) -> None:
    """A ``ControlError`` if a cell yet to finish runs a model with no price: its calls
    cost unknown, so a dollar limit would never hold it, and each such cell started under
    it would be refused at its start (a run's dollar budget fails closed on one)."""
    cells = _per_cell(sweep_dir, _unpriced, skip=lambda name: completed(sweep_dir, name))
    if cells is None:
        return
    unpriced: dict[str, list[str]] = {}  # spec -> the cells running it
    for name, specs in cells:
        for spec in specs:
            unpriced.setdefault(spec, []).append(name)
    if unpriced:
        raise ControlError(_unpriced_line(unpriced, len(cells)))


def check_endpoint(sweep_dir: Path, endpoint: str) -> None:
    """A ``ControlError`` if no cell of the sweep calls ``endpoint`` (a provider, or one
    model spec): such a pause held nothing, and said 'paused calls to openai' all the same."""
    if (cells := _per_cell(sweep_dir, _specs)) is None:
        return
    specs = {spec for _, found in cells for spec in found}
    if any(endpoint in (spec, spec.split(":", 1)[0]) for spec in specs):
        return
    raise ControlError(
        f"pause {endpoint}: no cell of this sweep calls it (its models: {', '.join(sorted(specs))}); "
        "name a provider (openai) or a model spec (openai:gpt-4o-mini) of the sweep, or pause every call; nothing sent"
    )


def _per_cell(
    sweep_dir: Path,
    derive: Callable[[DictConfig], list[str] | None],
    skip: Callable[[str], bool] = lambda name: False,
) -> list[tuple[str, list[str]]] | None:
    """Each cell's name and ``derive`` of its config (``_specs``, ``_unpriced``), resolved
    once for cells alike in their models; None where a cell has no config or does not
    resolve here: a check refuses nothing on a guess."""
    seen: dict[str, list[str] | None] = {}  # a cell's model sections -> what derive made of them
    cells = []
    for name, cfg in cell_configs(sweep_dir, skip=skip):
        if cfg is None:
            return None
        key = _models_key(cfg)
        if key not in seen:
            seen[key] = derive(cfg)
        if (found := seen[key]) is None:
            return None
        cells.append((name, found))
    return cells


def _models_key(cfg: DictConfig) -> str:
    """What decides a cell's models and their prices: cells alike in it share one resolve."""
    return OmegaConf.to_yaml(
        OmegaConf.create({k: cfg.get(k) for k in ("model", "roles", "llm", "format", "prices")})
    )


def _specs(cfg: DictConfig) -> list[str] | None:
    """The model specs of ``cfg``'s roles (None: it does not resolve here)."""
    from harness.config import resolve

    try:
        return sorted({m.spec for m, _, _ in resolve(cfg).models.values()})
    except Exception:  # the cell says why when it starts; refuse nothing on a guess
        return None


def completed(sweep_dir: Path, name: str) -> bool:
    """Whether cell ``name`` has completed: it spends no more, so no limit need hold it."""
    return (record := read_cell_record(sweep_dir, name)) is not None and record.status == "completed"


def _unpriced(cfg: DictConfig) -> list[str] | None:
    """The specs of ``cfg``'s roles that have no price (None: it does not resolve here)."""
    from harness.config import resolve
    from harness.models.prices import load_prices

    try:
        run = resolve(cfg)
        table = load_prices(run.cfg.prices.file, run.cfg.prices.models)
    except Exception:  # the cell says why when it starts; refuse nothing on a guess
        return None
    return sorted({m.spec for m, _, _ in run.models.values() if not table.known(m.spec)})


def _unpriced_line(unpriced: dict[str, list[str]], left: int) -> str:
    """budget.sweep_usd's refusal: each unpriced model, with its cells when not all of them;
    the cap that needs no price, and what a price costs the cells started already (a price
    is in a run's fingerprint: resumed under a new one, a cell needs ``--force``)."""
    whose, every = [], all(len(cells) == left for cells in unpriced.values())
    for spec, cells in sorted(unpriced.items()):
        names = ", ".join(cells[:3]) + (f" and {len(cells) - 3} more" if len(cells) > 3 else "")
        whose.append(spec if every else f"{spec} (cells {names} of the {left} left to run)")
    first = min(unpriced).replace(":", "\\:")  # Hydra's override grammar escapes a key's colon
    return (
        f"budget.sweep_usd: {', '.join(whose)} {'has' if len(whose) == 1 else 'have'} no price, "
        f"so a dollar limit would never hold {'the cells' if every else 'those cells'}; cap them with "
        f"budget.sweep_tokens=N instead (it needs no price), or price {'it' if len(whose) == 1 else 'them'} "
        f"with prices.models={{{first}:{{input:<$/1M>,output:<$/1M>}}}} or prices.file (docs/costs.md), "
        "which a cell started already takes only on a resume with --force (its fingerprint holds its prices); "
        "nothing sent"
    )


def send(sweep_dir: Path, words: list[str], answer_s: float = ANSWER_S) -> ControlEntry | None:
    """Check ``words``, append them as a command and wait for the driver's effect (None: no answer)."""
    verb, arg, _ = check_command(words)
    reachable(sweep_dir)
    if verb == "set" and arg.startswith("model."):
        check_model_key(sweep_dir, arg)
    if verb == "set" and arg == "budget.sweep_usd":
        check_priced(sweep_dir)
    if verb == "pause" and arg:
        check_endpoint(sweep_dir, arg)
    if verb in ("cancel", "requeue") and arg not in {c.name for c in read_index(sweep_dir).cells}:
        raise ControlError(f"{verb}: {arg!r} is not a cell of {sweep_dir} (python -m harness.sweep status)")
    log = ControlLog(sweep_dir, from_end=True)
    command = ControlEntry(kind="command", id=uuid.uuid4().hex[:12], words=words)
    append_entry(sweep_dir, command)
    deadline = time.monotonic() + answer_s
    while time.monotonic() < deadline:
        if (effect := _effect_of(log, command.id)) is not None:
            return effect
        if not driver_running(sweep_dir):  # it ended as the command came: it will never answer
            if (effect := _effect_of(log, command.id)) is not None:
                return effect
            raise ControlError(
                f"{sweep_dir}: the driver ended before it read this command, so nothing changed; "
                f"continue with: python -m harness.sweep resume {sweep_dir}"
            )
        time.sleep(0.05)
    return None


def _effect_of(log: ControlLog, command_id: str) -> ControlEntry | None:
    for entry in log.read():
        if entry.kind == "effect" and entry.id == command_id:
            return entry
    return None


def await_driver(sweep_dir: Path, seconds: float) -> None:
    """Wait up to ``seconds`` for a sweep being started to have its driver running (a script
    that starts a sweep in the background and then steers it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (sweep_dir / "sweep.json").is_file() and driver_running(sweep_dir):
            return
        time.sleep(0.1)


def driver_ended(sweep_dir: Path) -> str:
    """``ctl <sweep> wait``: block until the driver has ended; what is left of the sweep."""
    read_index(sweep_dir)  # a folder that is no sweep says so
    while driver_running(sweep_dir):
        time.sleep(0.2)
    return f"{sweep_dir}: the driver has ended (python -m harness.sweep status {sweep_dir})"


def ctl_main(args: list[str]) -> int:
    """``python -m harness.sweep ctl <sweep_dir> <command …> [--wait S]``: the effect in one line.
    ``--wait S``: wait up to S seconds for the driver to start first; ``wait``: for it to end."""
    from harness.cli.errors import BAD_INPUT, FAILED

    if "--wait" in args[:-1]:
        at = args.index("--wait")
        start_s, args = args[at + 1], args[:at] + args[at + 2 :]
    else:
        start_s = "0"
    if len(args) < 2 or not _positive(start_s) and start_s != "0":
        print(USAGE, file=sys.stderr)
        return BAD_INPUT
    sweep_dir = Path(args[0])
    try:
        await_driver(sweep_dir, float(start_s))
        if args[1:] == ["wait"]:
            print(driver_ended(sweep_dir))
            return 0
        effect = send(sweep_dir, args[1:])
    except (ControlError, ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BAD_INPUT
    if effect is None:
        print(f"error: {sweep_dir}: the driver did not answer in {ANSWER_S:g} s", file=sys.stderr)
        return FAILED
    print(
        effect.detail if effect.ok else f"error: {effect.detail}",
        file=sys.stdout if effect.ok else sys.stderr,
    )
    return 0 if effect.ok else BAD_INPUT

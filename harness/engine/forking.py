"""Forking a run (``python -m harness.fork``; docs/forks.md): a new run folder
whose rounds 1..k are its parent's, which goes on from round k+1 under the
fork's own config (``harness.engine.fork_config``; what may change is THE
FORK CONTRACT, ``harness.store.fingerprint``).

Every check comes first, and nothing is made if one fails: the parent is a
run folder of this version, not running now (its lock is free, and held
while it is read), clean under ``verify``, with a snapshot at round k; the
fork's config validates and keeps the parent's format and seats. The folder
is then filled in a hidden staging folder and renamed into place
(``create_run_dir``), so a kill leaves either nothing or a whole fork:
each log copied up to the positions of the parent's snapshot k (never past
them: records of an unfinished round would replay), snapshots 1..k, the
fork's config and fingerprint, and a manifest with its lineage. The parent
is only read. The fork then runs from its snapshot k as a resume would,
with no resume event, so a fork with no override writes the records its
parent wrote. A fork killed later resumes like any run.

The prefix's calls are the parent's: the fork's copied snapshots count
nothing, so its manifest's counts are its own, and its ledger skips the
prefix (``harness.store.lineage.own_start``); ``lineage.prefix_counts``
counts the prefix's records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.config import Resolved, resolve
from harness.engine.execute import (
    ModelFactory,
    Resumption,
    RunResult,
    build_roles,
    execute,
    new_manifest,
    preflight,
)
from harness.engine.fingerprint import components
from harness.engine.fork_config import fork_config
from harness.engine.resuming import continued_state, unredacted
from harness.formats.checks import verify
from harness.models.registry import build_model
from harness.runtime.calls import RoleModel
from harness.schema import ConfigError, ForkConfig
from harness.store.fingerprint import write_fingerprint
from harness.store.lineage import copy_prefix
from harness.store.memory import RunMemory
from harness.store.reader import check_run_files, read_config
from harness.store.records import HistoryEntry, Lineage, RunCounts, RunLayout, RunManifest, Snapshot
from harness.store.rundir import (
    RunFolderError,
    RunInUseError,
    RunLock,
    create_run_dir,
    full_disk_in_one_line,
    read_manifest,
    write_atomic,
    write_config,
    write_manifest,
)
from harness.store.snapshot import SNAPSHOT_DIR, list_snapshots, read_snapshot, snapshot_path


@dataclass
class Checked:
    """A fork every check before its parent's lock has passed: its parent, k, config
    (``raw`` as config.yaml keeps it, ``run`` resolved) and the keys it changed."""

    parent: Path
    manifest: RunManifest
    k: int
    raw: dict[str, Any]
    changed: dict[str, Any]
    run: Resolved


def fork_run(cfg: DictConfig, overrides: list[str], *, build: ModelFactory = build_model) -> RunResult:
    """Make the fork ``cfg.fork`` names (its overrides: ``overrides``) and run it."""
    fork = checked(cfg, overrides)
    prices = preflight(fork.run)
    parent, k, run = fork.parent, fork.k, fork.run
    with parent_held(parent):
        snap = checked_snapshot(fork)
        roles = build_roles(run, prices, build)  # after every check: a local model takes seconds to load
        lineage = Lineage(
            parent=str(parent.resolve()),
            parent_run_id=fork.manifest.run_id,
            parent_fingerprint=snap.fingerprint,
            at_round=k,
            changed=fork.changed,
            prefix_sha256="",  # set as the prefix is copied
        )
        name = run.cfg.run_name or f"{parent.name}-fork{k}"
        with full_disk_in_one_line(None):  # None: no folder was made
            fork_dir = create_run_dir(
                Path(run.cfg.runs_root), name, filler(run, fork.raw, roles, snap, lineage, name)
            )
    return start_fork(run, fork_dir, roles)


def checked(cfg: DictConfig, overrides: list[str]) -> Checked:
    """The fork ``cfg.fork`` names, through every check that needs no lock on its
    parent (``harness.plan`` plans a fork through them too: the same lines)."""
    composed = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(composed, dict)
    parent = fork_parent(cfg.fork.parent)
    manifest = parent_manifest(parent)
    k = fork_round(cfg.fork.at_round)
    ForkConfig(str(parent), k).check()  # k >= 1 before anything names a round to fork at
    check_own_round(parent, manifest, k)
    raw, changed = fork_config(read_config(parent), {str(key): v for key, v in composed.items()}, overrides)
    check_asked(parent, manifest.layout, raw, changed)
    run = resolve(unredacted(raw))
    check_layout(run, manifest.layout)
    return Checked(parent, manifest, k, raw, changed, run)


def checked_snapshot(fork: Checked) -> Snapshot:
    """The parent's snapshot at k, through the checks made under its lock (``parent_held``)."""
    snap, k = parent_snapshot(fork.parent, fork.k), fork.k
    if (planned := fork.run.fmt.planned_rounds(fork.run.cfg)) < k:  # it would end "completed" with k rounds
        raise ConfigError(f"rounds={planned}: a fork at round {k} has {k} rounds already; give rounds>={k}")
    check_open(fork.parent, snap, fork.changed)
    check_verified(fork.parent)
    return snap


def fork_round(at_round: Any) -> int:
    """``fork.at_round`` as typed to harness.run, which passes any value on (harness.fork
    requires ``--at-round`` and checks it is a number): the schema checks its range."""
    if at_round is None:
        raise ConfigError("fork.at_round: a fork needs both fork.parent and fork.at_round")
    if not isinstance(at_round, int) or isinstance(at_round, bool):
        raise ConfigError(f"fork.at_round: {at_round!r} is not a round number (k: a whole number >= 1)")
    return at_round


def fork_parent(parent: Any) -> Path:
    """``fork.parent`` as typed, to harness.fork or harness.run: an empty path would be the
    current folder (``Path("")`` is ``.``), forked unasked if it holds a run."""
    if not str(parent).strip():
        raise ConfigError(f"fork.parent: {str(parent)!r} is blank; name the parent's run folder")
    return Path(str(parent))


def parent_manifest(parent: Path) -> RunManifest:
    if not (parent / "manifest.json").is_file():
        raise ConfigError(f"fork.parent: {parent}: no run folder there (no manifest.json)")
    try:  # the files a fork reads whole, checked as harness.fork checks them: the same one line
        check_run_files(parent, ("manifest.json", "config.yaml"))
        return read_manifest(parent)
    except RunFolderError as exc:  # another version, or a file that does not parse
        raise ConfigError(f"fork.parent: {exc}") from None


def check_own_round(parent: Path, manifest: RunManifest, k: int) -> None:
    """A fork's rounds up to its own fork round were made under its parent's
    config, not its own: forking it before that round would go on under a config
    those rounds never had. Refused, naming the run whose round ``k`` is."""
    owner, lineage = parent, manifest.lineage
    while lineage is not None and k < lineage.at_round:
        owner = Path(lineage.parent)
        try:
            lineage = read_manifest(owner).lineage
        except (OSError, ValueError):  # gone or unreadable: the furthest ancestor named is the pointer
            lineage = None
    if owner != parent:
        at = manifest.lineage.at_round if manifest.lineage else 0
        copied = "round 1 is" if at == 1 else f"rounds 1-{at} are"
        raise ConfigError(
            f"fork.at_round: {parent}'s {copied} {owner}'s (a fork at round {at}); "
            f"fork that run instead: python -m harness.fork {owner} --at-round {k}"
        )


# A section whose asking writes a seat log of its own (a fork keeps its parent's logs):
# what it is, and the key that turns it on
ASKED = {"interviews": ("checkpoint interviews", "rounds"), "probes": ("behavioural probes", "enabled")}


def check_asked(parent: Path, layout: RunLayout, raw: dict[str, Any], changed: dict[str, Any]) -> None:
    """Interviews or probes turned on in a fork of a parent that asked none: its config
    holds no questionnaire or catalog, and the seats' logs would change (was 'set, with
    no questionnaire item to ask', of a questionnaire the researcher never touched)."""
    for key in changed:
        section = key.split(".")[0]
        if section not in ASKED or any(section in seat.logs for seat in layout.seats):
            continue
        what, on = ASKED[section]
        if (raw.get(section) or {}).get(on):
            raise ConfigError(
                f"{key}: {parent} ran without {what}, and a fork keeps its parent's seats' "
                "logs, so it cannot add them; a fresh run can (docs/forks.md)"
            )


def _shape(layout: RunLayout) -> tuple[Any, ...]:
    return layout.format, [(s.name, s.role, s.side, s.logs) for s in layout.seats], layout.public_logs


def check_layout(run: Resolved, parent: RunLayout) -> None:
    """The fork keeps its parent's format, seats and logs: its prefix is theirs."""
    mine = run.fmt.layout(run.cfg)
    if _shape(mine) != _shape(parent):
        seats = lambda layout: ",".join(f"{s.name}:{'+'.join(s.logs)}" for s in layout.seats)  # noqa: E731
        raise ConfigError(
            f"fork: the overrides change the run's seats or logs ({seats(parent)} -> {seats(mine)}); "
            "a fork keeps its parent's format and seats (docs/forks.md)"
        )


@contextmanager
def parent_held(parent: Path) -> Iterator[None]:
    """The parent's lock, held while the fork reads it: a parent running now is refused."""
    if not (parent / ".lock").exists():  # no lock file to take: making one would write to the parent
        yield
        return
    try:
        lock = RunLock(parent, shared=True).__enter__()  # forks of one parent may read it together
    except RunInUseError:
        raise ConfigError(f"fork.parent: {parent} is running now; fork it once it stops") from None
    try:
        yield
    finally:
        lock.__exit__(None, None, None)


def parent_snapshot(parent: Path, k: int) -> Snapshot:
    path = snapshot_path(parent, k)
    if not path.is_file():
        snaps = list_snapshots(parent)
        last = read_snapshot(snaps[-1]).round if snaps else 0
        raise ConfigError(f"fork.at_round: {k} is past {parent}'s last snapshot (round {last})")
    return read_snapshot(path)


def check_open(parent: Path, snap: Snapshot, changed: dict[str, Any]) -> None:
    """A snapshot its format closed (a synthesis, a verdict) leaves a fork no round to run:
    its changes would change nothing, ``rounds=N`` would end 'completed k/N'. Refused, as a
    resume that changes a closed run's rounds is; a fork that changes nothing is its copy."""
    closed = snap.state.get("stop_reason")
    if closed and changed:
        k = snap.round
        earlier = f"fork at round {k - 1} or before" if k > 1 else "it closed after its first round"
        raise ConfigError(
            f"fork.at_round: {k}: {parent} was closed by its format after round {k} ({closed}); "
            f"a fork there has no round left to change ({', '.join(changed)}); {earlier}"
        )


def check_verified(parent: Path) -> None:
    problems, _ = verify(parent)
    if problems:
        raise ConfigError(
            f"fork.parent: {parent} fails verify ({len(problems)} violation(s), first: {problems[0]}); "
            f"see python -m harness.verify {parent}"
        )


def filler(
    run: Resolved,
    raw: dict[str, Any],
    roles: dict[str, RoleModel],
    snap: Snapshot,
    lineage: Lineage,
    name: str,
) -> Callable[[Path], None]:
    """What fills the fork's staging folder: the prefix, snapshots 1..k, config,
    fingerprint, and the manifest last (a folder with a manifest is a run)."""
    parent, k = Path(lineage.parent), lineage.at_round

    def fill(folder: Path) -> None:
        layout = run.fmt.layout(run.cfg)
        lineage.prefix_sha256 = copy_prefix(parent, folder, layout, snap.logs)
        # counted from the copied records, not taken from the parent's snapshot:
        # a fork's snapshots count only its own calls, so a fork of a fork would miss some
        lineage.prefix_counts = RunMemory(folder, layout, fsync=False).tally()
        lineage.prefix_counts.rounds_completed = k
        (folder / SNAPSHOT_DIR).mkdir()
        for j in range(1, k + 1):
            if not (path := snapshot_path(parent, j)).is_file():
                continue
            # counted as nothing (the fork's counts are its own calls); read whole on resume,
            # so a fork that widens the memory window sees every round it asks for
            mine = read_snapshot(path).model_copy(
                update={"counts": RunCounts(rounds_completed=j), "window": {}}
            )
            write_atomic(snapshot_path(folder, j), mine.model_dump_json(indent=1))
        write_config(folder, raw)
        write_fingerprint(folder, components(run.cfg, roles, run.fmt))
        manifest = new_manifest(run, folder, roles)
        manifest.run_id = name  # the folder's name once claimed (``start_fork`` says if it differs)
        changed = ", ".join(f"{key}={value}" for key, value in lineage.changed.items()) or "nothing"
        manifest.history = [
            HistoryEntry(action="fork", detail=f"from {parent} at round {k}; changed: {changed}")
        ]
        manifest.status, manifest.lineage = "interrupted", lineage
        manifest.counts = RunCounts(rounds_completed=k)
        write_manifest(folder, manifest)

    return fill


def start_fork(run: Resolved, fork_dir: Path, roles: dict[str, RoleModel]) -> RunResult:
    """Run the new fork from its snapshot k, as a resume would but saying none."""
    with RunLock(fork_dir):
        manifest = read_manifest(fork_dir)
        if manifest.run_id != fork_dir.name:  # another run took ``name`` first: the folder's own
            manifest.run_id = fork_dir.name
        assert manifest.lineage is not None
        snap = read_snapshot(snapshot_path(fork_dir, manifest.lineage.at_round))
        state = continued_state(snap, run)
        return execute(run, fork_dir, roles, manifest, state, Resumption(snap, None))

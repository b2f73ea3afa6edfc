"""Run folders: atomic creation, config.yaml, manifest.json, provenance.

A folder is filled in a hidden staging folder and claimed by renaming it
into place (atomic on POSIX), so it appears with its config already in it
and two runs started at once never share one: the loser tries the next
suffix. JSON files are replaced atomically (temp file, fsync, rename, fsync
of the folder).
"""

from __future__ import annotations

import errno
import functools
import importlib.metadata
import io
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import count
from pathlib import Path
from typing import Any, TypeGuard

import yaml
from pydantic import TypeAdapter, ValidationError

from harness.schema import Config, ConfigError, redact
from harness.slots import syncing
from harness.store.records import FOLDER_VERSION, RunManifest

PACKAGES = (
    "drift-harness",
    "langgraph",
    "langchain",
    "langchain-core",
    "pydantic",
    "tenacity",
    "hydra-core",
    "llama-cpp-python",
    "langchain-openai",
)


def run_dir_name(cfg: Config) -> str:
    """``memory-v1-temp-0.7-max-tokens-256`` (a sweep names each cell's folder
    itself, through ``run_name``)."""
    return f"memory-v{cfg.version}-temp-{cfg.llm.temperature}-max-tokens-{cfg.llm.max_tokens}"


class DiskFullError(RuntimeError):
    """The disk (or quota) filled while a run wrote ``path``; the message is one line."""

    def __init__(self, run_dir: Path | None, exc: OSError) -> None:
        then = f"resume with: python -m harness.resume {run_dir}" if run_dir else "run again"
        super().__init__(f"{exc.filename or 'a run file'}: no space left on device; free some, then {then}")


def disk_full(exc: BaseException) -> TypeGuard[OSError]:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


@contextmanager
def full_disk_in_one_line(run_dir: Path | None) -> Iterator[None]:
    """A full disk inside the block becomes ``DiskFullError``; other errors pass unchanged."""
    try:
        yield
    except OSError as exc:
        if not disk_full(exc):
            raise
        raise DiskFullError(run_dir, exc) from exc


def create_run_dir(root: Path, base: str, fill: Callable[[Path], None] | None = None) -> Path:
    """Claim ``root/base``, or ``base-2``, ``base-3``... whichever is free first.

    ``fill`` writes the folder's first files (its config) before it is
    claimed: a kill at any instant leaves either no folder or one that holds
    them, never a folder that no resume can read. A kill mid-fill leaves a
    hidden ``.<base>.*.new`` folder, which holds no manifest and so is no run.
    """
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{base}.", suffix=".new"))
    try:
        # never empty: rename(2) replaces an empty folder, which could be another claimant's
        (staging / ".lock").touch()
        if fill is not None:
            staged = _STAGING.set(staging)
            try:
                fill(staging)
            finally:
                _STAGING.reset(staged)
            fsync_dir(staging)  # the names of the files ``fill`` wrote, once for all of them
        for n in count(1):
            path = root / (base if n == 1 else f"{base}-{n}")
            if path.exists():
                continue
            try:
                os.rename(staging, path)
            except OSError as exc:
                if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):  # claimed since the check
                    continue
                raise
            fsync_dir(root)
            return path
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    raise AssertionError("unreachable")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        with syncing():
            os.fsync(fd)
    finally:
        os.close(fd)


# The staging folder ``create_run_dir`` is filling in this context: no reader sees it
# before it is claimed, so a file written there needs no temp file and rename of its own.
_STAGING: ContextVar[Path | None] = ContextVar("drift_staging", default=None)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so a reader sees the old or the new file, never half."""
    if path.parent == _STAGING.get():
        _write_staged(path, text)
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        _write_synced(fd, text)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):  # named, so the one-line error can say which file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    fsync_dir(path.parent)


def _write_staged(path: Path, text: str) -> None:
    """``path`` in a staging folder, fsynced; the folder is fsynced before it is claimed."""
    try:
        _write_synced(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), text)  # mkstemp's mode
    except OSError as exc:  # named, so the one-line error can say which file
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def _write_synced(fd: int, text: str) -> None:
    """``text`` to ``fd``, fsynced, then closed: through an unbuffered file, not a text
    file over the fd, which took three more calls a file (a tty check, two seeks)."""
    with io.FileIO(fd, "w") as fh:
        data = memoryview(text.encode())
        while data:  # a write that stops short: the next says why (a full disk), as a flush did
            data = data[fh.write(data) :]
        with syncing():
            os.fsync(fd)


# libyaml's emitter when PyYAML has it: the pure-Python one took ~4 ms of each cell's start
# (the same YAML but for how a long quoted string with a newline is folded; it reads back equal)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_config(run_dir: Path, raw: dict[str, Any]) -> None:
    write_atomic(run_dir / "config.yaml", _config_yaml(redact(raw)))


# Each top-level key's YAML, by what it holds: a sweep's cells share most sections, and
# dumping them took ~1 ms a cell. A block mapping's YAML is its keys' YAML in turn (no
# state crosses from one key to the next), and ``redact`` copies every dict and list,
# so no object recurs and no anchor ties two keys together.
_SECTIONS: dict[str, str] = {}


def _config_yaml(data: dict[str, Any]) -> str:
    """``yaml.dump(data, sort_keys=False)``, each key's text made once a process."""
    if not data:
        return yaml.dump(data, Dumper=_DUMPER, sort_keys=False)
    texts = []
    for key, value in data.items():
        held = repr((key, value))  # types and order too: 1 and 1.0, True and 1, a list and a tuple differ
        if (text := _SECTIONS.get(held)) is None:
            if len(_SECTIONS) >= 256:  # bounded: each cell's own values (seed, run_name) are new
                _SECTIONS.clear()
            text = _SECTIONS[held] = yaml.dump({key: value}, Dumper=_DUMPER, sort_keys=False)
        texts.append(text)
    return "".join(texts)


def write_manifest(run_dir: Path, manifest: RunManifest) -> None:
    write_atomic(run_dir / "manifest.json", manifest.model_dump_json(indent=2))


_JSON_OBJECT = TypeAdapter(dict[str, Any])


class RunFolderError(ConfigError):
    """One of a run folder's own files (``manifest.json``, ``config.yaml``,
    ``fingerprint.json``) cannot be read; the message is one line naming it.
    A ``ConfigError``, so every command that says a bad config in one line says this too."""


class FolderVersionError(RunFolderError):
    """A run folder of a version this harness does not read; the message is one line."""


def read_manifest(run_dir: Path) -> RunManifest:
    """``run_dir``'s manifest: every reader's one parse point, where a folder
    of another version is refused before anything reads (or writes) it. A file
    that does not parse is a ``RunFolderError`` naming it and its first bad
    field, never pydantic's page (a notebook calls this directly)."""
    path = run_dir / "manifest.json"
    try:
        data = _JSON_OBJECT.validate_json(path.read_bytes())  # bytes: bad UTF-8 is a JSON error too
    except ValidationError as exc:
        raise RunFolderError(f"{path}: unreadable: {_gist(exc)}") from None
    version = data.get("folder_version", 0)
    if version == 0:  # no upgrade exists: its layout and seat sides were never recorded
        raise FolderVersionError(
            f"{path}: run-folder version 0 (made before run folders were versioned); "
            f"this harness reads version {FOLDER_VERSION} only; run it again"
        )
    if isinstance(version, int) and version > FOLDER_VERSION:
        raise FolderVersionError(
            f"{path}: run-folder version {version}; this harness reads version {FOLDER_VERSION}; "
            "update the harness to read it"
        )
    try:
        return RunManifest.model_validate(data)
    except ValidationError as exc:
        raise RunFolderError(f"{path}: unreadable: {_gist(exc)}") from None


def _gist(exc: ValidationError) -> str:
    """Pydantic's report in a few words: the JSON error, or the first field at fault."""
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        gist = f"not valid JSON ({first['msg'].removeprefix('Invalid JSON: ')})"
    else:
        gist = f"{'.'.join(map(str, first['loc'])) or 'the file'}: {first['msg']}"
    return gist + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")


def package_versions() -> dict[str, str]:
    return dict(_package_versions())


@functools.cache  # once a process: what is imported cannot change under it
def _package_versions() -> tuple[tuple[str, str], ...]:
    out = []
    for name in PACKAGES:
        try:
            out.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(out)


@functools.cache  # once a process (a subprocess a cell cost 15 ms): the code it runs is loaded
def git_commit() -> str | None:
    """The harness checkout's commit, if it is a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class RunInUseError(RuntimeError):
    """Another process holds this run folder (a run or resume in flight)."""


class RunLock:
    """An exclusive ``flock`` on ``<run_dir>/.lock`` for the life of a run, so
    two processes never append to one run folder. The OS drops it if the
    process dies, so a ``kill -9`` never leaves a stale lock. ``shared``: a
    reader's lock (a fork reading its parent), which readers hold together
    and no run may hold beside."""

    def __init__(self, run_dir: Path, *, shared: bool = False) -> None:
        self.path = run_dir / ".lock"
        self.fd: int | None = None
        self.shared = shared

    def __enter__(self) -> RunLock:
        import fcntl

        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise RunInUseError(f"{self.path.parent}: in use by another process") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

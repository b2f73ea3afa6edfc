"""A fork's shared prefix: its parent's logs up to the fork round.

A fork's rounds 1..k are its parent's, copied byte for byte up to the
positions the parent's snapshot at round k names (never past them: records
after a snapshot belong to a round the fork runs itself). ``copy_prefix``
copies them and hashes what it copied; ``prefix_sha256`` hashes the same
bytes of any folder, so ``verify`` can check a fork against itself and
against its parent while the parent is there. The hash covers each log of the
layout in file order: its name, its length and its bytes.

The prefix's model calls were paid by the parent: ``own_start`` says where a
fork's own records begin, so its ledger counts only its own calls.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from harness.store.records import LogPosition, RunLayout, RunManifest
from harness.store.snapshot import read_snapshot, snapshot_path

_CHUNK = 1 << 20


def _chunks(path: Path, length: int) -> list[bytes] | None:
    """The first ``length`` bytes of ``path``, in chunks; None if it is shorter."""
    if not path.is_file() or os.path.getsize(path) < length:
        return None
    out, left = [], length
    with open(path, "rb") as fh:
        while left:
            chunk = fh.read(min(_CHUNK, left))
            out.append(chunk)
            left -= len(chunk)
    return out


def _header(name: str, offset: int) -> bytes:
    return f"{name}\0{offset}\0".encode()


def prefix_sha256(run_dir: Path, layout: RunLayout, positions: dict[str, LogPosition]) -> str | None:
    """The prefix's hash over ``run_dir``'s logs up to ``positions``; None if a log is shorter."""
    digest = hashlib.sha256()
    for name in layout.files():
        offset = positions[name].offset if name in positions else 0
        chunks = _chunks(run_dir / name, offset)
        if chunks is None:
            return None
        digest.update(_header(name, offset))
        for chunk in chunks:
            digest.update(chunk)
    return digest.hexdigest()


def copy_prefix(src: Path, dst: Path, layout: RunLayout, positions: dict[str, LogPosition]) -> str:
    """Copy each log of ``src`` up to ``positions`` into ``dst`` (synced); the prefix's hash."""
    digest = hashlib.sha256()
    for name in layout.files():
        offset = positions[name].offset if name in positions else 0
        chunks = _chunks(src / name, offset)
        if chunks is None:
            raise ValueError(f"{src / name}: shorter than its snapshot says ({offset} bytes)")
        digest.update(_header(name, offset))
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        with open(dst / name, "wb") as out:
            for chunk in chunks:
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
    return digest.hexdigest()


def own_start(run_dir: Path, manifest: RunManifest) -> dict[str, LogPosition]:
    """Where a fork's own records begin in each log (empty for a run that is no fork):
    the positions of its copied snapshot at the fork round."""
    if manifest.lineage is None:
        return {}
    path = snapshot_path(run_dir, manifest.lineage.at_round)
    return read_snapshot(path).logs if path.is_file() else {}


def check_lineage(run_dir: Path, manifest: RunManifest) -> tuple[list[str], list[str]]:
    """(violations, notes): a fork's prefix against its lineage's hash, in the
    fork and in its parent; a parent that is gone is a note, not a violation."""
    lineage = manifest.lineage
    if lineage is None:
        return [], []
    path = snapshot_path(run_dir, lineage.at_round)
    if not path.is_file():
        return [f"manifest.json: a fork at round {lineage.at_round} but snapshots/{path.name} is missing"], []
    positions = read_snapshot(path).logs
    problems, notes = [], []
    if prefix_sha256(run_dir, manifest.layout, positions) != lineage.prefix_sha256:
        problems.append(f"lineage: the shared prefix (rounds 1..{lineage.at_round}) differs from its hash")
    parent = Path(lineage.parent)
    if not (parent / "manifest.json").is_file():
        notes.append(f"lineage: parent {parent} is not there; the prefix was checked against its hash only")
    elif prefix_sha256(parent, manifest.layout, positions) != lineage.prefix_sha256:
        problems.append(f"lineage: the parent {parent} no longer holds the prefix this fork copied")
    return problems, notes

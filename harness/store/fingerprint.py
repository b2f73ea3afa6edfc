"""Run fingerprints: what must not change between a run and its continuation.

THE RESUME CONTRACT. A run folder's ``fingerprint.json`` records what the run
computes, in parts: ``config`` (the resolved config), ``format`` (its name),
``prompts`` (the code that builds its prompts, per definition), ``models``
(each role's model spec), ``model_files`` (the sha256 of each local model
file) and ``prices`` (each priced model's price entry). A resume (or an
extension) must match every part, key by key, or pass ``--force``, which the
manifest's history (``resume_forced``) and the ``resume`` event record.

What may change in a continuation, because it changes how far a run goes or
how it reaches its providers, never what a request asks:

- ``MUTABLE_KEYS``: the run's length and budget, where it is kept and shown,
  the seat a person plays, the prices files (their entries are the ``prices``
  part), tracing;
- ``MODEL_TRANSPORT_KEYS`` and ``SEARCH_TRANSPORT_KEYS``: concurrency, rate
  limits, timeouts, the search cache; ``format.fan_out`` (whether a step's
  independent calls go out together); ``memory.fsync`` (when log lines
  reach the disk);
- the sections of ``OPTIONAL_SECTIONS`` a format does not read, and the
  ``probes`` section of a run that asks no probe;
- ``interviews.rounds`` of an interviewed run: checkpoint interviews are
  asked beside the debate, never in it, so when they are asked changes
  nothing the debate computes (a run extended with ``rounds=N`` may
  interview its new rounds). Whether a run is interviewed at all, its
  questionnaire and the interview code may not change: each answer is read
  against the seat's first answer to the same item, asked the same way, and
  the run's layout declares its seats' interview logs from the start;
- a secret (``***REDACTED***`` in ``config.yaml``): given again on resume;
- a key added to the config after the run was made, at a default that does
  what the run did (the forward rule of ``differences``).

A resume given one of these that says how the run goes on (``continuation_key``:
not where it lives, what it is called or how one command shows it) writes it
into ``config.yaml`` before a round runs under it, so a plain resume after a
kill goes on under it too.

Everything else may not: any other config key, a model or its file, a
price, and a prompt. The ``prompts`` part is ``{definition: sha256}`` over
the top-level definitions of the format's prompt modules (``definitions``),
so an edit names the definition (``prompts.PersonaAgent: 'ab…' -> 'cd…'``),
while comments, formatting, imports, function docstrings and moving a
definition between those modules change nothing. The engine gathers the
parts (``harness.engine.fingerprint``); this module hashes, stores and
compares them.

THE FORK CONTRACT. A fork (``harness.engine.forking``) is not a
continuation: it is a new run whose rounds 1..k are its parent's, and whose
own ``fingerprint.json`` is made from its own config, the parent's
``config.yaml`` with only the fork's overrides applied. So it may change far
more than a resume: any key that makes sense mid-run (the critic, a
temperature, a seat's model or persona (``personas.<seat>``: the planted
switch of ``analysis.calibrate``), the memory window, the seed of the
continuation, the rounds), with a new price or prompt code too. What it may
not change is what the shared prefix was made of:

- ``FORK_FIXED_GROUPS``: the format and the experiment preset, as groups;
- ``FORK_FIXED_KEYS``: the format's options (its seats among them), the
  topic (the motion the prefix argued) and the control condition;
- the run's layout (``RunLayout``: the format, each seat's name, role, side
  and logs, the public logs), whatever key would change it.

The ``fork`` section itself is kept out of every fingerprint
(``MUTABLE_KEYS``): the manifest's ``lineage`` records it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any

from harness.schema import REDACTED, Config
from harness.store.rundir import write_atomic

# Keys that may differ on resume without changing what the run computes.
# ``chat`` names the seat a person plays; the seat's spec (human:you) is fingerprinted.
# ``budget`` only limits how far a run goes (raised on resume to continue one).
# ``prices`` is fingerprinted as the entries of the run's models (a ``prices`` part), not as paths.
MUTABLE_KEYS = (
    "rounds",
    "runs_root",
    "progress",
    "resume",
    "experiment_name",
    "run_name",
    "chat",
    "budget",
    "prices",
    "tracing",  # where a run's spans go, not what it computes
    "fork",  # where a fork came from: its manifest's lineage records it
)
# A fork may not change these (THE FORK CONTRACT above): group choices, and
# keys (with everything under them) the prefix was made with.
FORK_FIXED_GROUPS = ("format", "experiment")
FORK_FIXED_KEYS = ("format", "topic", "control")
# Sections some formats read (``Format.sections``); a format that does not
# read one computes the same whatever it holds, so its fingerprint leaves it out.
OPTIONAL_SECTIONS = ("search",)
# How a search reaches its collection, not what it finds: free to change on resume.
SEARCH_TRANSPORT_KEYS = ("transport", "timeout_s", "cache_dir")
# How fast calls reach a provider, not what they ask: free to change on resume.
MODEL_TRANSPORT_KEYS = ("concurrency", "max_concurrency", "rpm", "tpm")
# Format keys on how calls go out, not what they ask (``harness.runtime.fanout``).
FORMAT_TRANSPORT_KEYS = ("fan_out",)
# When the logs reach the disk, not what they hold.
MEMORY_TRANSPORT_KEYS = ("fsync",)
# Keys within sections that may change in a continuation, by section (interviews: of an
# interviewed run; the engine's ``components`` leaves each out of the fingerprint).
CONTINUATION_SECTION_KEYS = {
    "model": MODEL_TRANSPORT_KEYS,
    "search": SEARCH_TRANSPORT_KEYS,
    "format": FORMAT_TRANSPORT_KEYS,
    "memory": MEMORY_TRANSPORT_KEYS,
    "interviews": ("rounds",),
}
# Of ``MUTABLE_KEYS``, those saying where a run lives, what it is called and how this
# command shows it, not how it goes on: a resume never moves, renames or records them.
PLACE_KEYS = ("runs_root", "run_name", "experiment_name", "resume", "fork", "progress")


def continuation_key(key: str) -> bool:
    """Whether a resume given dotted ``key`` writes it into ``config.yaml``: it may
    change in a continuation (the contract above) and says how the run goes on
    (its length, budget, prices, transport, interviews, tracing, chat)."""
    top, _, rest = key.partition(".")
    if top in MUTABLE_KEYS:
        return top not in PLACE_KEYS
    return rest.partition(".")[0] in CONTINUATION_SECTION_KEYS.get(top, ())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def module_file(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ValueError(f"Format.prompt_modules: no module {name!r}")
    return Path(spec.origin)


def read_source(path: Path) -> str:
    """A module's source, read through its fd: ``read_text`` took ten calls a file
    (a tty check, seeks, stats), and a cell reads every prompt module."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    # as read_text read it: universal newlines (a string literal's CRLF hashes as LF)
    return b"".join(chunks).decode().replace("\r\n", "\n").replace("\r", "\n")


_PARSING = threading.Lock()  # cells starting together parse each module once, not once apiece


def prompt_digests(modules: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``{definition name: sha256}`` over the top-level definitions of ``modules``;
    a name two modules define hashes the sorted pair, so which holds which is no change."""
    found: dict[str, list[str]] = {}
    for name in modules:
        source = read_source(module_file(name))
        with _PARSING:
            digests = definitions(source)
        for key, sha in digests.items():
            found.setdefault(key, []).append(sha)
    return {
        key: shas[0] if len(shas) == 1 else sha256(" ".join(sorted(shas)).encode())
        for key, shas in found.items()
    }


@functools.lru_cache(maxsize=64)
def definitions(source: str) -> dict[str, str]:
    """Each top-level definition of a module's ``source`` by name, as the sha256
    of its code normalised by ``ast.unparse``: no comments or formatting, and
    no function docstrings. Class docstrings stay: pydantic makes a reply
    class's docstring its schema's description, which the model is shown.
    Imports and ``__all__`` only say where a name lives, so they are left out."""
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        if _where_names_live(node) or _is_text(node):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef) and _is_text(inner.body[0]):
                inner.body = inner.body[1:] or [ast.Pass()]
        code = ast.unparse(node)
        key = _name(node) or f"<{type(node).__name__.lower()} {sha256(code.encode())[:12]}>"
        out[key] = sha256(f"{out.get(key, '')}{code}".encode())  # a name bound twice: both
    return out


def _name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name
    if isinstance(node, ast.Assign):
        return ",".join(ast.unparse(target) for target in node.targets)
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return ast.unparse(node.target)
    return None  # another statement (an ``if``, a call): named by its code's hash


def _where_names_live(node: ast.stmt) -> bool:
    """An import, ``__all__``, or an ``if TYPE_CHECKING:`` block of imports."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        return True
    if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
        return all(isinstance(inner, ast.Import | ast.ImportFrom) for inner in node.body + node.orelse)
    return _name(node) == "__all__"


def _is_text(node: ast.stmt) -> bool:
    """A bare string: a docstring, or a string standing as a comment."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def digest(parts: dict[str, Any]) -> str:
    return sha256(json.dumps(parts, sort_keys=True, default=str).encode())


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level of dotted keys: ``{"llm": {"temperature": 0.7}}`` -> ``llm.temperature``."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def _defaults() -> dict[str, Any]:
    """Every config key at its default, flattened as ``config.<key>``."""
    return flatten({"config": dataclasses.asdict(Config())})


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable ``key: old -> new`` lines for every part that changed.

    Two forward rules, for what a run cannot have recorded: a config key the
    run's fingerprint lacks, now at its default, is no change (a key added to
    the config later, at a default that does what runs did before it); and a
    secret redacted in one and given again in the other is none either."""
    flat_old, flat_new, defaults = flatten(old), flatten(new), _defaults()
    lines = []
    for key in sorted(set(flat_old) | set(flat_new)):
        before, after = flat_old.get(key, "<absent>"), flat_new.get(key, "<absent>")
        if before == "<absent>" and key in defaults and after == defaults[key]:
            continue
        # a key given on the command line at the start and read from the
        # environment on resume: redacted either way, and no change to the run
        if before in (REDACTED, None) and after in (REDACTED, None):
            continue
        if before != after:
            lines.append(f"{key}: {before!r} -> {after!r}")
    return lines


def write_fingerprint(run_dir: Path, parts: dict[str, Any]) -> None:
    payload = {"digest": digest(parts), "parts": parts}
    write_atomic(run_dir / "fingerprint.json", json.dumps(payload, indent=1, sort_keys=True))


def read_fingerprint(run_dir: Path) -> dict[str, Any]:
    parts: dict[str, Any] = json.loads((run_dir / "fingerprint.json").read_text())["parts"]
    return parts

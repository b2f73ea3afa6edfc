"""Command-line errors in one line: unknown group options, Hydra's own
composition errors, the ``error: ...`` format every entry point uses, and
the one map from an exception to a command's exit status."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Any, NoReturn, TextIO

from harness.cli.console import say
from harness.paths import conf_dir
from harness.plugins import conf_search_paths

_GROUP_CHOICE = re.compile(r"^\+{0,2}([a-z_]+)=([A-Za-z0-9_.,\-]+)$")

BAD_INPUT = 2  # a config, a path or a command line the command cannot work with
FAILED = 1  # the command ran, and what it checked or ran failed
INTERRUPTED = 130  # Ctrl-C: what it ran is resumable
# A run a budget stopped: resumable like an interrupted one, but not a Ctrl-C,
# so a sweep goes on with its other cells (EX_TEMPFAIL: try again later).
BUDGET_STOPPED = 75

# Every command's exit status for what it catches: bad input 2 (a config, a
# path, a folder in use, an unreadable store); a run that failed for good
# (resumable once the cause is fixed) or a full disk 1; Ctrl-C 130. Keyed by
# the class's dotted name and matched along the exception's MRO, most
# specific first, so no command imports the engine just to name its errors.
EXIT_CODES: dict[str, int] = {
    "builtins.KeyboardInterrupt": INTERRUPTED,
    "harness.runtime.context.ModelCallError": FAILED,
    "harness.store.rundir.DiskFullError": FAILED,
    "harness.engine.resuming.ResumeError": BAD_INPUT,
    "harness.store.rundir.RunInUseError": BAD_INPUT,
    "harness.store.sql.StoreError": BAD_INPUT,
    "harness.store.memory.CorruptLogError": BAD_INPUT,  # a log edited mid-file: the folder, not the run
    "sqlite3.DatabaseError": BAD_INPUT,
    "builtins.ValueError": BAD_INPUT,  # ConfigError, ModelConfigError, PlanError, CollectionError, SearchError
    "builtins.OSError": BAD_INPUT,
}


def exit_code(exc: BaseException) -> int:
    """The exit status for ``exc`` (``EXIT_CODES``); 1, as Python's own, for anything else."""
    for cls in type(exc).__mro__:
        if (code := EXIT_CODES.get(f"{cls.__module__}.{cls.__qualname__}")) is not None:
            return code
    return FAILED


def fail(message: str, code: int) -> NoReturn:
    say(f"error: {message}", sys.stderr)
    sys.exit(code)


def config_dirs(argv: list[str]) -> list[Path] | None:
    """The folders Hydra will search for group options: the user's
    ``--config-dir`` / ``-cd`` and ``hydra.searchpath=[file://...]`` ones,
    installed formats' (``harness.plugins``), then the shipped one; None when a ``pkg://`` entry makes it unknowable here."""
    dirs = []
    entries = [path for _, path in conf_search_paths()]  # installed formats' config folders
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in ("--config-dir", "-cd"):
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            dirs.append(Path(value))
        elif flag.lstrip("+") == "hydra.searchpath":
            entries += [entry.strip().strip("'\"") for entry in value.strip("[]").split(",")]
    for entry in entries:
        if entry.startswith("pkg://"):
            return None
        if entry:
            dirs.append(Path(entry.removeprefix("file://")))
    return [*dirs, conf_dir()]


def check_group_choices(argv: list[str]) -> None:
    """Reject ``model=nope`` in one line, before Hydra prints a page about it."""
    dirs = config_dirs(argv)
    if dirs is None:  # Hydra still says it, in one line through ``one_line``
        return
    for arg in argv:
        match = _GROUP_CHOICE.match(arg)
        if not match or not any((d / match.group(1)).is_dir() for d in dirs):
            continue
        group = match.group(1)
        known = sorted({p.stem for d in dirs for p in (d / group).glob("*.yaml")})
        for option in match.group(2).split(","):
            if option != "null" and option not in known:
                fail(f"{group}={option}: no such option (known: {', '.join(known)})", BAD_INPUT)


def quote_text_values(argv: list[str]) -> list[str]:
    """``topic.text=Job's suffering is deserved``, as a shell hands it over
    from ``topic.text="Job's suffering is deserved"``, quoted for Hydra,
    whose override grammar stops at a bare quote mark. Values Hydra quotes,
    lists and sweeps of its own are left as they are."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        bare_quote = ("'" in value or '"' in value) and value[:1] not in ("'", '"', "[", "{")
        if eq and key and not key.startswith("-") and bare_quote:
            arg = f"{key}='" + value.replace("'", "\\'") + "'"
        out.append(arg)
    return out


class HeldStderr(io.StringIO):
    """Hydra reports a bad override as a page of text before ``main`` runs;
    ``cli`` holds stderr until ``main`` starts, so it can say it in one line."""

    def __init__(self, real: TextIO) -> None:
        super().__init__()
        self.real = real

    def release(self) -> str:
        sys.stderr = self.real
        return self.getvalue()


# Hydra's flags that take their value as the next word (``--config-dir DIR``)
VALUED_FLAGS = frozenset(
    ("-cd", "--config-dir", "-cn", "--config-name", "-cp", "--config-path", "-c", "--cfg", "-p", "--package")
)


def flags_first(argv: list[str]) -> list[str]:
    """Hydra's flags (``-m``, ``--config-dir DIR``) before the overrides, each in its order:
    Hydra's parser takes the overrides as one run of words, so ``experiment=debug -m
    rounds=1,2`` was refused with the first line of its usage alone, naming nothing."""
    flags: list[str] = []
    overrides: list[str] = []
    valued = False  # the word before was a flag whose value this word is
    for word in argv:
        if valued or (word.startswith("-") and word != "--force"):  # --force: refused below
            flags.append(word)
            valued = not valued and word in VALUED_FLAGS
        else:
            overrides.append(word)
    return flags + overrides


def release_stderr() -> None:
    if isinstance(sys.stderr, HeldStderr):
        sys.stderr.real.write(sys.stderr.release())


# Hydra's refusal of ``a.b=1`` for a key the config has no place for; the
# ``+a.b=1`` it recommends the schema refuses in turn, so its line is ours
_NOT_IN_STRUCT = re.compile(r"Could not override '([^']+)'")


def no_such_key(key: str, value: str, argv: list[str] | None = None) -> str | None:
    """The one line for ``key=value``, a key the config has no place for: for a
    format's option, role or seat, the line ``+key=value`` gets (``harness.formats``'
    ``option_error``, ``entry_error``); for a section's, one naming the keys it
    holds; None where ``+key`` is the fix (a mapping of any keys, ``hydra.*``)."""
    # late: only a bad command line needs the formats
    from harness.formats import entry_error, get_format, option_error
    from harness.formats.base import FormatOptions
    from harness.schema import Config, ConfigError, keys_at

    if key.startswith(("format.", "roles.", "personas.")):
        argv = sys.argv[1:] if argv is None else argv
        try:  # the format the command line picks (a sweep's first), a fork's parent's, else the default
            fmt = get_format(chosen_format(argv) or parent_format(argv) or FormatOptions().name)
        except ConfigError:
            fmt = None
        check = option_error if key.startswith("format.") else entry_error
        if fmt is not None and (line := check(fmt, key, value)) is not None:
            return line
    found = keys_at(Config, key.split("."))
    if found is None or key.startswith("hydra."):
        return None
    if found[0] == 0:
        return f"{key}: no such key in the config"
    parent = ".".join(key.split(".")[: found[0]])
    return f"{key}: no such key; {parent} holds: {', '.join(found[1])}"


def chosen_format(argv: list[str]) -> str | None:
    """The format ``format=<name>`` picks on ``argv`` (the last one given; of a sweep's list, the first)."""
    picks = [
        arg.partition("=")[2]
        for arg in argv
        if arg.partition("=")[0].lstrip("+~") in ("format", "format.name")
    ]
    return picks[-1].split(",")[0] if picks else None


def hydra_report(exc: BaseException) -> str:
    """What Hydra's command line prints of a composition error raised in-process (the
    plan's compose): the error, then its cause (``Key 'x' is not in struct``), which
    ``one_line`` needs to tell a key with no place from any other refusal."""
    causes = [exc]
    while (cause := causes[-1].__cause__) is not None and len(causes) < 5:
        causes.append(cause)
    return "\n".join(str(e) for e in causes)


def parent_format(argv: list[str]) -> str | None:
    """The format of the run ``fork.parent=<run>`` forks (of a grid's, the first): a fork
    keeps its parent's format, while Hydra composes its command line on the default's."""
    from harness.store.reader import read_config  # late: only a bad fork command line needs it

    parents = _parents(argv)
    if not parents or not parents[-1]:
        return None
    try:
        name = (read_config(Path(parents[-1].split(",")[0].strip("'\""))).get("format") or {}).get("name")
    except (OSError, ValueError):  # an unreadable parent: the fork says so itself
        return None
    return str(name) if name else None


def parent_keys_forced(argv: list[str]) -> list[str]:
    """A fork's overrides of keys its parent's config holds, forced (``++``): Hydra composes
    the command line over the default groups, which lack a key of the parent's format or
    model (a panel's ``roles.judge``), and refused ``roles.judge.temperature=0.2`` asking for
    ``+``; the fork copies each key onto the parent's config either way (``fork_config``)."""
    from harness.store.reader import read_config  # late: only a fork's command line needs it

    parents = _parents(argv)
    if not parents or not parents[-1]:
        return argv
    try:
        configs = [read_config(Path(p.strip("'\""))) for p in parents[-1].split(",")]
    except (OSError, ValueError):  # the fork says why, in its own line
        return argv
    out = []
    for arg in argv:
        key, eq, _ = arg.partition("=")
        plain = eq and "." in key and not arg.startswith(("+", "~", "-", "hydra"))
        held = plain and any(_holds(config, key.split(".")) for config in configs)
        out.append(f"++{arg}" if held else arg)
    return out


def _holds(config: Any, path: list[str]) -> bool:
    for part in path:
        if not isinstance(config, dict) or part not in config:
            return False
        config = config[part]
    return True


def _parents(argv: list[str]) -> list[str]:
    """The values of ``fork.parent=`` on the command line (the last is the one Hydra takes)."""
    return [arg.partition("=")[2] for arg in argv if arg.partition("=")[0].lstrip("+") == "fork.parent"]


def one_line(report: str, argv: list[str] | None = None) -> str:
    """The gist of Hydra's multi-line error report (``argv``: the command line it
    composed, by default ``sys.argv``'s)."""
    # our own one-line ConfigError, wrapped by Hydra (a resolver's, inside a callback warning)
    if (ours := re.search(r"ConfigError[^:]*?: (\S+: [^\n]+)", report)) is not None:
        return ours.group(1).strip()
    key = _NOT_IN_STRUCT.search(report)
    if key and "is not in struct" in report:
        value = re.search(rf"use \+{re.escape(key.group(1))}=(.*)", report)
        if (line := no_such_key(key.group(1), value.group(1) if value else "", argv)) is not None:
            return line
    noise = ("full_key:", "object_type=", "reference_type=", "Set the environment variable")
    lines = [ln.strip() for ln in report.splitlines() if ln.strip() and not ln.strip().startswith(noise)]
    return " ".join(lines[:3]) or "invalid command line"

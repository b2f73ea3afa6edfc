"""Every command in README.md and docs/*.md runs, or says why it is not run;
every relative link there points at a file that exists.

The convention (docs/testing.md, "Commands in the docs are tested"):

- each fenced ``bash`` block is run, in page order, in one empty folder per
  page, so a block can use what an earlier block of its page made;
- ``<!-- not run: <reason> -->`` on the line before the opening fence marks
  a whole block not run, and ``not run: <reason>`` in a line's own shell
  comment marks that line;
- ``<name>`` in a path (``research_runs/sweep-default-<time>``) is the newest
  path in the page's folder that matches it; ``$PWD`` is that folder;
- ``python -m <module>`` of the harness or the analysis runs in-process
  through the module's own ``main`` (``harness.run`` through its Hydra CLI
  entry point); shell syntax, other launchers than the basic one and the few
  programs of ``SHELL_PROGRAMS`` run in ``bash`` with ``.venv/bin`` first on
  PATH; anything else (``make``, ``pytest``, a debate on a real model) fails
  until it is marked not run;
- a ``harness.run`` or ``harness.chat`` command that is not run still has
  its config composed and validated.

Pages in ``SLOW_PAGES`` run under ``-m slow``; the rest take seconds.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from conftest import CONF_DIR, REPO, compose_cfg

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console", "zsh"}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
BLOCK_NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(.+?)\s*-->\s*$")
LINE_NOT_RUN = re.compile(r"\bnot run:\s*(.+?)\s*$")
PLACEHOLDER = re.compile(r"<[A-Za-z_][\w-]*>")
PLACEHOLDER_WORD = re.compile(r"[^\s'\"]*<[A-Za-z_][\w-]*>[^\s'\"]*")
PYTHON = {"python", "python3", ".venv/bin/python"}
# `python -m` modules run in-process, each through the main its __main__ runs
MODULES = {
    "harness.run": "harness.run:cli",
    "harness.resume": "harness.resume:main",
    "harness.verify": "harness.verify:main",
    "harness.export": "harness.export.__main__:main",
    "harness.store": "harness.store.__main__:main",
    "harness.sweep": "harness.sweep.commands:main",
    "harness.view": "harness.view.__main__:main",
    "harness.search": "harness.search.__main__:main",
    "harness.plan": "harness.plan.cli:main",
    "harness.fork": "harness.fork:main",
    "analysis": "analysis.__main__:main",
}
# other programs run in bash: cheap, and they write only inside the page's folder
SHELL_PROGRAMS = {"printf", "echo", "mkdir", "ls", "cat", "head", "tail", "sqlite3", "grep", "wc"}
SHELL_SYNTAX = set("|&;<>$`()")
# pages whose commands take longer than the normal suite allows (CPU seconds on 2 cores)
SLOW_PAGES = {
    "docs/sweeps.md": "20 s: a joblib sweep starts worker processes that each import the harness",
    "docs/formats.md": "21 s: 20 debates of five formats, an MCP search server, a topics sweep",
}
# Commands of pages this test does not own, marked here until the pages carry their
# own markers: (page, command) -> (why not run, whether its config can be checked).
SMOLLM2 = "runs SmolLM2 (minutes)"
PROBES = "python -m harness.run probes.enabled=true"
MARKED_HERE: dict[tuple[str, str], tuple[str, bool]] = {
    ("docs/decoding.md", "python -m harness.run model.grammar_mode=lazy model.prefix_cache=true"): (
        SMOLLM2,
        True,
    ),
    ("docs/probes.md", PROBES): (SMOLLM2, True),
    ("docs/probes.md", f"{PROBES} 'probes.use=[short_answer,ask_back,no_first_person]'"): (SMOLLM2, True),
    ("docs/probes.md", f"{PROBES} probes.catalog.short_answer.params.n=40"): (SMOLLM2, True),
    ("docs/probes.md", "python -m analysis research_runs/"): ("needs the SmolLM2 runs above", False),
}


@dataclass
class Block:
    page: str
    line: int
    lang: str
    body: list[tuple[int, str]] = field(default_factory=list)
    skip: str | None = None  # the not-run marker's reason


@dataclass
class Command:
    page: str
    line: int  # where the command starts in its page, 1-based
    text: str  # continuation lines joined, the comment stripped
    skip: str | None  # why it is not run; None: it runs

    def where(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced code block of a page, with the not-run marker before it, if any."""
    blocks: list[Block] = []
    current: Block | None = None
    fence, previous = "", ""  # previous: the last non-blank line outside a block
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        match = FENCE.match(line)
        if current is None:
            if match:
                fence = match.group(1)
                marker = BLOCK_NOT_RUN.match(previous)
                current = Block(rel(page), number, match.group(2).lower(), skip=marker and marker.group(1))
            elif line.strip():
                previous = line
        elif match and match.group(1).startswith(fence) and not match.group(2):
            blocks.append(current)
            current, previous = None, ""
        else:
            current.body.append((number, line))
    assert current is None, f"{rel(page)}:{current.line}: a code block is never closed"
    return blocks


def split_comment(line: str) -> tuple[str, str, bool]:
    """``code  # comment`` -> (code, comment, whether a quote is still open at the end);
    a ``#`` in quotes or inside a word is code."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip(), False
    return line.rstrip(), "", bool(quote)


def block_commands(block: Block) -> list[Command]:
    """A shell block's commands: ``\\`` continuations and quotes over several lines
    joined, blank and comment-only lines dropped."""
    out: list[Command] = []
    pending: list[str] = []
    start = 0
    for number, raw in block.body:
        if not pending:
            start = number
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1])
            continue
        code, comment, open_quote = split_comment(" ".join([*pending, raw]))
        if open_quote:
            pending.append(raw)
            continue
        pending = []
        if code.strip():
            marker = LINE_NOT_RUN.search(comment)
            skip = block.skip or (marker.group(1) if marker else None)
            text = " ".join(code.split())
            skip = skip or MARKED_HERE.get((block.page, text), (None,))[0]
            out.append(Command(block.page, start, text, skip))
    assert not pending, f"{block.page}:{start}: a line continues past the end of its block"
    return out


def page_commands(page: Path) -> list[Command]:
    return [c for b in fenced_blocks(page) if b.lang in SHELLS for c in block_commands(b)]


# --- what a command is --------------------------------------------------------------


class NotRunnable(AssertionError):
    """A command this test will not run: its page must mark it not run."""


def words(text: str) -> list[str]:
    """The shell words of the first simple command of ``text`` (up to ``|``, ``>``, ``&&``...)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    out = []
    for word in lexer:
        if word and set(word) <= set("();<>|&"):
            break
        out.append(word)
    return out


def python_module(tokens: list[str]) -> tuple[str, list[str]] | None:
    """``python -m module args...`` -> (module, args)."""
    if len(tokens) >= 3 and tokens[0] in PYTHON and tokens[1] == "-m":
        return tokens[2], tokens[3:]
    return None


def in_bash(text: str) -> bool:
    """Whether a runnable command goes to bash rather than in-process."""
    tokens = words(text)
    module = python_module(tokens)
    return (
        module is None
        or bool(SHELL_SYNTAX & set(text))
        or any(a.startswith("hydra/launcher=") for a in module[1])
    )


def check_runnable(command: Command) -> None:
    """Raise NotRunnable unless the test knows how to run this command (before any config check)."""
    tokens = words(command.text.replace("$PWD", "/x"))
    if not tokens:
        raise NotRunnable(f"{command.where()}: no command")
    module = python_module(tokens)
    if module is None and tokens[0] not in SHELL_PROGRAMS:
        raise NotRunnable(f"{command.where()}: {tokens[0]} is not a program this test runs; mark it not run")
    if module is not None and module[0] not in MODULES:
        raise NotRunnable(
            f"{command.where()}: python -m {module[0]} is not run by this test; mark it not run"
        )
    if module and module[0] == "analysis" and "--model" in module[1]:
        spec = module[1][module[1].index("--model") + 1]
        if not spec.startswith("scripted:"):
            raise NotRunnable(f"{command.where()}: runs {spec}; mark it not run")


# --- configs ------------------------------------------------------------------------


PRINT_ONLY_ARGS = {"--cfg", "-c", "--info", "-i", "--help", "-h", "--hydra-help"}  # Hydra runs nothing


def hydra_overrides(module: str, args: list[str]) -> tuple[list[str], bool]:
    """The Hydra overrides a ``harness.run`` / ``harness.chat`` command composes, and
    whether it is a sweep (``-m``)."""
    from harness.chat import overrides as chat_overrides
    from harness.cli.errors import quote_text_values
    from harness.sweep.launcher import launcher_overrides

    if module == "harness.chat":
        args = chat_overrides(args)
    args = launcher_overrides(args)  # sweep.concurrency=N, as harness.run's cli reads it
    out, sweep, skip_next = [], False, False
    for arg in args:
        if skip_next:
            skip_next = False
        elif arg in ("-m", "--multirun"):
            sweep = True
        elif arg in ("--cfg", "-c", "--package", "-p"):
            skip_next = True
        elif not arg.startswith("-"):
            out.append(arg)
    return quote_text_values(out), sweep


OTHER_CONFIGS = {"--config-dir", "-cd", "--config-name", "-cn", "--config-path", "-cp"}


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """A sweep's configs to check: its first cell, and one per other value of each swept
    key (a ``sweep=`` preset's grid included); ``hydra`` overrides left out."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    preset: list[str] = []
    for name in [o.split("=", 1)[1] for o in overrides if o.startswith("sweep=")]:
        grid = yaml.safe_load((CONF_DIR / "sweep" / f"{name}.yaml").read_text())
        preset += [f"{k}={v}" for k, v in grid.items() if "${" not in str(v)]
    values: dict[str, list[str]] = {}  # a later value of a key wins, as on Hydra's command line
    for override in OverridesParser.create().parse_overrides([*preset, *overrides]):
        key = override.get_key_element()
        if key.lstrip("+~").startswith("hydra"):
            continue
        if override.is_sweep_override():
            values[key] = list(override.sweep_string_iterator())
        else:
            values[key] = [override.get_value_element_as_str()]
    first = [f"{k}={v[0]}" for k, v in values.items()]
    variants = [first]
    for i, (key, vals) in enumerate(values.items()):
        variants += [[*first[:i], f"{key}={v}", *first[i + 1 :]] for v in vals[1:]]
    return variants


def checked_configs(module: str, args: list[str]) -> list[Any]:
    """Compose and validate the config(s) a ``harness.run`` / ``harness.chat`` command runs."""
    from harness.formats import validate

    overrides, sweep = hydra_overrides(module, args)
    if any(o.startswith("resume=") for o in overrides) or OTHER_CONFIGS & set(args):
        return []  # the run's own config.yaml decides, or configs outside conf/ do
    return [validate(compose_cfg(v)) for v in (sweep_variants(overrides) if sweep else [overrides])]


def real_models(configs: list[Any]) -> list[str]:
    """The model specs of these configs that are not the scripted model (nor a person)."""
    from harness.formats import get_format

    specs = {
        cfg.role_model(role)[0].spec
        for cfg in configs
        for role in get_format(cfg.format.name).model_roles(cfg)
    }
    return sorted(s for s in specs if not s.startswith(("scripted:", "human:")))


# --- running ------------------------------------------------------------------------


def resolve_placeholders(text: str, cwd: Path) -> str:
    """Each path holding ``<name>`` becomes the newest path under ``cwd`` that matches it."""

    def newest(match: re.Match[str]) -> str:
        word = match.group(0)
        pattern = PLACEHOLDER.sub("*", word).rstrip("/")
        found = sorted(cwd.glob(pattern), key=lambda p: p.stat().st_mtime)
        if not found:
            raise AssertionError(f"{word}: nothing in the page's folder matches {pattern}")
        return found[-1].relative_to(cwd).as_posix() + ("/" if word.endswith("/") else "")

    return PLACEHOLDER_WORD.sub(newest, text)


@functools.cache
def capture_file() -> IO[str]:
    """Where in-process commands write stdout and stderr: a real file, open until the
    interpreter exits (the MCP client hands its server the descriptor of the
    ``sys.stderr`` it was imported under)."""
    return tempfile.TemporaryFile("w+", encoding="utf-8")


@contextlib.contextmanager
def process_state(cwd: Path) -> Iterator[Callable[[], str]]:
    """Run in ``cwd`` with stdout and stderr captured; yields a function that returns
    what was written so far. cwd, argv, the streams and the environment are put back
    afterwards (commands replace them)."""
    saved = (os.getcwd(), list(sys.argv), sys.stdout, sys.stderr, dict(os.environ))
    out = capture_file()
    start = out.seek(0, os.SEEK_END)

    def written() -> str:
        out.flush()
        out.seek(start)
        text = out.read()
        out.seek(0, os.SEEK_END)
        return text

    os.chdir(cwd)
    sys.stdout = sys.stderr = out
    try:
        yield written
    finally:
        os.chdir(saved[0])
        sys.argv[:] = saved[1]
        sys.stdout, sys.stderr = saved[2], saved[3]
        os.environ.clear()
        os.environ.update(saved[4])


def entry_point(module: str) -> Callable[[list[str]], int | None]:
    target, name = MODULES[module].split(":")
    main = getattr(__import__(target, fromlist=[name]), name)
    if module != "harness.run":
        return main

    def hydra_cli(args: list[str]) -> None:  # harness.run's cli() reads sys.argv, as Hydra does
        sys.argv = ["harness.run", *args]
        main()

    return hydra_cli


def run_in_process(module: str, args: list[str], cwd: Path) -> tuple[int, str]:
    main = entry_point(module)
    with process_state(cwd) as written:
        try:
            code = main(args) or 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return int(code), written()


def run_in_bash(text: str, cwd: Path) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", text], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def run_command(command: Command, cwd: Path) -> None:
    """Run one command in ``cwd`` (or, for one marked not run, check its config only)."""
    debate = (python_module(words(command.text)) or ("",))[0] in ("harness.run", "harness.chat")
    if command.skip and (not debate or not MARKED_HERE.get((command.page, command.text), ("", True))[1]):
        return
    try:
        text = resolve_placeholders(command.text, cwd)
    except AssertionError:
        if command.skip:
            return  # resume=<dir>: nothing to check before the run exists
        raise
    text = text.replace("${PWD}", str(cwd)).replace("$PWD", str(cwd))
    module = python_module(words(text))
    if module and debate:
        args = module[1]
        if any(a.startswith("runs_root=") for a in args):  # keep every run folder in the page's folder
            assert not SHELL_SYNTAX & set(text), f"{command.where()}: runs_root= in a compound command"
            override = f"runs_root={cwd / 'research_runs'}"
            args, text = [*args, override], f"{text} {shlex.quote(override)}"
        with process_state(cwd):
            if command.skip:
                checked_configs(module[0], args)  # a not-run command's keys and values are real
                return
            try:
                configs = checked_configs(module[0], args)
            except Exception:  # a bad value the command itself must refuse: it runs, and says so
                configs = []
        if real_models(configs) and not PRINT_ONLY_ARGS & set(args):
            raise NotRunnable(f"{command.where()}: runs {', '.join(real_models(configs))}; mark it not run")
        module = (module[0], args)
    if command.skip:
        return
    check_runnable(command)
    if in_bash(text):
        code, output = run_in_bash(text, cwd)
    else:
        assert module is not None
        code, output = run_in_process(module[0], module[1], cwd)
    assert code == 0, f"{command.where()}\nexit {code}\n{output[-3000:]}"


# --- the tests ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def drift_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``DRIFT_HARNESS_CACHE`` for every page: the KJV index is built once."""
    return tmp_path_factory.mktemp("drift-cache")


def page_param(page: Path) -> Any:
    marks = [pytest.mark.slow] if rel(page) in SLOW_PAGES else []
    return pytest.param(page, id=rel(page), marks=marks)


@pytest.mark.parametrize("page", [page_param(p) for p in PAGES])
def test_page_commands_run(page: Path, tmp_path: Path, drift_cache: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Each command of the page, in order, in one folder: run, or marked not run (and,
    for a debate, its config checked)."""
    for key in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("DRIFT_HARNESS_CACHE", str(drift_cache))
    cwd = tmp_path / "page"
    cwd.mkdir()
    timings = []
    for command in page_commands(page):
        start = time.perf_counter()
        run_command(command, cwd)
        timings.append((time.perf_counter() - start, command.where()))
    for seconds, where in sorted(timings, reverse=True):
        print(f"{seconds:6.2f} s  {where}")


def test_every_command_is_runnable_or_marked() -> None:
    """Without running anything: each command not marked is one this test can run, so an
    unmarked ``make`` or ``pytest`` fails here, slow pages included."""
    problems, counted = [], {"run": 0, "not run": 0}
    unused = set(MARKED_HERE)
    for page in PAGES:
        for command in page_commands(page):
            unused.discard((command.page, command.text))
            counted["not run" if command.skip else "run"] += 1
            if not command.skip:
                try:
                    check_runnable(command)
                except NotRunnable as exc:
                    problems.append(str(exc))
    assert not problems, "\n".join(problems)
    assert not unused, f"MARKED_HERE names commands no page has: {sorted(unused)}"
    assert counted["run"] >= 40 and counted["not run"] >= 20, counted


def test_the_readme_opens_with_the_two_commands() -> None:
    first = fenced_blocks(REPO / "README.md")[0]
    assert [line.split()[:2] for _, line in first.body] == [["make", "run"], ["make", "test"]]
    assert first.skip


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def prose(page: Path) -> str:
    """A page's text without its fenced blocks and inline code spans."""
    lines, inside, fence = [], False, ""
    for line in page.read_text(encoding="utf-8").splitlines():
        match = FENCE.match(line)
        if match and not inside:
            inside, fence = True, match.group(1)
        elif match and match.group(1).startswith(fence) and not match.group(2):
            inside = False
        elif not inside:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(lines)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_relative_links_point_at_files(page: Path) -> None:
    text = prose(page)
    missing = []
    for target in [*LINK.findall(text), *REFERENCE.findall(text)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, mailto:, or an anchor in the page itself
        if not (page.parent / target.split("#", 1)[0]).exists():
            missing.append(target)
    assert not missing, f"{rel(page)}: links to missing files: {missing}"


def test_the_parser_reads_markers_continuations_and_placeholders(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro.\n\n<!-- not run: needs a key -->\n```bash\npython -m harness.run model=openai\n```\n\n"
        "```bash\n# a comment line\npython -m harness.view runs/   # a server; not run: runs until Ctrl-C\n"
        "python -m harness.run -m a=1,2 \\\n    b='x # y'   # both\n```\n```python\nprint(1)\n```\n"
    )
    blocks = fenced_blocks(page)
    assert [b.lang for b in blocks] == ["bash", "bash", "python"]
    found = [c for b in blocks[:2] for c in block_commands(b)]
    assert [(c.line, c.skip) for c in found] == [(5, "needs a key"), (10, "runs until Ctrl-C"), (11, None)]
    assert found[2].text == "python -m harness.run -m a=1,2 b='x # y'"
    with pytest.raises(NotRunnable):
        check_runnable(Command("p", 1, "make test", None))
    assert in_bash("python -m harness.run x=1 || echo no") and not in_bash("python -m harness.verify d")
    (tmp_path / "runs" / "sweep-default-1").mkdir(parents=True)
    time.sleep(0.02)
    (tmp_path / "runs" / "sweep-default-2").mkdir()
    assert resolve_placeholders("ls runs/sweep-default-<time>/", tmp_path) == "ls runs/sweep-default-2/"
    assert sweep_variants(["model=scripted", "llm.temperature=0.2,1.0", "hydra/launcher=joblib"]) == [
        ["model=scripted", "llm.temperature=0.2"],
        ["model=scripted", "llm.temperature=1.0"],
    ]
    smoke = sweep_variants(["sweep=smoke"])
    assert len(smoke) == 3 and all("model=scripted" in v for v in smoke)


def test_the_install_page_names_every_console_script() -> None:
    """docs/install.md's table of commands lacked drift-plan and drift-fork."""
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    table = (REPO / "docs" / "install.md").read_text(encoding="utf-8")
    missing = [name for name in scripts if f"| `{name}` |" not in table]
    assert not missing, f"docs/install.md's table of console scripts lacks {missing}"


def test_make_helps_count_of_what_long_0_skips_is_the_recipes() -> None:
    """``make help`` said LONG=0 skips "the four longest" while the recipe skips six scripts."""
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    skipped = re.search(
        r"case \$\$\(basename \$\$f\) in \\\n\s*([\w.|]+)\)\s*\\\n\s*\[ \"\$\(LONG\)\" = 0 \]", makefile
    )
    assert skipped is not None, "the bench recipe's LONG=0 case"
    words = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
    said = re.search(r"LONG=0 skips the (\w+) longest", makefile)
    assert said is not None and words.get(said.group(1)) == len(skipped.group(1).split("|")), (
        said and said.group(0),
        skipped.group(1),
    )

"""The config sections that stand on their own, and the error every check
raises: the topic (and the files it is read from), the search tool, the
behavioural probes, checkpoint interviews, prices, tracing and budgets. ``harness.schema`` holds the
rest, the ``Config`` root that gathers them, and re-exports every name here.

Each section's ``check()`` raises ``ConfigError`` with one line naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# a probe's name, a version, a run folder: one safe path component
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ConfigError(ValueError):
    """A bad config value. ``str()`` is one line naming the key at fault."""


def require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"{key}: {message}")


SEARCH_TRANSPORTS = ("mcp", "local")


@dataclass
class SearchConfig:
    """The search tool of grounded debates (``format=grounded``) and grounded
    fact-checks (``format=moderated format.fact_check=grounded``)."""

    # a built-in collection (kjv) or a folder of .txt, .md, .jsonl files; empty: none
    # (the formats that search require one: harness.formats.searching.check_collection)
    collection: str = ""
    k: int = 5  # passages per search
    transport: str = "mcp"  # mcp: the MCP server over stdio, one session per run; local: in-process
    timeout_s: float = 30.0  # one tool call's limit; past it the server is restarted and the call retried
    cache_dir: str | None = None  # BM25 index cache (default $DRIFT_HARNESS_CACHE or ~/.cache/drift-harness)

    def check(self) -> None:
        require(1 <= self.k <= 50, "search.k", f"must be in [1, 50], got {self.k}")
        require(
            self.transport in SEARCH_TRANSPORTS,
            "search.transport",
            f"must be one of {', '.join(SEARCH_TRANSPORTS)}, got {self.transport!r}",
        )
        require(self.timeout_s > 0, "search.timeout_s", f"must be > 0, got {self.timeout_s}")


@dataclass
class ProbeSpec:
    """One behavioural probe (``harness.probes``): an instruction the team's
    persona carries (``{param}`` fields are filled from ``params``), the
    question that tests it, and the checker that scores the reply."""

    instruction: str = ""
    question: str = ""
    checker: str = ""
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbesConfig:
    """Behavioural probes (docs/probes.md): off unless ``enabled``."""

    enabled: bool = False
    name: str = "none"  # the probe set (conf/probes/<name>.yaml)
    use: list[str] | None = None  # the probes a run carries, by name; null: every probe of the set
    catalog: dict[str, ProbeSpec] = field(default_factory=dict)

    def active(self) -> list[str]:
        return list(self.catalog) if self.use is None else list(self.use)

    def check(self) -> None:
        for name, spec in self.catalog.items():
            key = f"probes.catalog.{name}"
            require(bool(SAFE_NAME.match(name)), key, "a name of letters, digits, '.', '_' or '-'")
            require(bool(spec.instruction.strip()), f"{key}.instruction", "must not be empty")
            require(bool(spec.question.strip()), f"{key}.question", "must not be empty")
            # its checker and params are the probes' to check (harness.probes.catalog.check_specs)
        active = self.active()
        unknown = [n for n in active if n not in self.catalog]
        require(not unknown, "probes.use", f"no probe {unknown} in set {self.name!r}: {list(self.catalog)}")
        require(len(set(active)) == len(active), "probes.use", "names a probe twice")
        require(not self.enabled or bool(active), "probes.use", "probes.enabled=true with no probe to ask")


@dataclass
class InterviewItem:
    """One item of a checkpoint interview's questionnaire (``harness.probes.questionnaire``):
    the question a seat is asked, and the aspect of itself it asks about."""

    question: str = ""
    aspect: str = ""  # identity, values, stance, tone ...: how the analysis groups items


@dataclass
class InterviewsConfig:
    """Checkpoint interviews (docs/interviews.md): off while ``rounds`` is empty.
    ``questionnaire``: a YAML file whose ``items`` replace the shipped ones;
    ``load_file`` inlines them, so config.yaml keeps the items the run asked."""

    rounds: list[int] = field(default_factory=list)  # the rounds after which every seat is asked
    name: str = "none"  # the shipped questionnaire (conf/interviews/<name>.yaml)
    questionnaire: str | None = None
    items: dict[str, InterviewItem] = field(default_factory=dict)

    @property
    def on(self) -> bool:
        return bool(self.rounds)

    def load_file(self) -> None:
        if self.questionnaire is None:
            return
        key, path = "interviews.questionnaire", self.questionnaire
        try:
            data = yaml.safe_load(read_text(key, path))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{key}: {path} is not YAML: {str(exc).splitlines()[0]}") from None
        items = data.get("items") if isinstance(data, dict) else None
        require(isinstance(items, dict) and bool(items), key, f"{path} has no 'items' mapping")
        assert isinstance(items, dict)
        self.items = {}
        for name, spec in items.items():
            spec = {"question": spec} if isinstance(spec, str) else spec
            texts = isinstance(spec, dict) and all(isinstance(v, str) for v in spec.values())
            ok = texts and set(spec) <= {"question", "aspect"}
            require(ok, f"{key}: {path} items.{name}", "expected {question, aspect} (text) or a question")
            self.items[str(name)] = InterviewItem(**spec)
        self.name, self.questionnaire = Path(path).stem, None

    def check(self) -> None:
        for name, item in self.items.items():
            key = f"interviews.items.{name}"
            require(bool(SAFE_NAME.match(name)), key, "a name of letters, digits, '.', '_' or '-'")
            require(bool(item.question.strip()), f"{key}.question", "must not be empty")
        bad = [r for r in self.rounds if r < 1]
        require(not bad, "interviews.rounds", f"rounds count from 1, got {bad}")
        require(len(set(self.rounds)) == len(self.rounds), "interviews.rounds", "names a round twice")
        require(
            not self.on or bool(self.items), "interviews.rounds", "set, with no questionnaire item to ask"
        )


@dataclass
class TopicConfig:
    text: str | None = "Remote work is better for society than office work."
    generate: bool = False  # let the topic agent write the motion instead
    domain: str = "technology and society"
    framework: str | None = None  # the analysis framework and its criteria (panel)
    # read text / framework from a file instead; validate() inlines the file's
    # contents, so config.yaml keeps the text the run actually used
    text_file: str | None = None
    framework_file: str | None = None
    # batched topics: one motion per line of `file` (blank lines and # comments
    # skipped); `index` picks this run's, e.g. `-m topic.index=0,1,2`
    file: str | None = None
    index: int = 0

    def load_files(self) -> None:
        for key in ("text", "framework"):
            path = getattr(self, f"{key}_file")
            if path is None:
                continue
            setattr(self, key, read_text(f"topic.{key}_file", path))
            setattr(self, f"{key}_file", None)
        if self.file is not None:
            topics = read_topics(self.file)
            check_topic_index(self.file, len(topics), self.index)
            self.text, self.file = topics[self.index], None


def read_topics(path: str) -> list[str]:
    """The motions of a topics file: one per line, blank lines and # comments skipped."""
    lines = [ln.strip() for ln in read_text("topic.file", path).splitlines()]
    topics = [ln for ln in lines if ln and not ln.startswith("#")]
    require(bool(topics), "topic.file", f"{path} has no topics (one per line)")
    return topics


def check_topic_index(path: str, count: int, index: int) -> None:
    """``topic.index`` one of the ``count`` topics of ``path``."""
    require(
        0 <= index < count,
        "topic.index",
        f"must be in [0, {count}) for the {count} topics of {path}, got {index}",
    )


def read_text(key: str, path: str) -> str:
    """A text file's stripped contents; a one-line error naming ``key`` if it cannot be read or is empty."""
    try:
        content = Path(path).expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{key}: {path} is not UTF-8 text") from None
    require(bool(content), key, f"{path} is empty")
    return content


@dataclass
class PlantedPersona:
    """``personas.<seat>``: the seat's persona taken as given from round
    ``from_round`` on, in place of its persona agent's (recorded, with no
    model call, as a persona record whose decision is ``planted``): the
    planted switch a calibration forks in (``analysis.calibrate``). ``file``
    is read into ``text`` when the config is validated, so config.yaml keeps
    the text the run used."""

    text: str | None = None
    file: str | None = None
    from_round: int | None = None  # None: from round 1 (null, so a seat planting nothing sets no key)

    def load_file(self, key: str) -> None:
        if self.file is not None:
            require(self.text is None, f"{key}.file", f"give {key}.text or {key}.file, not both")
            self.text, self.file = read_text(f"{key}.file", self.file), None

    @property
    def planted(self) -> bool:
        return self.text is not None or self.file is not None

    def check(self, key: str) -> None:
        if not self.planted:
            return  # the seat's persona agent runs, as in every run before planting
        require(bool((self.text or "").strip()), f"{key}.text", f"is empty; set it or {key}.file")
        require(
            self.from_round is None or self.from_round >= 1,
            f"{key}.from_round",
            f"must be >= 1, got {self.from_round}",
        )


@dataclass
class PricesConfig:
    """Where dollars come from (harness.models.prices): the shipped table,
    then ``file`` (a YAML table of the same shape), then ``models`` entries."""

    file: str | None = None
    # {provider:model: {input, output, ...}}; null, not {}, so one override can set it whole
    models: dict[str, Any] | None = None


@dataclass
class TracingConfig:
    """OpenTelemetry traces of a run (harness.runtime.otel; docs/models.md, "Tracing")."""

    otel: bool = False  # send GenAI-convention spans to OTEL_EXPORTER_OTLP_ENDPOINT
    otel_content: bool = False  # add prompts and replies to the chat spans, as events


@dataclass
class BudgetConfig:
    """Spending limits; a run stops cleanly (``interrupted``, resumable) before
    the call that could cross one. ``sweep_*`` are shared by every cell of a
    sweep in flight in one process (``sweep.concurrency``)."""

    usd: float | None = None
    tokens: int | None = None
    sweep_usd: float | None = None
    sweep_tokens: int | None = None

    def check(self) -> None:
        for name in ("usd", "tokens", "sweep_usd", "sweep_tokens"):
            value = getattr(self, name)
            require(value is None or value > 0, f"budget.{name}", f"must be > 0 (or null: none), got {value}")

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.usd, self.tokens, self.sweep_usd, self.sweep_tokens))


@dataclass
class ForkConfig:
    """A fork (``python -m harness.fork``; docs/forks.md): a new run that starts
    from ``parent``'s snapshot at round ``at_round`` and goes on under the
    overrides given with it. Both null: the run is no fork."""

    parent: str | None = None  # the parent's run folder
    at_round: int | None = None  # its rounds 1..at_round are the fork's, unpaid

    def check(self) -> None:
        require(
            (self.parent is None) == (self.at_round is None),
            "fork.at_round" if self.parent else "fork.parent",
            "a fork needs both fork.parent and fork.at_round",
        )
        require(
            self.at_round is None or self.at_round >= 1,
            "fork.at_round",
            f"must be >= 1 (a fork starts after a round of its parent), got {self.at_round}",
        )

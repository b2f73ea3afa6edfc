"""The scripted model's field script: what it writes in a reply field is data,
a table of ``FieldRule``s, not a branch per format.

A rule names the fields it writes (by field name, optionally only for calls
of one ``role`` tag or one reply ``schema`` title, or when the field's enum
offers an ``option``), the stage of a value it writes (``on``: ``any`` field,
before its type is looked at; an ``enum``; a ``boolean``; a ``string``), and
what it emits:

- ``Fixed(value)``: that value; on an enum field only if it is an option,
  else the next rule (or a seeded choice) writes the field;
- ``Rate(hit, miss, rate)``: ``hit`` with chance ``rate`` (one draw from the
  reply's content stream), else ``miss``;
- ``Text(words)``: that many words in the seat's register, as sentences of
  at most ``SENTENCE_WORDS`` words;
- ``Derived(name)``: what the function registered under ``name``
  (``@deriver``) derives from the field and its prompt; it may return
  ``SKIP`` to leave the field to the next rule.

``Fixed`` and ``Rate`` may read their value or rate from a model setting
(``setting="synthesize_rate"``): the ``model.*`` keys of ``ModelConfig`` that
``build_model`` passes in. ``canary=True`` tags a written string with a
canary marker naming the team, field, round and iteration, so isolation
tests can prove it never reaches the other team.

The harness's own formats' rules are ``harness.models.scripted_rules.BUILTIN_RULES``.
A format defined elsewhere adds its own with ``register_rules`` (checked
before the built-in ones, so it may override them), and a model instance
takes rules of its own (``ScriptedModel(script=...)``), checked first.
"""

from __future__ import annotations

import enum
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from harness.models.scripted_style import Style, sentence, sentences

Stage = Literal["any", "enum", "boolean", "string"]
STAGES: tuple[Stage, ...] = ("any", "enum", "boolean", "string")


class _Skip(enum.Enum):
    SKIP = "skip"


SKIP = _Skip.SKIP  # a rule's "not mine": the next rule, or the default, writes the field


@dataclass(frozen=True)
class Fixed:
    value: Any = None
    setting: str | None = None  # the value is this model setting's (judge_winner)


@dataclass(frozen=True)
class Rate:
    hit: Any
    miss: Any
    rate: float = 0.5
    setting: str | None = None  # the rate is this model setting's (synthesize_rate)


@dataclass(frozen=True)
class Text:
    words: int = 12


@dataclass(frozen=True)
class Derived:
    derive: str  # a name registered with @deriver


Emit = Fixed | Rate | Text | Derived


@dataclass(frozen=True)
class FieldRule:
    name: str  # names the rule in errors and docs ("panel.judge_decision")
    fields: tuple[str, ...]
    emit: Emit
    on: Stage = "any"
    option: str | None = None  # only when the field's enum offers this option
    role: str | None = None  # only on calls tagged with this role
    schema: str | None = None  # only in a reply schema with this title (a Pydantic model's name)
    canary: bool = False


class Scripted(Protocol):
    """What a rule may read of the model it writes for (``ScriptedModel``)."""

    spec: str
    seed: int
    reject_first: int
    persona_switch_round: int | None

    @property
    def settings(self) -> Mapping[str, Any]: ...

    def switched(self, round_: int) -> bool: ...

    def persona_grade(self, round_: int) -> int: ...


@dataclass
class ReplyField:
    """One reply field as a rule sees it."""

    name: str
    prop: dict[str, Any]
    root: dict[str, Any]
    rng: random.Random  # the reply's content stream
    tags: dict[str, Any]  # the call's tags, with "prompt" (its last message), "system" and "style"
    model: Scripted

    @property
    def prompt(self) -> str:
        return str(self.tags.get("prompt", ""))

    @property
    def options(self) -> list[Any]:
        return list(self.prop.get("enum", []))

    def setting(self, key: str) -> Any:
        return self.model.settings[key]

    def sentence(self, words: int) -> str:
        """``words`` words in the seat's register, switched once a planted switch is due
        or the prompt shows a persona in the switched register."""
        style: Style | None = self.tags.get("style")
        switched = self.model.switched(self.tags.get("round", 0)) or "shown_switched" in self.tags
        return sentence(self.rng, self.tags.get("side"), words, switched, style)

    def sentences(self, words: int) -> str:
        """``sentence(words)`` as whole sentences, each ending with a period."""
        return sentences(self.sentence(words))


Deriver = Callable[[ReplyField], Any]
DERIVERS: dict[str, Deriver] = {}
PLUGIN_RULES: list[FieldRule] = []


def deriver(name: str) -> Callable[[Deriver], Deriver]:
    """Register a function deriving a field's value as ``Derived(name)``."""

    def register(fn: Deriver) -> Deriver:
        DERIVERS[name] = fn
        return fn

    return register


def register_rules(*rules: FieldRule) -> None:
    """Add a format's field rules for every scripted model built from now on."""
    PLUGIN_RULES.extend(r for r in rules if r not in PLUGIN_RULES)


class Script:
    """The rules one model writes by, indexed by (stage, field name), in order."""

    def __init__(self, rules: Iterable[FieldRule], settings: Mapping[str, Any]) -> None:
        self._rules: dict[tuple[str, str], list[FieldRule]] = defaultdict(list)
        for rule in rules:
            _check(rule, settings)
            for name in rule.fields:
                self._rules[rule.on, name].append(rule)

    def write(self, stage: Stage, field: ReplyField) -> Any:
        """The first applying rule's value for ``field`` at ``stage``, or ``SKIP``."""
        for rule in self._rules.get((stage, field.name), ()):
            if not _applies(rule, field):
                continue
            value = _emit(rule.emit, field)
            if value is SKIP:
                continue
            if rule.canary and isinstance(value, str) and (team := field.tags.get("team")):
                iteration = field.tags.get("iteration", 0)
                value += f" [canary:{team}:{field.name}:{field.tags.get('round', 0)}.{iteration}]"
            return value
        return SKIP


def _check(rule: FieldRule, settings: Mapping[str, Any]) -> None:
    where = f"scripted: rule {rule.name!r}"
    if rule.on not in STAGES:
        raise ValueError(f"{where}: on must be one of {', '.join(STAGES)}, got {rule.on!r}")
    setting = getattr(rule.emit, "setting", None)
    if setting is not None and setting not in settings:
        raise ValueError(f"{where}: unknown model setting {setting!r}")
    if isinstance(rule.emit, Derived) and rule.emit.derive not in DERIVERS:
        raise ValueError(f"{where}: no deriver {rule.emit.derive!r} is registered")


def _applies(rule: FieldRule, field: ReplyField) -> bool:
    if rule.option is not None and rule.option not in field.options:
        return False
    if rule.role is not None and field.tags.get("role") != rule.role:
        return False
    return rule.schema is None or field.root.get("title") == rule.schema


def _emit(emit: Emit, field: ReplyField) -> Any:
    if isinstance(emit, Fixed):
        value = field.setting(emit.setting) if emit.setting else emit.value
        return SKIP if "enum" in field.prop and value not in field.options else value
    if isinstance(emit, Rate):
        rate = field.setting(emit.setting) if emit.setting else emit.rate
        return emit.hit if field.rng.random() < rate else emit.miss
    if isinstance(emit, Text):
        return field.sentences(emit.words)
    return DERIVERS[emit.derive](field)

"""Deterministic checkers: does a reply follow one probe's instruction?

A checker is a pure function of the reply text, the asking seat
(``Asker``: a team's name and alias) and the probe's parameters, registered
by name with the parameters it takes (``max_words: {n: 60}``). The same reply
always gets the same verdict, so a verdict is evidence about the model, not
about the checker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CheckFn = Callable[..., bool]


@dataclass(frozen=True)
class Asker:
    """Who was asked: the seat's folder name and the alias it debates under."""

    team: str
    alias: str


@dataclass(frozen=True)
class Checker:
    name: str
    fn: CheckFn
    params: dict[str, type]  # every parameter is required
    doc: str


CHECKERS: dict[str, Checker] = {}


def checker(name: str, **params: type) -> Callable[[CheckFn], CheckFn]:
    """Register ``fn`` as checker ``name``, taking ``params`` (name -> int or str)."""

    def register(fn: CheckFn) -> CheckFn:
        CHECKERS[name] = Checker(name, fn, params, " ".join((fn.__doc__ or "").split()))
        return fn

    return register


def param_problem(name: str, params: dict[str, Any]) -> tuple[str, str] | None:
    """Why ``params`` do not fit checker ``name``: (the key at fault, ``checker``
    or ``params``; one line), or None if they fit."""
    if name not in CHECKERS:
        return "checker", f"unknown checker {name!r}; known: {', '.join(sorted(CHECKERS))}"
    wanted = CHECKERS[name].params
    if unknown := sorted(set(params) - set(wanted)):
        return "params", f"checker {name} takes {sorted(wanted) or 'no parameters'}, not {unknown}"
    if missing := sorted(set(wanted) - set(params)):
        return "params", f"checker {name} needs {missing}"
    for key, kind in wanted.items():
        value = params[key]
        if type(value) is not kind:  # bool is an int subclass: exact types only
            return "params", f"{key} must be {kind.__name__}, got {value!r}"
        if (isinstance(value, int) and value < 1) or (isinstance(value, str) and not value.strip()):
            return "params", f"{key} must be {'>= 1' if kind is int else 'non-empty'}, got {value!r}"
    return None


def run_checker(name: str, params: dict[str, Any], reply: str, asker: Asker) -> bool:
    return CHECKERS[name].fn(reply, asker, **params)


# -- text helpers ---------------------------------------------------------------
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_TRAILING = " \t\r\n\"'\u201d\u2019)]*_"


def words(text: str) -> list[str]:
    return text.split()


def has_word(text: str, word: str) -> bool:
    """``word`` as a whole word, any case (``I`` matches in ``I'm``, not in ``It``)."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(word)}(?![A-Za-z0-9])", text, re.IGNORECASE) is not None


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


# -- the checkers ---------------------------------------------------------------
@checker("max_words", n=int)
def max_words(reply: str, asker: Asker, *, n: int) -> bool:
    """At most ``n`` words (split on whitespace)."""
    return len(words(reply)) <= n


@checker("min_words", n=int)
def min_words(reply: str, asker: Asker, *, n: int) -> bool:
    """At least ``n`` words."""
    return len(words(reply)) >= n


@checker("max_sentences", n=int)
def max_sentences(reply: str, asker: Asker, *, n: int) -> bool:
    """At most ``n`` sentences (ended by . ! or ?, the last one may be unended)."""
    return len(sentences(reply)) <= n


@checker("ends_with_question")
def ends_with_question(reply: str, asker: Asker) -> bool:
    """The last character, past closing quotes and brackets, is a question mark."""
    return reply.rstrip(_TRAILING).endswith("?")


@checker("starts_with", word=str)
def starts_with(reply: str, asker: Asker, *, word: str) -> bool:
    """The first word, less punctuation, is ``word`` (any case)."""
    first = next(iter(words(reply)), "")
    return first.strip(".,;:!?\"'\u201c\u201d()").lower() == word.lower()


@checker("uses_word", word=str)
def uses_word(reply: str, asker: Asker, *, word: str) -> bool:
    """``word`` appears as a whole word (any case)."""
    return has_word(reply, word)


@checker("avoids_word", word=str)
def avoids_word(reply: str, asker: Asker, *, word: str) -> bool:
    """``word`` never appears as a whole word (any case)."""
    return not has_word(reply, word)


@checker("avoids_text", text=str)
def avoids_text(reply: str, asker: Asker, *, text: str) -> bool:
    """``text`` (a character, a phrase) never appears, exactly as given."""
    return text not in reply


@checker("mentions_team")
def mentions_team(reply: str, asker: Asker) -> bool:
    """The asking team's name or alias appears as a whole word (any case)."""
    return has_word(reply, asker.team) or has_word(reply, asker.alias)


@checker("no_digits")
def no_digits(reply: str, asker: Asker) -> bool:
    """No digit 0-9 anywhere (numbers spelled out)."""
    return not any(c.isdigit() for c in reply)


@checker("all_lowercase")
def all_lowercase(reply: str, asker: Asker) -> bool:
    """It has letters, and none of them is upper case."""
    return any(c.isalpha() for c in reply) and not any(c.isupper() for c in reply)

"""Copies: a turn that repeats an earlier published turn, its own seat's or another's;
and repeats: a turn that writes one of its own sentences again ("X. X. X.").

The measure is cheap on purpose, as it runs at every publish: the share of a
text's word 5-grams found in one earlier turn (containment, so a copy that
adds a line of its own still counts). Texts shorter than five words compare
as one whole word sequence. A repetition is a drift phenomenon to measure:
the engine records it (a ``copy`` event), the critic rejects it only when
``critic.reject_copies`` is set, and the analysis reads it per turn.

A repeat is counted by sentences: the text split after each ``.``, ``!`` or
``?``, each sentence compared by its lowercased words, so "It is too high." and
"it is too high!" are one. Sentences of fewer than ``MIN_WORDS`` words ("Yes.")
are no repeat. A copy needs an earlier turn; a small model looping one
sentence up to its cap needs none, and only a repeat shows it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.store.records import Published

N = 5  # words per shingle
MIN_WORDS = 3  # a shorter sentence written twice is no repeat
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@functools.lru_cache(maxsize=1024)
def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """The text's word ``N``-grams, lowercased (one shingle for a shorter text)."""
    words = tuple(_WORD.findall(text.lower()))
    if len(words) < N:
        return frozenset([words]) if words else frozenset()
    return frozenset(words[i : i + N] for i in range(len(words) - N + 1))


def similarity(text: str, earlier: str) -> float:
    """The share of ``text``'s shingles found in ``earlier`` (0 for an empty text)."""
    mine = shingles(text)
    return len(mine & shingles(earlier)) / len(mine) if mine else 0.0


@dataclass(frozen=True)
class Copy:
    """The earlier published turn a text repeats, and how much of it."""

    id: str
    seat: str | None
    round: int
    similarity: float

    def names(self) -> str:
        return f"{self.id} ({self.seat or 'no seat'}, round {self.round}, similarity {self.similarity:.2f})"


def find_copy(text: str, earlier: Iterable[Published], threshold: float) -> Copy | None:
    """The earlier turn ``text`` repeats most, if at or above ``threshold``; else None."""
    best: Copy | None = None
    for turn in earlier:
        score = similarity(text, turn.text)
        if score >= threshold and (best is None or score > best.similarity):
            best = Copy(turn.id, turn.team, turn.round, round(score, 3))
    return best


@dataclass(frozen=True)
class Repeat:
    """A turn's own sentence written again: the one written most, and how much."""

    sentence: str  # as the turn first wrote it
    times: int  # how many times the turn wrote it
    share: float  # the share of the turn's sentences that repeat an earlier one of it


def repeats(sentences: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Those of a turn's ``sentences`` (each its words, ``_sentences``) that repeat an earlier one."""
    seen: set[tuple[str, ...]] = set()
    again: list[tuple[str, ...]] = []
    for words in sentences:
        if words in seen:
            again.append(words)
        seen.add(words)
    return again


def repeat_share(text: str) -> float:
    """The share of ``text``'s sentences that repeat an earlier one of it (0 for none)."""
    sentences = [words for _, words in _sentences(text)]
    return len(repeats(sentences)) / len(sentences) if sentences else 0.0


def find_repeat(text: str) -> Repeat | None:
    """The sentence ``text`` writes most often, if it writes one more than once."""
    sentences = _sentences(text)
    again = repeats([words for _, words in sentences])
    if not again:
        return None
    most = max(set(again), key=lambda w: (again.count(w), -again.index(w)))
    first = next(raw for raw, words in sentences if words == most)
    return Repeat(first, again.count(most) + 1, round(len(again) / len(sentences), 3))


def _sentences(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Each sentence of ``text`` of at least ``MIN_WORDS`` words: as written, and as lowercased words."""
    split = ((raw, tuple(_WORD.findall(raw.lower()))) for raw in _SENTENCE.split(text.strip()))
    return [(raw, words) for raw, words in split if len(words) >= MIN_WORDS]

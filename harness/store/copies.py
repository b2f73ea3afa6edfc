"""Copies: a turn that repeats an earlier published turn, its own seat's or another's.

The measure is cheap on purpose, as it runs at every publish: the share of a
text's word 5-grams found in one earlier turn (containment, so a copy that
adds a line of its own still counts). Texts shorter than five words compare
as one whole word sequence. A repetition is a drift phenomenon to measure:
the engine records it (a ``copy`` event), the critic rejects it only when
``critic.reject_copies`` is set, and the analysis reads it per turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from harness.store.records import Published

N = 5  # words per shingle
_WORD = re.compile(r"\w+")


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

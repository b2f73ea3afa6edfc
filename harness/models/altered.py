"""Altered copies: a stretch of a reply that copies a piece of text with a word
or two changed, added or dropped.

SmolLM2 published "one sentence saying who your current team is and how they
argue" as its team's persona: its instruction, "one sentence saying who your
team is and how it argues", with a word added and two changed. No run of 8
words is the instruction's, so the echo check's exact runs
(``harness.models.echo``) let it through: 23 of 73 persona replies in nine
recorded SmolLM2 runs were such copies, all accepted. A stretch counts as an
altered copy of a piece when:

- it is at least ``n`` words long and ``n - 1`` or more of its words are the
  piece's, in the piece's order;
- the words left unmatched in it and in the piece's stretch it matches, counted
  together, are at most one for every ``PER_ALTERED`` matched: a word added or
  dropped counts one, a word changed two (one on each side);
- and between two matched stretches at most ``GAP`` words differ on each side.

A copy that is exact for ``n`` words is the echo check's; an exact copy of
``n - 1`` words followed by words of its own is no copy here either: the
stretch must go on matching past its alteration.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Sequence

PER_ALTERED = 3  # matched words for each unmatched one: 8 allow one word changed or two added
GAP = 2  # words that may differ between two matched stretches, on each side


def seed(n: int) -> int:
    """How long a run of its piece every altered copy (at ``n``) holds whole.

    ``m >= n - 1`` matched words leave at most ``m / 3`` unmatched, and each gap
    between two matched runs holds one or more of those: so at most ``m / 3 + 1``
    runs, and the longest is at least ``3m / (m + 3)`` words, over 2 from ``m = 7``
    (the default n, 8) and over 1 from ``m = 2``."""
    return 3 if n >= 8 else 2


def seeds(words: Sequence[str], n: int) -> set[str]:
    """The ``seed(n)``-word runs of ``words``."""
    k = seed(n)
    return {" ".join(words[i : i + k]) for i in range(len(words) - k + 1)}


@functools.lru_cache(maxsize=256)
def _index(pieces: tuple[str, ...], n: int) -> tuple[dict[str, tuple[str, ...]], dict[str, int]]:
    """Each ``seed(n)``-word run of ``pieces`` (texts' words, space-joined) -> the pieces
    holding it; and each piece's place in ``pieces``."""
    found: dict[str, list[str]] = {}
    for piece in pieces:
        for run in seeds(piece.split(), n):
            found.setdefault(run, []).append(piece)
    return {run: tuple(held) for run, held in found.items()}, {p: i for i, p in enumerate(pieces)}


def near(pieces: tuple[str, ...], runs: set[str], n: int) -> list[str]:
    """The pieces sharing a run with a reply's ``runs`` (``seeds(words, n)``), in ``pieces``' order."""
    index, place = _index(pieces, n)
    if not (shared := runs & index.keys()):  # most replies: no run of any piece
        return []
    return sorted({piece for run in shared for piece in index[run]}, key=place.__getitem__)


@functools.lru_cache(maxsize=4096)
def _split(piece: str) -> tuple[tuple[str, ...], frozenset[str]]:
    words = tuple(piece.split())
    return words, frozenset(words)


def altered_run(piece: str, words: Sequence[str], n: int) -> tuple[int, int, int] | None:
    """Where ``words`` copies ``piece`` (its words, space-joined) altered (the module's
    rule): (matched words, start, end) of the longest such stretch of ``words``, or None."""
    piece_words, vocabulary = _split(piece)
    if len(vocabulary.intersection(words)) < n - 1:  # most pieces near a reply share a phrase, not a line
        return None
    blocks = [
        b
        for b in difflib.SequenceMatcher(None, piece_words, words, autojunk=False).get_matching_blocks()
        if b.size
    ]
    found = []
    for first, last in _stretches(blocks):
        matched = sum(b.size for b in blocks[first : last + 1])
        start, end = blocks[first].b, blocks[last].b + blocks[last].size
        unmatched = (end - start - matched) + (blocks[last].a + blocks[last].size - blocks[first].a - matched)
        if matched >= n - 1 and end - start >= n and unmatched * PER_ALTERED <= matched:
            found.append((matched, start, end))
    return max(found, key=lambda f: f[0], default=None)


def _stretches(blocks: Sequence[difflib.Match]) -> Iterable[tuple[int, int]]:
    """(first, last) of each maximal chain of ``blocks`` no more than ``GAP`` words apart on either side."""
    first = 0
    while first < len(blocks):
        last = first
        while last + 1 < len(blocks) and _close(blocks[last], blocks[last + 1]):
            last += 1
        yield first, last
        first = last + 1


def _close(one: difflib.Match, two: difflib.Match) -> bool:
    return two.a - (one.a + one.size) <= GAP and two.b - (one.b + one.size) <= GAP

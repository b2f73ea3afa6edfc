"""How searches are shown to a model: the passages a search found, the
summary the summarize tool gave, and a claim's content words as a query.
Shared by the grounded arguer, a person's chat turn and the grounded
fact-checker, so all three see search results the same way."""

from __future__ import annotations

from harness.agents.transcript import clip
from harness.store.records import SearchRecord

# Each passage is shown clipped to this; a verse or a paragraph fits whole.
PASSAGE_CHARS = 320
# A summary's lines past its header: the top passages on the topic, each clipped.
SUMMARY_LINES = 6

_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "with",
    ]
)


def topic_words(claim: str) -> str:
    """The claim's content words, as a model that echoes field names needs a query shown to it."""
    words = [w.strip(".,;:!?\"'()").lower() for w in claim.split()]
    words = [w.removesuffix("'s") for w in words if w and w not in _STOP]
    return " ".join(dict.fromkeys(words)) or claim


def render_summary(s: SearchRecord) -> list[str]:
    """A summary as a model reads it: its first line (the collection's size),
    then its top passages; the list of groups (66 books of the KJV) is left out."""
    lines = (s.summary or "").splitlines()
    kept = [line for line in lines[1:] if line.startswith(("- [", "Top passages", "No passages"))]
    return [
        f'Summary "{s.query}":',
        *lines[:1],
        *(clip(line, PASSAGE_CHARS) for line in kept[:SUMMARY_LINES]),
    ]


def render_hits(searches: list[SearchRecord]) -> str:
    lines = []
    for s in searches:
        if s.tool == "summarize":
            lines += render_summary(s)
            continue
        lines.append(f'Search "{s.query}": {len(s.hits)} passage(s)')
        lines += [f"[{h.id}] ({h.source}) {clip(h.text, PASSAGE_CHARS)}" for h in s.hits]
    return "\n".join(lines) or "(no searches yet)"

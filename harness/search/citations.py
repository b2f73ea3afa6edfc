"""The citation checker: does the cited passage hold the quoted words?

Each citation is marked ``supported`` (the passage holds the quote verbatim,
or after normalising whitespace and case), ``unsupported`` (the passage
exists but lacks the quote) or ``unknown`` (no passage has that id). It is
pure: the same citations against the same collection always get the same
marks, so a resumed run and ``verify`` agree with the run that made them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from harness.store.records import Citation

# Quote marks a model wraps around a span it copies; they are not part of the passage.
_QUOTES = "\"'“”‘’«»"


def normalise(text: str) -> str:
    """Case and whitespace folded, so line breaks and capitals do not fail a true quote."""
    return " ".join(text.lower().split())


def _bare(quote: str) -> str:
    quote = quote.strip().strip(_QUOTES).strip()
    return re.sub(r"\s*(\.\.\.|…)\s*$", "", quote)  # a trailing ellipsis marks a cut, not a word


def check_citation(citation: Citation, passage_text: str | None) -> Citation:
    """``citation`` marked against the text of the passage it names (None: no such passage)."""
    if passage_text is None:
        status = "unknown"
    else:
        quote = _bare(citation.quote)
        held = bool(quote) and (quote in passage_text or normalise(quote) in normalise(passage_text))
        status = "supported" if held else "unsupported"
    return citation.model_copy(update={"status": status})


def check_citations(citations: Iterable[Citation], lookup: Callable[[str], str | None]) -> list[Citation]:
    """Every citation marked; ``lookup`` gives a passage's text by id (None if there is none)."""
    return [check_citation(c, lookup(c.id.strip())) for c in citations]


def bad_citations(citations: Iterable[Citation]) -> list[Citation]:
    return [c for c in citations if c.status in ("unsupported", "unknown")]


def reasons(citations: Iterable[Citation]) -> str:
    """Why citations failed, one clause each, for the arguer's retry prompt."""
    why = {
        "unsupported": "the passage does not contain the quoted words",
        "unknown": "no passage has this id",
    }
    return "; ".join(
        f"[{c.id}] {c.quote[:80]!r}: {why[c.status]}" for c in bad_citations(citations) if c.status
    )

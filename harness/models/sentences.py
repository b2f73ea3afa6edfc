"""Where a reply's prose was cut: ended at its last complete sentence.

A string counts as cut by a cap when it reached the ``maxLength`` it was
decoded under, or when the reply ran out of ``max_tokens`` inside it. Only
prose counts (``PROSE_CHARS``); a name or a label ends where its cap ends it. A
field published as a turn (``PUBLISHED``) must begin a sentence (not on a
comma, nor on a lower-case letter: ``_begun``), and end one whatever cut it: a
small model closes a string mid-sentence far below its cap ("...supported by
the"), and that cut is "unfinished". One begun mid-sentence makes the reply
invalid (``NoSentence``), repaired like any other, and so does a cut leaving a
published field no complete sentence, unless the field may be null (the
critic's optional revision): then it is left out, all of it dropped, as the
model may leave it. A private field (a scratchpad, a rationale) keeps the text
the cap left (a cut with nothing dropped), as no one reads it as a turn.
``harness.models.structured`` applies this to every reply; the grounded
format's hard cut at ``format.charlimit`` ends its turn the same way (``within``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cut:
    """A string field a length cap cut: what was dropped after its last sentence."""

    field: str  # its path in the reply ("argument", "citations.0.quote")
    dropped_chars: int
    cap: str  # "maxLength", "max_tokens" or "unfinished" (the grounded format adds "format.charlimit")
    # 0: a private field with no sentence before the cap, kept as the cap left it


class NoSentence(ValueError):
    """A cut left a published field no complete sentence: the reply is invalid and is asked again."""


# The reply fields the formats publish as a turn (or show every seat: a summary),
# by name: each must end a sentence, even where the model itself stopped short.
PUBLISHED = frozenset(
    {
        "argument",  # drift's and grounded's turn, judge_refine's Pro
        "revised_argument",  # drift's critic's revision, published with critic.use_revision
        "answer",  # judge_refine's Con (and an interview's answer)
        "statement",  # panel
        "speech",  # moderated
        "summary",  # the summarizer's, shown to every seat
        "convergences",
        "tensions",
        "recommendation",  # panel's synthesis
        # judge_refine's judge: the evaluation is Pro's next message and the transcript's
        # Judge line (Gemma 3 270M closed one mid-clause, "...raised the issue of working
        # from home"), the synthesis the next motion
        "evaluation",
        "synthesis",
    }
)


_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s|$)")


# Words no sentence ends on: a period after one is a cap's or a grammar's, not
# the writer's ("...as it is supported by the ."), and the sentence is unfinished.
# A pronoun's contraction is one ("...with a lot of people opposing it, and it's.",
# SmolLM2's published moderated speech); a possessive ("John's.") is not.
_DANGLING = re.compile(
    r"(?i)\b(?:a|an|the|of|to|by|for|from|with|into|onto|than|whose|and|or|but|nor|as|its|their|our|your|my"
    r"|(?:it|that|there|here|what|let|he|she)['\u2019]s|i['\u2019]m|(?:you|we|they)['\u2019]re)$"
)


# A dangling word is at most 7 characters ("there's"): whether the text before a
# sentence end ends on one is read from its last few, not searched from its start.
_DANGLING_TAIL = 16


def last_sentence(text: str) -> str:
    """``text`` up to the end of its last complete sentence ("" if it has none)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text) if _finishes(text, m.start())]
    return text[: ends[-1]] if ends else ""


def _finishes(text: str, end: int) -> bool:
    """Whether a sentence end at ``end`` of ``text`` ends a finished sentence."""
    if text[end - 1 : end].isalpha():
        return not _DANGLING.search(text, max(0, end - _DANGLING_TAIL), end)
    return end > 0 and not text[end - 1].isspace()


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A schema node with its ``$ref`` followed and its Optional's null option left out."""
    if "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    option = next((o for o in node.get("anyOf", []) if o.get("type") != "null"), None)
    return node if option is None else _resolve(option, root)


# A string allowed fewer characters is a name, a label or a query, not prose:
# a cap cuts it where it cuts it, and it need not end a sentence.
PROSE_CHARS = 80


# What no sentence begins with, any more than with a lower-case letter: a published
# field that starts on one continues a sentence it never wrote (SmolLM2's critic revised
# a draft as ", and the evidence is...", its moderated Pro opened "has been the topic of
# debate for years."). A "-", a quote, a digit or a letter with no case begins one. The
# grammar leaves the case free: a capital forced on a fragment would only hide it.
_CONTINUES = ",.;:!?)]}"

# A published prose string decoded under a grammar begins on no such mark, and may
# close only after ".", "!" or "?" right after a word, or at its cap (a cut there is
# ended at a sentence, as any cut): SmolLM2 ends a whole clause without its period
# ("...than office work") and, re-asked, writes the same reply again, three attempts
# running. No escapes and no control characters inside (JSON allows neither raw; SmolLM2
# wrote raw newlines into a published turn): a turn has no use for them.
_CHAR = r'[^"\\\x00-\x1f]'
_BEGINS = r'[^"\\\x00-\x1f ,.;:!?)\]}]'
_LAST = r'[^"\\\x00-\x1f ]'
_ENDS_A_SENTENCE = f"^({_BEGINS}{_CHAR}{{%d,%d}}{_LAST}[.!?]|{_BEGINS}{_CHAR}{{%d}})$"


def sentence_grammar_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (a copy) with each published prose string, at its length limits,
    a pattern that ends a sentence: what a local model's grammar decodes under."""
    out = json.loads(json.dumps(schema))
    for node in [out, *out.get("$defs", {}).values()]:
        for key, prop in node.get("properties", {}).items():
            if key in PUBLISHED:
                for option in [prop, *prop.get("anyOf", [])]:
                    _end_a_sentence(option)
    return out


def _end_a_sentence(node: dict[str, Any]) -> None:
    if node.get("type") != "string" or node.get("maxLength", 0) < PROSE_CHARS or "pattern" in node:
        return
    least, most = max(int(node.pop("minLength", 3)) - 3, 0), int(node.pop("maxLength"))
    node["pattern"] = _ENDS_A_SENTENCE % (least, most - 3, most - 1)


def _limits(
    node: dict[str, Any], root: dict[str, Any], data: Any, path: str, out: dict[str, int], nullable: set[str]
) -> None:
    """The ``maxLength`` each prose string of ``data`` was decoded under, by its path;
    in ``nullable``, the paths of the fields that may be null (an Optional)."""
    if any(option.get("type") == "null" for option in node.get("anyOf", ())):
        nullable.add(path)
    node = _resolve(node, root)
    if isinstance(data, str) and node.get("maxLength", 0) >= PROSE_CHARS:
        out[path] = int(node["maxLength"])
    elif isinstance(data, dict):
        props = node.get("properties", {})
        for key, value in data.items():
            if key in props:
                _limits(props[key], root, value, f"{path}.{key}" if path else key, out, nullable)
    elif isinstance(data, list) and "items" in node:
        for i, value in enumerate(data):
            _limits(node["items"], root, value, f"{path}.{i}", out, nullable)


def _open_field(texts: list[tuple[str, str]], raw: str) -> str | None:
    """The string field a truncated reply ends inside: the last whose text ends the reply."""
    end = raw.rstrip()
    for path, text in reversed(texts):
        tail = text.rstrip()[-24:]
        if tail and (end.endswith(tail) or end.endswith(json.dumps(tail)[1:-1])):
            return path
    return None


def _set(data: Any, path: str, value: str | None) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    data[int(last) if isinstance(data, list) else last] = value


def sentence_cuts(
    data: Any, schema: dict[str, Any], texts: list[tuple[str, str]], raw: str, truncated: bool
) -> list[Cut]:
    """End each prose string of ``data`` (in place) that a cap cut, and each published
    one left unfinished, at its last complete sentence; the cuts. ``texts`` are its
    strings by path, ``truncated`` whether the reply's JSON was left open. A string
    that ends a sentence anyway is no cut. Raises ``NoSentence`` when a published field
    begins mid-sentence, or when a cut leaves one none (one that may be null is then set
    to None instead)."""
    _begun(texts)
    limits: dict[str, int] = {}
    nullable: set[str] = set()
    _limits(schema, schema, data, "", limits, nullable)
    capped = {path: "unfinished" for path, _ in texts if path in PUBLISHED}
    capped |= {path: "maxLength" for path, text in texts if path in limits and len(text) >= limits[path]}
    if truncated and (open_ := _open_field(texts, raw)) in limits:
        capped[open_] = "max_tokens"
    cuts: list[Cut] = []
    for path, text in texts:
        if path not in capped or len(kept := last_sentence(text)) == len(text.rstrip()):
            continue
        if not kept and path not in PUBLISHED:  # private: re-asking would only lose the turn
            cuts.append(Cut(path, 0, capped[path]))
            continue
        if not kept and path in nullable:  # optional (the critic's revision): left out, as it may be
            _set(data, path, None)
            cuts.append(Cut(path, len(text), capped[path]))
            continue
        if not kept:
            raise NoSentence(
                f"{path}: {_HOW[capped[path]]}, and no sentence ended before that; "
                "write complete sentences, fewer and shorter, each ending with a period"
            )
        _set(data, path, kept)
        cuts.append(Cut(path, len(text) - len(kept), capped[path]))
    return cuts


def _begun(texts: list[tuple[str, str]]) -> None:
    """Raises ``NoSentence`` if a published field begins mid-sentence (``_CONTINUES``, lower case)."""
    for path, text in texts:
        start = text.lstrip()
        if path in PUBLISHED and start[:1] and (start[0] in _CONTINUES or start[0].islower()):
            raise NoSentence(
                f"{path}: begins mid-sentence ({start[:24]!r}...); begin it with the first word of a sentence"
            )


_HOW = {
    "maxLength": "cut at its length limit",
    "max_tokens": "cut where the reply ran out of tokens",
    "unfinished": "stops mid-sentence",
}


def within(text: str, limit: int) -> tuple[str, bool]:
    """``text`` within ``limit`` characters, ended at its last complete sentence there (else
    at a word where it can be, marked "…"); and whether it was cut."""
    if len(text) <= limit:
        return text, False
    if kept := last_sentence(text[:limit]):
        return kept, True
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + "…", True

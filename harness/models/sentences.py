"""Where a length cap cut a reply's prose: ended at its last complete sentence.

A string counts as cut by a cap when it reached the ``maxLength`` it was
decoded under, or when the reply ran out of ``max_tokens`` inside it. Only
prose counts (``PROSE_CHARS``); a name or a label ends where its cap ends it.
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
    cap: str  # "maxLength" or "max_tokens" (the grounded format adds "format.charlimit")
    # False: no sentence ended before the cap, so the text stands as the cap left it
    sentence: bool = True


_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s|$)")


def last_sentence(text: str) -> str:
    """``text`` up to the end of its last complete sentence ("" if it has none)."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]] if ends else ""


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A schema node with its ``$ref`` followed and its Optional's null option left out."""
    if "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    option = next((o for o in node.get("anyOf", []) if o.get("type") != "null"), None)
    return node if option is None else _resolve(option, root)


# A string allowed fewer characters is a name, a label or a query, not prose:
# a cap cuts it where it cuts it, and it need not end a sentence.
PROSE_CHARS = 80


def _limits(node: dict[str, Any], root: dict[str, Any], data: Any, path: str, out: dict[str, int]) -> None:
    """The ``maxLength`` each prose string of ``data`` was decoded under, by its path."""
    node = _resolve(node, root)
    if isinstance(data, str) and node.get("maxLength", 0) >= PROSE_CHARS:
        out[path] = int(node["maxLength"])
    elif isinstance(data, dict):
        props = node.get("properties", {})
        for key, value in data.items():
            if key in props:
                _limits(props[key], root, value, f"{path}.{key}" if path else key, out)
    elif isinstance(data, list) and "items" in node:
        for i, value in enumerate(data):
            _limits(node["items"], root, value, f"{path}.{i}", out)


def _open_field(texts: list[tuple[str, str]], raw: str) -> str | None:
    """The string field a truncated reply ends inside: the last whose text ends the reply."""
    end = raw.rstrip()
    for path, text in reversed(texts):
        tail = text.rstrip()[-24:]
        if tail and (end.endswith(tail) or end.endswith(json.dumps(tail)[1:-1])):
            return path
    return None


def _set(data: Any, path: str, value: str) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    data[int(last) if isinstance(data, list) else last] = value


def sentence_cuts(
    data: Any, schema: dict[str, Any], texts: list[tuple[str, str]], raw: str, truncated: bool
) -> list[Cut]:
    """End each prose string of ``data`` (in place) that a cap cut at its last complete
    sentence; the cuts. ``texts`` are its strings by path, ``truncated`` whether the
    reply's JSON was left open. A string that ends a sentence anyway is no cut."""
    limits: dict[str, int] = {}
    _limits(schema, schema, data, "", limits)
    capped = {path: "maxLength" for path, text in texts if path in limits and len(text) >= limits[path]}
    if truncated and (open_ := _open_field(texts, raw)) in limits:
        capped[open_] = "max_tokens"
    cuts: list[Cut] = []
    for path, text in texts:
        if path not in capped or len(kept := last_sentence(text)) == len(text.rstrip()):
            continue
        if not kept:  # re-asking a model that cannot write shorter loses the turn: keep it, say so
            cuts.append(Cut(path, 0, capped[path], sentence=False))
            continue
        _set(data, path, kept)
        cuts.append(Cut(path, len(text) - len(kept), capped[path]))
    return cuts


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

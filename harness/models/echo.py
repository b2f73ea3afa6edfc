"""Echoes: a reply that copies its instructions instead of following them.

Asked for "- argument: the argument to publish, two to four sentences with a
concrete reason", SmolLM2 published "This is your argument to publish, two to
four sentences with a concrete reason", and its critic approved it with the
feedback "is_approved" (issue 30). Both validate. A reply text field is an
echo when it holds a run of ``n`` consecutive words (lowercase alphanumeric
tokens) of its prompt's instructions or of its reply schema, when it holds
nothing but the schema's field names, or when it writes another field's
snake_case name ("is_approved"), which no prose does.

The prompts do not mark what they quote (the motion, the transcript, the
opponent's argument, search passages, a persona), and copying those is
legitimate. So a run of the prompt counts as an instruction by where its
words come from: a piece the harness wrote that the prompt shows whole, i.e.
a string literal of its prompt code (``PROMPT_CODE``, read once from source,
docstrings left out; an f-string's written parts and a template's text
between its fields are pieces of their own) or a text of the run's config
outside ``topic`` (the critic's strictness, briefings, probe instructions).
Two parts either side of a field filled by one word are a piece too: SmolLM2
wrote "The judge's evaluation of round 1 follows as its own message", its
prompt's line with the round filled in, each side shorter than ``n`` words.
Whole: a label and the quoted text after it ("Persona: " and a persona) may
happen to read like another agent's line, and are not that line. A quoted
piece matches only if it copies an instruction itself. No prompt builder has
to change, so neither does any run's prompt or fingerprint.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
import json
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.models.altered import altered_run, near, seeds
from harness.models.reply_example import example_reply

_WORD = re.compile(r"[a-z0-9]+", re.IGNORECASE)  # a word, lowercased after
# Where the harness writes its prompts, relative to the package: every agent,
# every format, the probes' catalog and the citation checker's reasons.
PROMPT_CODE = ("agents", "formats", "probes/catalog.py", "search/citations.py")
_HOLE = re.compile(r"\{[^{}]*\}")  # a str.format field: the text on each side is written, the field is not
FIELD = "#"  # a field filled by one word, in a run across it: no word (``_WORD``) is this
# Config text that is material, not instructions: the motion, its framework, its domain.
QUOTED_SECTIONS = ("topic",)
_JSON_WORDS = frozenset({"true", "false", "null"})
_SPELLED = re.compile(r"[a-z0-9]+(_[a-z0-9]+)+")  # a snake_case name: JSON's, never prose's
QUOTE_CHARS = 80  # how much of a copied run a re-ask quotes


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def ngrams(tokens: Sequence[str], n: int) -> set[str]:
    return {" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _docstring(node: ast.AST) -> ast.AST | None:
    """The docstring's node of ``node`` (a module, class or function), if it has one."""
    if isinstance(node, _OWNERS) and node.body and isinstance(node.body[0], ast.Expr):
        first = node.body[0].value
        return first if isinstance(first, ast.Constant) else None
    return None


def literals(source: str) -> Iterator[str]:
    """The string literals of ``source`` (an f-string's written parts each on
    its own, and the f-string whole with ``{}`` for its fields, as a template),
    docstrings left out. One walk: it visits a docstring's owner before the docstring."""
    skip: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (doc := _docstring(node)) is not None:
            skip.add(id(doc))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node.value
        elif isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values):
            yield "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)


def prompt_code() -> list[Path]:
    root = Path(__file__).resolve().parents[1]  # the harness package
    found: list[Path] = []
    for part in PROMPT_CODE:
        path = root / part
        found += sorted(path.glob("*.py")) if path.is_dir() else [path]
    return found


_TEMPLATES_LOCK = threading.Lock()


def templates() -> tuple[str, ...]:
    """Every literal of the harness's prompt code, parsed once a process: under a
    lock, because 64 cells starting at once would each parse it (functools.cache
    does not stop threads that miss together), 70 ms of CPU apiece."""
    with _TEMPLATES_LOCK:
        return _templates()


@functools.cache
def _templates() -> tuple[str, ...]:
    return tuple(text for path in prompt_code() for text in literals(path.read_text()))


@dataclass(frozen=True)
class Written:
    """Pieces of text the harness writes whole (a literal or config text, split at
    its format fields) of ``n`` words or more, by each of their ``n``-word runs;
    and two parts either side of a field, the field one ``FIELD`` word."""

    by_gram: dict[str, tuple[str, ...]]  # every n-word run of every piece -> the pieces holding it
    grams: frozenset[str]  # every n-word run of every piece
    fields: frozenset[tuple[str, str]] = frozenset()  # the words either side of a field in such a run
    pieces: tuple[str, ...] = ()  # every piece, its words space-joined (a field's as ``FIELD``)


def across(left: list[str], right: list[str], n: int) -> list[str]:
    """The ``n``-word runs of ``left``, a one-word field and ``right`` that hold
    a word of each (a run ending at the field copies no more than a part does)."""
    return [
        " ".join([*left[len(left) - k :], FIELD, *right[: n - 1 - k]])
        for k in range(max(1, n - 1 - len(right)), min(len(left), n - 2) + 1)
    ]


@functools.lru_cache(maxsize=256)
def written(texts: tuple[str, ...], n: int) -> Written:
    by_gram: dict[str, list[str]] = {}
    fields: set[tuple[str, str]] = set()
    for text in texts:
        parts = [words(part) for part in _HOLE.split(text)]
        for tokens in parts:
            if len(tokens) >= n:
                piece = " ".join(tokens)
                for gram in ngrams(tokens, n):
                    by_gram.setdefault(gram, []).append(piece)
        for left, right in itertools.pairwise(parts):
            if runs := across(left, right, n):
                piece = " ".join([*left, FIELD, *right])
                fields.add((left[-1], right[0]))
                for gram in runs:
                    by_gram.setdefault(gram, []).append(piece)
    pieces = tuple(dict.fromkeys(piece for held in by_gram.values() for piece in held))
    return Written(
        {k: tuple(dict.fromkeys(v)) for k, v in by_gram.items()},
        frozenset(by_gram),
        frozenset(fields),
        pieces,
    )


_CODE_WRITTEN_LOCK = threading.Lock()


def code_written(n: int) -> Written:
    """``written`` of the prompt code's literals, by ``n`` alone (keyed by the
    literals themselves, every request hashed all ~2,000 of them), under a lock
    for the reason ``templates`` gives."""
    with _CODE_WRITTEN_LOCK:
        return _code_written(n)


@functools.cache
def _code_written(n: int) -> Written:
    return written(templates(), n)


def strings(node: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a tree of dataclasses, dicts and lists, with its dotted path."""
    if isinstance(node, str):
        yield path, node
        return
    for sub, child in _children(node, path):
        if isinstance(child, str):
            yield sub, child
        elif not isinstance(child, int | float | None):  # no generator for a number (a config's most values)
            yield from strings(child, sub)


def _children(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The values ``node`` holds, with their dotted paths; none for a value that is no tree."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return (
            (f"{path}.{f.name}" if path else f.name, getattr(node, f.name)) for f in dataclasses.fields(node)
        )
    if isinstance(node, dict):
        return ((f"{path}.{key}" if path else str(key), value) for key, value in node.items())
    if isinstance(node, list | tuple):
        return ((path, value) for value in node)
    return iter(())


def config_texts(config: Any, n: int) -> tuple[str, ...]:
    """The instruction texts of a config (a ``Config``, or its dict, nested or
    with dotted keys) that hold ``n`` words or more: all but ``QUOTED_SECTIONS``."""
    return tuple(
        text
        for path, text in strings(config)
        if path.split(".", 1)[0] not in QUOTED_SECTIONS and len(words(text)) >= n
    )


def _schema_parts(node: Any, names: set[str], choices: set[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            names.update(node["properties"])
        choices.update(str(v).lower() for v in node.get("enum", []))
        if "const" in node:
            choices.add(str(node["const"]).lower())
        for value in node.values():
            _schema_parts(value, names, choices)
    elif isinstance(node, list):
        for value in node:
            _schema_parts(value, names, choices)


@dataclass(frozen=True)
class EchoCheck:
    """What one request's reply must not copy: ``instructions`` (its prompt's
    instruction runs; or asked of ``shown`` run by run), ``schema`` (the reply
    schema's runs), ``names`` (the words of its field names; ``choices``, its
    enum values, are exempt)."""

    n: int
    instructions: frozenset[str]
    schema: frozenset[str]
    names: frozenset[str]
    choices: frozenset[str]
    spelled: frozenset[str] = frozenset()  # field names no prose writes ("is_approved")
    example: frozenset[str] = frozenset()  # the runs of the schema's worked example (a base model's prompt)
    shown: Shown | None = None  # the prompt's instruction runs, found as asked (a model call's check)
    fields: tuple[frozenset[tuple[str, str]], ...] = ()  # ``Written.fields`` of the code and the config
    # the pieces an altered copy (``harness.models.altered``) is sought in: the instructions'
    # (when ``shown`` is None; else those it shows), the schema's texts, the worked example's
    instruction_pieces: tuple[str, ...] = ()
    schema_pieces: tuple[str, ...] = ()
    example_pieces: tuple[str, ...] = ()

    def filled(self, ws: list[str]) -> list[int]:
        """Where ``ws`` has a word between two that sit either side of a field:
        most replies have none, found by one set test per word pair."""
        if all(f.isdisjoint(zip(ws, ws[2:], strict=False)) for f in self.fields):
            return []
        return [
            i + 1
            for i, pair in enumerate(zip(ws, ws[2:], strict=False))
            if any(pair in f for f in self.fields)
        ]

    def instructed(self, gram: str) -> bool:
        return gram in self.instructions or (self.shown is not None and self.shown.instructs(gram))

    def _known(self, grams: set[str]) -> set[str]:
        """Those of ``grams`` that are runs of the schema, its worked example or the
        instructions (``instructed``), found a set at a time: most runs are none."""
        known = (grams & self.schema) | (grams & self.example) | (grams & self.instructions)
        if self.shown is not None:
            known |= self.shown.instructing(grams - known)
        return known

    def copied(self, text: str, ws: list[str] | None = None) -> tuple[int, str, str] | None:
        """The first run of ``text`` (its ``words``, if found already) copied from the
        instructions or the schema: (its length in words, the text as written, where
        it comes from)."""
        ws, n = words(text) if ws is None else ws, self.n
        grams = [" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)]
        known = self._known(set(grams))
        hits = [g in known for g in grams]
        for i in self.filled(ws):  # a run with word i in a field's place
            for s in range(max(0, i - n + 2), min(i - 1, len(ws) - n) + 1):
                wild = " ".join([*ws[s:i], FIELD, *ws[i + 1 : s + n]])
                if not hits[s] and self.instructed(wild):
                    grams[s], hits[s] = wild, True
        if not any(hits):
            return None
        first = hits.index(True)
        last = first
        while last + 1 < len(hits) and hits[last + 1]:
            last += 1
        source = (
            "the instructions"
            if self.instructed(grams[first])
            else "the worked example"
            if grams[first] in self.example
            else "the reply schema"
        )
        # where its words are, found only now: most replies copy no run
        spans = list(_WORD.finditer(text))
        return last - first + self.n, text[spans[first].start() : spans[last + self.n - 1].end()], source

    def why(self, path: str, text: str) -> str | None:
        """Why the field at ``path`` holding ``text`` is an echo, or None."""
        tokens = words(text)
        if tokens and text.strip().lower() not in self.choices and set(tokens) - _JSON_WORDS <= self.names:
            return f"{path}: holds only field names ({text.strip()[:QUOTE_CHARS]!r}) instead of what the field asks for"
        # another field's name ("is_approved: false" in a revised argument) writes
        # the reply's structure into its text; a field's own name is left to it
        own = next((part for part in reversed(path.split(".")) if not part.isdigit()), "")
        lowered = text.lower()
        for name in sorted(self.spelled - {own}):
            if name in lowered and re.search(rf"(?<!\w){name}(?!\w)", lowered):  # the test first: cheap
                return f"{path}: writes the field name {name!r} instead of what the field asks for"
        if (found := self.copied(text, tokens)) is not None:
            count, run, source = found
            copies = f"copies {count} words of {source}"
        elif (found := self.altered(text, tokens)) is not None:
            count, run, source = found
            copies = f"copies {count} words of {source} with a word or two changed"
        else:
            return None
        quote = run if len(run) <= QUOTE_CHARS else run[: QUOTE_CHARS - 1] + "…"
        return f"{path}: {copies} ({quote!r}) instead of writing what the field asks for in its own words"

    def altered(self, text: str, ws: list[str]) -> tuple[int, str, str] | None:
        """The first stretch of ``text`` (its ``words``, ``ws``) that copies a piece of
        the instructions, the schema or the worked example altered (``harness.models.altered``):
        (its matched words, the stretch as written, where it comes from)."""
        if len(ws) < self.n:
            return None
        runs = seeds(ws, self.n)
        for source, piece in self._near(runs):
            if (found := altered_run(piece, ws, self.n)) is not None:
                matched, start, end = found
                spans = list(_WORD.finditer(text))
                return matched, text[spans[start].start() : spans[end - 1].end()], source
        return None

    def _near(self, runs: set[str]) -> Iterator[tuple[str, str]]:
        """(source, piece) of each piece sharing a run with a reply's ``runs``: the instructions first."""
        if self.shown is not None:
            shown = self.shown
            for pieces in shown.pieces():
                yield from (("the instructions", p) for p in near(pieces, runs, self.n) if shown.shows(p))
        yield from (("the instructions", p) for p in near(self.instruction_pieces, runs, self.n))
        yield from (("the reply schema", p) for p in near(self.schema_pieces, runs, self.n))
        yield from (("the worked example", p) for p in near(self.example_pieces, runs, self.n))


class Shown:
    """The pieces the harness wrote that a request's messages show whole: a
    literal of its prompt code or a text of ``extra`` (the run's config texts).
    Whole, so that a label and the quoted text after it ("Persona: " and a
    persona) never pass for another prompt's line. A model's own earlier
    messages (a failed reply, a fork's history) are quoted, never instructions.

    Asked run by run (``instructs``), and only for a reply's runs that some
    piece holds: most replies hold none, so the prompt's words (thousands, the
    whole transcript) are found only when one does, not on every call. One
    request's, so no lock: a plain memo, not ``functools.cached_property``,
    whose lock 3.11 shares across instances (and so across cells' threads)."""

    def __init__(self, texts: tuple[str, ...], extra: tuple[str, ...], n: int) -> None:
        self.texts = texts  # the contents of the messages not the model's own
        self.extra = extra
        self.n = n
        self._line: str | None = None
        self._whole: dict[str, bool] = {}  # piece -> shown whole
        self._runs: frozenset[str] | None = None
        self._written: tuple[Written, Written] | None = None

    def shows(self, piece: str) -> bool:
        """Whether these messages show ``piece`` (a text's words, space-joined) whole."""
        if (seen := self._whole.get(piece)) is None:
            if self._line is None:
                joined = "\n".join(self.texts)
                self._line = f" {' '.join(words(joined))} "
            if FIELD in piece:  # the field filled by any one word; each side, found plainly, first
                seen = all(f" {side} " in self._line for side in piece.split(f" {FIELD} ")) and (
                    re.search(f" {piece.replace(FIELD, '[a-z0-9]+')} ", self._line) is not None
                )
            else:
                seen = f" {piece} " in self._line
            self._whole[piece] = seen
        return seen

    def _pieces(self) -> tuple[Written, Written]:
        # found once a request: ``written`` of the config texts is keyed by all of them
        if self._written is None:
            self._written = code_written(self.n), written(self.extra, self.n)
        return self._written

    def fields(self) -> tuple[frozenset[tuple[str, str]], ...]:
        return tuple(w.fields for w in self._pieces())

    def pieces(self) -> tuple[tuple[str, ...], ...]:
        """Every piece of the prompt code, and of ``extra``, shown or not."""
        return tuple(written.pieces for written in self._pieces())

    def shown_pieces(self) -> tuple[str, ...]:
        """The pieces these messages show whole."""
        return tuple(piece for pieces in self.pieces() for piece in pieces if self.shows(piece))

    def instructs(self, gram: str) -> bool:
        """Whether ``gram`` is a run of a piece these messages show whole."""
        code, extra = self._pieces()
        if gram not in code.grams and gram not in extra.grams:  # most of a reply's runs: two set lookups
            return False
        return any(self.shows(piece) for pieces in (code, extra) for piece in pieces.by_gram.get(gram, ()))

    def instructing(self, grams: set[str]) -> set[str]:
        """Those of ``grams`` that ``instructs``: its set lookups a set at a time."""
        code, extra = self._pieces()
        return {g for g in (grams & code.grams) | (grams & extra.grams) if self.instructs(g)}

    @property
    def runs(self) -> frozenset[str]:
        """Every ``n``-word run of every piece shown whole."""
        if self._runs is None:
            self._runs = frozenset(
                g for pieces in self._pieces() for g in pieces.by_gram if self.instructs(g)
            )
        return self._runs


def shown(messages: Iterable[dict[str, Any]], extra: tuple[str, ...], n: int) -> Shown:
    texts = tuple(str(m.get("content") or "") for m in messages if m.get("role") != "assistant")
    return Shown(texts, extra, n)


def instruction_texts(messages: Iterable[dict[str, Any]], n: int) -> tuple[str, ...]:
    """The pieces of the prompt code of ``n`` words or more that ``messages`` show
    whole, as written: what a chat model is kept from copying while it decodes
    (``harness.models.llama_sampling.NoCopy``), as a reply copying them is refused."""
    prompt = shown(messages, (), n)
    pieces = (part.strip() for text in templates() for part in _HOLE.split(text))
    return tuple(dict.fromkeys(p for p in pieces if len(ws := words(p)) >= n and prompt.shows(" ".join(ws))))


def example_texts(schema: dict[str, Any]) -> tuple[str, ...]:
    """Every string of ``example_reply(schema)``, the worked example a base model is
    shown (``harness.models.completion_frame``): what a reply must not copy."""
    return tuple(text for _, text in strings(example_reply(schema)))


def written_ngrams(extra: tuple[str, ...], n: int) -> frozenset[str]:
    """Every ``n``-word run the harness could write: its prompt code's and ``extra``'s."""
    return code_written(n).grams | written(extra, n).grams


def written_pieces(extra: tuple[str, ...], n: int) -> tuple[str, ...]:
    """Every piece the harness could write (``written_ngrams``'s pieces)."""
    return code_written(n).pieces + written(extra, n).pieces


@dataclass(frozen=True)
class _SchemaFacts:
    grams: frozenset[str]  # the schemas' n-word runs, each JSON text as one text
    names: frozenset[str]  # the words of their field names
    choices: frozenset[str]
    spelled: frozenset[str]
    example: frozenset[str]  # the worked example's n-word runs
    pieces: tuple[str, ...]  # the schemas' texts of n - 1 words or more, words space-joined
    example_pieces: tuple[str, ...]


@functools.lru_cache(maxsize=256)
def _schema_facts(schemas: tuple[str, ...], n: int) -> _SchemaFacts:
    names: set[str] = set()
    choices: set[str] = set()
    parsed = [json.loads(text) for text in schemas]
    for schema in parsed:
        _schema_parts(schema, names, choices)
    # a base model is shown a worked example reply (harness.models.completion_frame): its text is not an answer
    shown = [text for schema in parsed for text in example_texts(schema)]
    texts = [text for schema in parsed for _, text in strings(schema)]
    return _SchemaFacts(
        grams=frozenset(g for text in schemas for g in ngrams(words(text), n)),
        names=frozenset(w for name in names for w in words(name)),
        choices=frozenset(choices),
        spelled=frozenset(name.lower() for name in names if _SPELLED.fullmatch(name)),
        example=frozenset(g for text in shown for g in ngrams(words(text), n)),
        pieces=_long(texts, n - 1),
        example_pieces=_long(shown, n - 1),
    )


def _long(texts: Iterable[str], least: int) -> tuple[str, ...]:
    """The words of each of ``texts`` with ``least`` words or more, space-joined, once each."""
    return tuple(dict.fromkeys(" ".join(ws) for text in texts if len(ws := words(text)) >= least))


def echo_check(
    messages: Iterable[dict[str, Any]],
    schemas: tuple[str, ...],
    extra: tuple[str, ...],
    n: int,
    *,
    lazy: bool = False,
) -> EchoCheck:
    """The check for a reply to ``messages`` under ``schemas`` (JSON schema texts).
    ``lazy``: its instruction runs are found as a reply's runs ask (a model call
    checks one reply; the analysis, which reads them all, takes them whole)."""
    facts = _schema_facts(schemas, n)
    prompt = shown(messages, extra, n)
    # lazy: the prompt's instruction runs and pieces are found as a reply's runs ask
    found: dict[str, Any] = (
        {"instructions": frozenset(), "shown": prompt}
        if lazy
        else {"instructions": prompt.runs, "instruction_pieces": prompt.shown_pieces()}
    )
    return EchoCheck(
        n=n,
        schema=facts.grams,
        names=facts.names,
        choices=facts.choices,
        spelled=facts.spelled,
        example=facts.example,
        fields=prompt.fields(),
        schema_pieces=facts.pieces,
        example_pieces=facts.example_pieces,
        **found,
    )

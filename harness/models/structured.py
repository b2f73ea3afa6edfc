"""Structured generation: ask for JSON, validate it, repair it, or give up.

The backend constrains decoding where it can (llama.cpp grammar, OpenAI
``response_format``). Whatever comes back is still parsed and validated here;
a reply that fails gets up to ``max_repairs`` more attempts, each shown the
validation error. A reply that validates but fills a field with that field's
label (its description, or its "- field: label" line in the prompt) fails
too, and so, with ``echo_words`` set, does one that copies that many words of
its instructions or schema, or writes field names for text (``harness.models.echo``).
A string a length cap cut (it reached the ``maxLength`` it was decoded
under, or it was left open when ``max_tokens`` ran out), and a published one
the model left mid-sentence, is ended at its last complete sentence and the
cut kept as a ``Cut``; a cut leaving no sentence fails like an invalid reply.
Only a validated Pydantic object leaves this module.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from harness.models.base import Completion, Message, ModelRequest
from harness.models.echo import EchoCheck, echo_check
from harness.models.sentences import PUBLISHED, Cut, sentence_cuts
from harness.store.records import Usage

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
# json.loads(text, strict=False), without building a decoder a reply: llama-cpp-python's
# JSON grammar lets raw newlines and tabs into strings, which strict JSON forbids.
_LENIENT = json.JSONDecoder(strict=False)


@dataclass
class StructuredResult(Generic[M]):
    value: M | None
    usage: Usage
    attempts: int
    raw: str
    errors: list[str] = field(default_factory=list)
    cuts: list[Cut] = field(default_factory=list)  # fields a length cap cut, ended at a sentence

    @property
    def ok(self) -> bool:
        return self.value is not None


# What decides whether a reply's JSON is closed: a string (whole, or left open at the
# end: no closing quote in the group) or a bracket outside one.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*("?)|[{}\[\]]', re.DOTALL)


def _close_truncated(text: str) -> str:
    """Close an object cut off by max_tokens: open string, then open brackets.
    Scanned token by token (``_JSON_TOKEN``), not character by character: it runs
    on every reply, and most of a reply is the text inside its strings."""
    stack: list[str] = []
    in_string = False
    for m in _JSON_TOKEN.finditer(text):
        token = m.group()
        if token[0] == '"':
            in_string = not m.group(1)
        elif token in "{[":
            stack.append("}" if token == "{" else "]")
        elif stack:
            stack.pop()
    closed = text + ('"' if in_string else "")
    return closed + "".join(reversed(stack))


def _unfenced(text: str) -> str:
    """``text`` stripped, without its Markdown code fences. The fence pattern is only
    tried where a fence is: on a reply without one it is slow (it tries each run of
    whitespace) and does nothing."""
    body = text.strip()
    return _FENCE.sub("", body) if "```" in body else body


def extract_json(text: str) -> Any:
    """Best-effort JSON from a model reply: fences, prose around it, trailing
    commas, and truncation are repaired; raises ``ValueError`` if none works."""
    body = _unfenced(text)
    start = body.find("{")
    if start < 0:
        raise ValueError("no JSON object in reply")
    for attempt in _repairs(body[start:]):
        try:
            return _LENIENT.decode(attempt)
        except json.JSONDecodeError:
            continue
    raise ValueError("reply is not valid JSON, even after repair")


def _repairs(body: str) -> Iterator[str]:
    """The texts ``extract_json`` tries, in order, each made only once the one
    before failed: nearly every reply parses as it is."""
    for candidate in (body[: body.rfind("}") + 1], body):
        for fixed in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            yield fixed
            yield _close_truncated(fixed)


def parse_reply(text: str, schema_cls: type[M]) -> M:
    """Parse and validate one reply; raises ValueError with a short reason."""
    return _validate(extract_json(text), schema_cls)


def _validate(data: Any, schema_cls: type[M]) -> M:
    try:
        return schema_cls.model_validate(data)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ValueError(reasons) from None


def json_schema(schema_cls: type[BaseModel]) -> dict[str, Any]:
    return schema_cls.model_json_schema()


@functools.lru_cache(maxsize=256)
def schema_text(schema_cls: type[BaseModel]) -> str:
    """The schema as JSON text, rendered once per class."""
    return json.dumps(json_schema(schema_cls))


# A label shorter than this ("one sentence") could be written by chance.
_LABEL_CHARS = 15
# A field as the agents' prompts label it: "- argument: the argument to publish, ..."
_FIELD_LINE = re.compile(r"^- ([a-z_]+): (.+)$", re.MULTILINE)


def _walk_schema(node: Any, names: set[str], descriptions: set[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("description"), str):
            descriptions.add(node["description"].strip().lower())
        if isinstance(node.get("properties"), dict):
            names.update(node["properties"])
        for value in node.values():
            _walk_schema(value, names, descriptions)
    elif isinstance(node, list):
        for value in node:
            _walk_schema(value, names, descriptions)


@functools.cache
def field_labels(schema_cls: type[BaseModel]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The schema's field names (nested ones too) and its descriptions long
    enough to count as labels, lowercased."""
    names: set[str] = set()
    descriptions: set[str] = set()
    _walk_schema(json_schema(schema_cls), names, descriptions)
    return frozenset(names), tuple(sorted(d for d in descriptions if len(d) >= _LABEL_CHARS))


def reply_labels(schema_cls: type[BaseModel], messages: list[Message]) -> tuple[str, ...]:
    """What this request told the reply's fields to hold: the schema's
    descriptions, and the last user message's "- field: label" lines for
    fields the schema has (a quoted debate line naming no field is not one)."""
    names, descriptions = field_labels(schema_cls)
    prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    lines = {" ".join(label.lower().split()) for name, label in _FIELD_LINE.findall(prompt) if name in names}
    return descriptions + tuple(sorted(line for line in lines if len(line) >= _LABEL_CHARS))


def _texts(node: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(node, str):
        return [(path, node)]
    if isinstance(node, dict):
        return [t for k, v in node.items() for t in _texts(v, f"{path}.{k}" if path else str(k))]
    if isinstance(node, list):
        return [t for i, v in enumerate(node) for t in _texts(v, f"{path}.{i}")]
    return []


def _label_in(texts: list[tuple[str, str]], labels: tuple[str, ...]) -> str | None:
    """Why a reply (its string fields ``texts``) is an echo, or None: a field that is
    mostly one of its request's field labels (the label is at least half its text).
    Small models fill a field with its label (docs/findings.md found a label in half
    of Gemma 3 270M's published turns); such a reply matches the schema but says
    nothing, so it is repaired like any invalid one. A long text that merely
    contains a label ("what remains unresolved is ...") passes."""
    for path, text in texts:
        lowered = " ".join(text.lower().split())  # SmolLM2 wrote "one or two  sentences", two spaces
        label = next((lb for lb in labels if lb in lowered and 2 * len(lb) >= len(lowered)), None)
        if label is not None:
            return f"{path}: repeats the field's label {label[:60]!r} instead of writing what it asks for"
    return None


def echoed_run(value: BaseModel, check: EchoCheck) -> str | None:
    """Why ``value`` is an echo of its instructions or schema, or None: its first
    text field (nested ones too) that copies ``check.n`` words of them, holds
    only field names or writes another field's name (``EchoCheck.why``). A light
    paraphrase of a label ("This is your argument to publish, two to four ...")
    keeps such a run, where ``_label_in`` needs the label to be most of the field."""
    return _run_in(_texts(value.model_dump(), ""), check)


def _run_in(texts: list[tuple[str, str]], check: EchoCheck) -> str | None:
    for path, text in texts:
        if why := check.why(path, text):
            return why
    return None


def request_schema(schema_cls: type[BaseModel], max_tokens: int) -> dict[str, Any]:
    """The schema a request decodes under: a fresh dict each call, so no
    backend can change another call's, from one cached rendering (pydantic's
    schema generation took a fifth of the scripted engine's time per call)."""
    return json.loads(_request_schema_text(schema_cls, max_tokens))  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=256)
def _decoded_schema(schema_cls: type[BaseModel], max_tokens: int) -> dict[str, Any]:
    """``request_schema``, parsed once and shared: only read (by ``end_at_sentences``),
    never handed to a backend."""
    return request_schema(schema_cls, max_tokens)


@functools.lru_cache(maxsize=256)
def _request_schema_text(schema_cls: type[BaseModel], max_tokens: int) -> str:
    return json.dumps(fit_schema(json_schema(schema_cls), max_tokens))


# Characters per token assumed for the fit: low for English prose, to leave
# room for the short tokens of names, digits and punctuation. With it, one
# round of Gemma 3 270M made 9 calls and no schema failure.
CHARS_PER_TOKEN = 2.5
# Tokens the JSON around the strings costs: braces, quotes, colons, commas
# and each key, plus a margin for the model's whitespace.
_TOKENS_PER_FIELD = 4
_TOKENS_MARGIN = 8


# Characters a reply's turn (a required published string, ``sentences.PUBLISHED``)
# keeps before its unpublished strings (a scratchpad, notes) keep theirs, when a
# budget is too small for both: room for a sentence. At ``max_tokens=96`` a
# proportional cut left drift's argument 114 characters, shorter than SmolLM2's
# usual first sentence: 112 of 200 thinking replies in six benchmark runs were
# cut there with no sentence ended, each a re-ask (the plan_pilot benchmark).
TURN_ROOM = 200


@dataclass
class _String:
    node: dict[str, Any]  # the schema's string node, its maxLength cut in place
    times: int  # how many times a reply may hold it
    cap: int  # its declared maxLength
    turn: bool  # a required published field: what the reply says as its turn

    @property
    def least(self) -> int:
        return int(self.node.get("minLength", 0))


def _strings(
    node: dict[str, Any], root: dict[str, Any], times: int, out: list[_String], turn: bool = False
) -> int:
    """Collect each bounded string node with how many times a reply may hold it; return key tokens."""
    if "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    for option in node.get("anyOf", []):
        if option.get("type") != "null":
            return _strings(option, root, times, out)  # an optional field is no turn
    kind = node.get("type")
    if kind == "string" and "maxLength" in node:
        out.append(_String(node, times, int(node["maxLength"]), turn))
    elif kind == "array" and "items" in node:
        return _strings(node["items"], root, times * int(node.get("maxItems", 1)), out)
    elif kind == "object":
        props, required = node.get("properties", {}), node.get("required", ())
        keys = sum(times * (_TOKENS_PER_FIELD + round(len(k) / CHARS_PER_TOKEN)) for k in props)
        return keys + sum(
            _strings(p, root, times, out, k in PUBLISHED and k in required) for k, p in props.items()
        )
    return 0


def fit_schema(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """``schema`` with each string's ``maxLength`` cut to its share of ``max_tokens``.

    A reply must close within its token budget. A field allowed more than
    the budget can write is where a small model spends every token: issue 14
    saw Gemma 3 270M spend all 256 tokens inside the first string field of
    its thinking reply, three attempts running, and no draft validate. The cut
    scales every string alike, then gives a turn its ``TURN_ROOM`` from the
    others' share, and never goes below a ``minLength``; it only shapes what
    the model decodes under, while validation keeps the declared limits.
    """
    fitted = copy.deepcopy(schema)
    strings: list[_String] = []
    overhead = _strings(fitted, fitted, 1, strings) + _TOKENS_MARGIN
    declared = sum(s.cap * s.times for s in strings)
    budget = (max_tokens - overhead) * CHARS_PER_TOKEN
    if declared <= budget or declared == 0:
        return schema
    scale = max(budget, 0) / declared
    for s in strings:
        s.node["maxLength"] = max(s.least, int(s.cap * scale))
    _make_turn_room(strings)
    return fitted


def _make_turn_room(strings: list[_String]) -> None:
    """Raise each turn cut below ``TURN_ROOM`` (or its declared cap, if less) towards
    it, with characters taken from the other strings' share above their minimum,
    in proportion: the reply may hold no more characters in all than before."""
    short = [(s, gap) for s in strings if s.turn and (gap := min(TURN_ROOM, s.cap) - s.node["maxLength"]) > 0]
    others = [s for s in strings if not s.turn]
    needed = sum(gap * s.times for s, gap in short)
    spare = sum((s.node["maxLength"] - s.least) * s.times for s in others)
    if not needed or not spare:
        return
    part = min(needed, spare)
    for s in others:
        s.node["maxLength"] -= math.ceil((s.node["maxLength"] - s.least) * part / spare)
    for s, gap in short:
        s.node["maxLength"] += int(gap * part / needed)


def min_tokens(schema: dict[str, Any]) -> int:
    """The least ``max_tokens`` that fits every string of ``schema`` at its ``minLength``."""
    strings: list[_String] = []
    overhead = _strings(schema, schema, 1, strings) + _TOKENS_MARGIN
    least = sum(s.least * s.times for s in strings)
    return overhead + math.ceil(least / CHARS_PER_TOKEN)


def _truncated(raw: str) -> bool:
    """Whether the reply's JSON was left open (``max_tokens`` ran out mid-object)."""
    body = _unfenced(raw)
    start = body.find("{")
    tail = body[start:] if start >= 0 else ""
    return _close_truncated(tail) != tail


def end_at_sentences(value: M, schema: dict[str, Any], raw: str) -> tuple[M, list[Cut]]:
    """``value`` with each string a cap cut (or published unfinished) ended at its last
    complete sentence, and the cuts (``harness.models.sentences``); ``schema`` is the
    one the reply was decoded under. Raises ``ValueError`` when a cut leaves no sentence."""
    data = value.model_dump()
    return _ended(value, data, _texts(data, ""), schema, raw)


def _ended(
    value: M, data: dict[str, Any], texts: list[tuple[str, str]], schema: dict[str, Any], raw: str
) -> tuple[M, list[Cut]]:
    """``end_at_sentences`` of ``value`` dumped as ``data`` (ended in place), its strings ``texts``."""
    cuts = sentence_cuts(data, schema, texts, raw, _truncated(raw))
    return (_validate(data, type(value)), cuts) if any(c.dropped_chars for c in cuts) else (value, cuts)


def _checked(
    value: M, raw: str, labels: tuple[str, ...], echo: EchoCheck | None, schema: dict[str, Any]
) -> tuple[M, list[Cut]]:
    """A parsed reply's checks after its schema's, on one dump of it: ``ValueError``
    if it echoes a label or its instructions (an echo first: its repair names what
    was echoed, not the unfinished sentence), else ``end_at_sentences``."""
    data = value.model_dump()
    texts = _texts(data, "")
    if why := _label_in(texts, labels) or (echo and _run_in(texts, echo)):
        raise ValueError(why)
    return _ended(value, data, texts, schema, raw)


def usage_of(completion: Completion) -> Usage:
    """One call's usage, as records keep it."""
    c = completion
    return Usage(
        input_tokens=c.input_tokens,
        output_tokens=c.output_tokens,
        latency_s=c.latency_s,
        calls=1,
        cost_usd=c.cost_usd,
        billed_usd=c.billed_usd,
        reasoning_tokens=c.reasoning_tokens,
        cache_read_tokens=c.cache_read_tokens,
        cache_write_tokens=c.cache_write_tokens,
    )


def generate_structured(
    call: Callable[[ModelRequest], Completion],
    messages: list[Message],
    schema_cls: type[M],
    *,
    temperature: float,
    max_tokens: int,
    seed: int,
    max_repairs: int,
    tags: dict[str, Any],
    echo_words: int = 0,
    instructions: Sequence[str] = (),
) -> StructuredResult[M]:
    """Ask for a ``schema_cls`` object, repairing up to ``max_repairs``.

    ``call`` runs one request against a model (it wraps retries and records them); it is passed
    in so this function stays free of retry and event concerns. ``echo_words`` > 0 rejects a
    reply copying that many words of its instructions (the prompt's text from the harness's
    prompt code or from ``instructions``, the run's config texts) or of its schema.
    """
    usage: Usage | None = None
    errors: list[str] = []
    labels = reply_labels(schema_cls, messages)
    echo = (
        echo_check(messages, (schema_text(schema_cls),), tuple(instructions), echo_words, lazy=True)
        if echo_words > 0
        else None
    )
    convo = list(messages)
    raw = ""
    decoded = _decoded_schema(schema_cls, max_tokens)
    for attempt in range(max_repairs + 1):
        request = ModelRequest(
            messages=convo,
            schema=request_schema(schema_cls, max_tokens),
            schema_name=schema_cls.__name__,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed + attempt,
            tags={**tags, "attempt": attempt},
        )
        completion = call(request)
        used = usage_of(completion)
        usage = used if usage is None else usage + used  # a first reply's own: no sum to build
        raw = completion.text
        try:
            value, cuts = _checked(parse_reply(raw, schema_cls), raw, labels, echo, decoded)
            return StructuredResult(value, usage, attempt + 1, raw, errors, cuts)
        except ValueError as exc:
            errors.append(str(exc))
            convo = repair(messages, raw, exc)
    return StructuredResult(None, usage if usage is not None else Usage(), max_repairs + 1, raw, errors)


def repair(messages: list[Message], raw: str, why: ValueError) -> list[Message]:
    """The conversation that asks again: the request, the invalid reply, and why it was."""
    again = (
        f"That reply was invalid ({why}). Reply again with only "
        "one JSON object that has exactly the required fields."
    )
    return [*messages, {"role": "assistant", "content": raw[:2000]}, {"role": "user", "content": again}]

"""Structured generation: ask for JSON, validate it, repair it, or give up.

The backend constrains decoding where it can (llama.cpp grammar, OpenAI
``response_format``). Whatever comes back is still parsed and validated here;
a reply that fails gets up to ``max_repairs`` more attempts, each shown the
validation error. Only a validated Pydantic object leaves this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from harness.models.base import Completion, Message, ModelRequest
from harness.store.records import Usage

M = TypeVar("M", bound=BaseModel)

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


@dataclass
class StructuredResult(Generic[M]):
    value: M | None
    usage: Usage
    attempts: int
    raw: str
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.value is not None


def _close_truncated(text: str) -> str:
    """Close an object cut off by max_tokens: open string, then open brackets."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    closed = text + ('"' if in_string else "")
    return closed + "".join(reversed(stack))


def extract_json(text: str) -> Any:
    """Best-effort JSON from a model reply: fences, prose around it, trailing
    commas, and truncation are repaired; raises ``ValueError`` if none works."""
    body = _FENCE.sub("", text.strip())
    start = body.find("{")
    if start < 0:
        raise ValueError("no JSON object in reply")
    candidates = [body[start : body.rfind("}") + 1], body[start:]]
    for candidate in candidates:
        for fixed in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            for attempt in (fixed, _close_truncated(fixed)):
                try:
                    # strict=False: llama-cpp-python's JSON grammar lets raw
                    # newlines and tabs into strings, which strict JSON forbids.
                    return json.loads(attempt, strict=False)
                except json.JSONDecodeError:
                    continue
    raise ValueError("reply is not valid JSON, even after repair")


def parse_reply(text: str, schema_cls: type[M]) -> M:
    """Parse and validate one reply; raises ValueError with a short reason."""
    data = extract_json(text)
    try:
        return schema_cls.model_validate(data)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ValueError(reasons) from None


def json_schema(schema_cls: type[BaseModel]) -> dict[str, Any]:
    return schema_cls.model_json_schema()


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
) -> StructuredResult[M]:
    """Ask for a ``schema_cls`` object, repairing up to ``max_repairs``.

    ``call`` runs one request against a model (it wraps retries and records them); it is passed
    in so this function stays free of retry and event concerns.
    """
    usage = Usage()
    errors: list[str] = []
    convo = list(messages)
    raw = ""
    for attempt in range(max_repairs + 1):
        request = ModelRequest(
            messages=convo,
            schema=json_schema(schema_cls),
            schema_name=schema_cls.__name__,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed + attempt,
            tags={**tags, "attempt": attempt},
        )
        completion = call(request)
        usage = usage + Usage(
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            latency_s=completion.latency_s,
            calls=1,
        )
        raw = completion.text
        try:
            value = parse_reply(raw, schema_cls)
            return StructuredResult(value, usage, attempt + 1, raw, errors)
        except ValueError as exc:
            errors.append(str(exc))
            convo = [
                *messages,
                {"role": "assistant", "content": raw[:2000]},
                {
                    "role": "user",
                    "content": f"That reply was invalid ({exc}). Reply again with only "
                    "one JSON object that has exactly the required fields.",
                },
            ]
    return StructuredResult(None, usage, max_repairs + 1, raw, errors)

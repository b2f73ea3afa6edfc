"""Chat messages rendered as a document a base model continues (``model.prompt_style=completion``).

A base model (Gemma 3 270M) was never tuned on a chat template; asked as a
chat it echoes its labels and instructions. As a document it sees a short
header, its task (the system message), one worked example (a request of the
same shape about another motion and a valid reply, derived from the schema
by ``harness.models.reply_example``), then the real request and an open
``Reply:`` line to continue. Repairs (an assistant reply and a user's fix
request) follow as further Request/Reply pairs.

The document is a pure function of the messages and the schema, so the run's
request hash (``harness.runtime.calls.request_sha``) changes whenever it does.
Its stable part (header, task, example and the request's first line) is what
the prefix cache saves, as the chat path saves the system prompt and header.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.models.echo import example_texts
from harness.models.reply_example import EXAMPLE_MOTION, example_reply

HEADER = "Requests to a debate assistant, each followed by its reply: one JSON object.\n\n"
REQUEST, REPLY = "Request:\n", "Reply:\n"
# where a free-text reply ends: the document's next section
STOP = ("\nRequest:", "\nTask:")


@dataclass(frozen=True)
class Frame:
    prompt: str  # the whole document, ending in an open reply
    stable: str  # its leading part shared by every call of the same agent and motion
    shown: tuple[str, ...] = ()  # the worked example's texts, which the reply must not copy


def worked_example(schema: dict[str, Any]) -> str:
    """A request about ``EXAMPLE_MOTION`` naming the schema's fields, then its reply."""
    props = schema.get("properties", {})
    fields = "".join(f"- {name}: {_label(prop)}\n" for name, prop in props.items())
    reply = json.dumps(example_reply(schema), ensure_ascii=False)
    return f"{REQUEST}Motion: {EXAMPLE_MOTION}\nWrite JSON with:\n{fields}\n{REPLY}{reply}\n\n"


def _label(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " or ".join(map(str, prop["enum"]))
    return str(prop.get("description") or prop.get("type") or "a value")


def render(messages: Sequence[dict[str, Any]], schema: dict[str, Any] | None) -> Frame:
    """The document for ``messages``; the worked example follows the task, when a schema is asked for."""
    parts = [HEADER]
    stable: str | None = None
    example = worked_example(schema) if schema else ""
    for message in messages:
        role, content = message.get("role"), str(message.get("content") or "").strip()
        if role == "system":
            parts.append(f"Task: {content}\n\n")
            continue
        if example:  # after the task, before the first request or reply
            parts.append(example)
            example = ""
        if role == "assistant":
            parts.append(f"{REPLY}{content}\n\n")
            continue
        if stable is None:
            first, newline, rest = content.partition("\n")
            stable = "".join(parts) + REQUEST + (first + newline if rest else "")
        parts.append(f"{REQUEST}{content}\n\n")
    parts.append(example + REPLY)
    prompt = "".join(parts)
    return Frame(prompt, stable if stable is not None else "", example_texts(schema) if schema else ())

"""A run's transcript, as the views (``VIEWS``) scripts and other tools read.

A run's *messages* are, in order: the opening message (name ``Topic``, the
run's motion), then every statement of the shared transcript and every public
record that ``MESSAGE_HOOKS`` turns into a message (a judge-refined debate's
evaluations), ordered by round, then by when they were written. A message's
name is its seat's alias (``Pro``), or for a role with no seat its role name
capitalised (``Judge``).

- ``str``: the messages as ``Name: content``, one blank line between them;
- ``str-all-except-first``: ``str`` without its first message, the opening
  one: only what the debaters and the judge said;
- ``list``: a JSON array of ``{"role": name, "content": content}``;
- ``dict``: one JSON object: ``run_id``, ``format``, ``topic``, ``final`` and
  ``messages`` (each with ``name``, ``content``, ``round``, ``seat``,
  ``kind``, ``phase``);
- ``final``: the last synthesis only (the last evaluation's synthesis, a
  panel's synthesis); a run with none raises ``NoFinal``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from harness.export.build import SHARED, public_records
from harness.store.reader import RunFolder
from harness.store.records import EvaluationRecord, Published


class NoFinal(ValueError):
    """The run has no synthesis for ``--as final`` to print."""


@dataclass
class Message:
    name: str  # the seat's alias, a seatless role's name capitalised, or "Topic"
    content: str
    round: int
    seat: str | None
    kind: str
    phase: str | None = None


def _evaluation_message(rec: EvaluationRecord) -> str:
    return f"{rec.evaluation}\nSynthesis{' (final)' if rec.final else ''}: {rec.synthesis}"


# record kind -> a public record's message text; kinds not named here are no message
MESSAGE_HOOKS: dict[str, Callable[[Any], str]] = {
    "evaluation": _evaluation_message,
    "verdict": lambda rec: f"{rec.winner or 'no winner'} wins: {rec.justification}",
}
# record kind -> the synthesis a public record holds, for --as final
FINAL_HOOKS: dict[str, Callable[[Any], str]] = {
    "evaluation": lambda rec: rec.synthesis,
    "synthesis": lambda rec: rec.text,
}


def messages(run: RunFolder) -> list[Message]:
    """The run's messages, the opening one first (see the module docstring)."""
    aliases = {seat.name: seat.alias for seat in run.layout.seats}
    said: list[tuple[int, datetime, Message]] = []
    for rec in run.of(SHARED):
        if isinstance(rec, Published):
            name = rec.alias or aliases.get(rec.team or "", rec.team or rec.role)
            kind = str(getattr(rec, "kind", "statement"))
            said.append((rec.round, rec.ts, Message(name, rec.text, rec.round, rec.team, kind, rec.phase)))
    for rec in public_records(run):
        kind = str(getattr(rec, "kind", ""))
        if (hook := MESSAGE_HOOKS.get(kind)) is not None:
            name = aliases.get(rec.team or "", rec.role.capitalize())
            said.append((rec.round, rec.ts, Message(name, hook(rec), rec.round, rec.team, kind)))
    opening = Message("Topic", run.manifest.topic or "(no topic recorded)", 0, None, "topic")
    return [opening, *(m for _, _, m in sorted(said, key=lambda item: item[:2]))]


def final_synthesis(run: RunFolder) -> str | None:
    """The last synthesis the run wrote, or None."""
    found = [r for r in public_records(run) if str(getattr(r, "kind", "")) in FINAL_HOOKS]
    if not found:
        return None
    last = max(found, key=lambda r: (r.round, r.ts))
    return FINAL_HOOKS[str(getattr(last, "kind", ""))](last)


def view_str(run: RunFolder, skip: int = 0) -> str:
    return "\n\n".join(f"{m.name}: {m.content}" for m in messages(run)[skip:]) + "\n"


def view_list(run: RunFolder) -> str:
    listed = [{"role": m.name, "content": m.content} for m in messages(run)]
    return json.dumps(listed, indent=2, ensure_ascii=False) + "\n"


def view_dict(run: RunFolder) -> str:
    doc = {
        "run_id": run.manifest.run_id,
        "format": run.manifest.format,
        "topic": run.manifest.topic,
        "final": final_synthesis(run),
        "messages": [asdict(m) for m in messages(run)],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def view_final(run: RunFolder) -> str:
    text = final_synthesis(run)
    if text is None:
        raise NoFinal(f"a {run.manifest.format} run has no synthesis to print (--as final)")
    return text + "\n"


# --as choice -> transcript view of a run
VIEWS: dict[str, Callable[[RunFolder], str]] = {
    "str": view_str,
    "str-all-except-first": lambda run: view_str(run, skip=1),
    "dict": view_dict,
    "list": view_list,
    "final": view_final,
}

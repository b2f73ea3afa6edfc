"""The checks that what is asked beside the debate stays beside it (two of
``Format.checks``, which ``verify`` runs): a behavioural probe and a
checkpoint interview each write only to their own seat's folder.

A probe or an interview is a fork of one seat's view; its reply must never
reach the debate. So, in any run of a format that asks them (asked or not):
- its record lies only in ``<seat>/probes.jsonl`` (``interviews.jsonl``) of
  the seat it names, under the id its position gives it, and that log holds
  nothing else;
- no record it wrote (role ``probe``, ``interview``: its prompts, replies,
  verdicts) lies in shared memory, in ``public/`` or in another seat's folder;
- no reply of it appears in a published statement.
Their events (a retry, a schema failure) are run events like any other and
live in ``events.jsonl``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.probes.catalog import PROBE_LOG, PROBE_ROLE, probe_id
from harness.probes.questionnaire import INTERVIEW_LOG, INTERVIEW_ROLE, interview_id
from harness.store.integrity import RunLogs
from harness.store.records import InterviewRecord, ProbeRecord, Published

MIN_LEAK_CHARS = 24  # as verify's isolation check: shorter replies match by coincidence


@dataclass(frozen=True)
class Aside:
    """One kind of question asked beside the debate: where its records go and what they hold."""

    role: str  # the role of its records, and its name in problems
    log: str  # the asked seat's own log
    record: type[Any]
    expected_id: Callable[[Any, str], str]  # the id a record's position gives it in a seat's log
    reply: Callable[[Any], str | None]


PROBES = Aside(
    PROBE_ROLE,
    PROBE_LOG,
    ProbeRecord,
    lambda r, seat: probe_id(r.round, seat, r.iteration, r.probe),
    lambda r: r.reply,
)
INTERVIEWS = Aside(
    INTERVIEW_ROLE,
    INTERVIEW_LOG,
    InterviewRecord,
    lambda r, seat: interview_id(r.round, seat, r.iteration, r.item),
    lambda r: r.answer,
)


def check_probes(run: RunLogs) -> list[str]:
    return check_aside(run, PROBES)


def check_interviews(run: RunLogs) -> list[str]:
    return check_aside(run, INTERVIEWS)


def check_aside(run: RunLogs, aside: Aside) -> list[str]:
    problems: list[str] = []
    replies: dict[str, str] = {}
    what = aside.role
    for name, records in run.files.items():
        owner = run.layout.owner(name)
        own_log = owner is not None and name == f"{owner}/{aside.log}.jsonl"
        for r in records:
            if isinstance(r, aside.record):
                if (reply := aside.reply(r)) and len(reply) >= MIN_LEAK_CHARS:
                    replies[reply] = r.id
                if owner is None or not own_log or r.team != owner:
                    problems.append(
                        f"{name}: {what} record {r.id} of team {r.team} outside {r.team}/{aside.log}.jsonl"
                    )
                elif r.id != aside.expected_id(r, owner):
                    problems.append(f"{name}: {what} record {r.id} has an id its position does not give")
            elif own_log:
                problems.append(f"{name}: {r.id} is a {getattr(r, 'kind', '?')} record, not a {what}")
            elif r.role == aside.role and name != "events.jsonl" and (owner is None or r.team != owner):
                problems.append(f"{name}: {r.id} was written by a {what} of team {r.team}")
    for r in run.of("shared_memory.jsonl"):
        if isinstance(r, Published):
            problems += [
                f"shared_memory.jsonl: {r.id} holds the reply of {what} {rid}"
                for reply, rid in replies.items()
                if reply in r.text
            ]
    return problems

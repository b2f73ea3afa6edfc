"""The drift format's probe check (one of ``Format.checks``, which ``verify``
runs): a probe writes only to its own team's folder.

A probe is a fork of one team's view; its reply must never reach the
debate. So, in any drift run (probed or not):
- a probe record lies only in ``<team>/probes.jsonl`` of the team it names,
  under the id its position gives it, and that log holds nothing else;
- no record a probe wrote (role ``probe``: its prompts, replies, verdicts)
  lies in shared memory, in ``public/`` or in another seat's folder;
- no probe reply appears in a published statement.
Probe events (a retry, a schema failure) are run events like any other and
live in ``events.jsonl``.
"""

from __future__ import annotations

from harness.probes.catalog import PROBE_LOG, PROBE_ROLE, probe_id
from harness.store.integrity import RunLogs
from harness.store.records import ProbeRecord, Published

MIN_LEAK_CHARS = 24  # as verify's isolation check: shorter replies match by coincidence


def check_probes(run: RunLogs) -> list[str]:
    problems: list[str] = []
    replies: dict[str, str] = {}
    for name, records in run.files.items():
        owner = run.layout.owner(name)
        own_log = owner is not None and name == f"{owner}/{PROBE_LOG}.jsonl"
        for r in records:
            if isinstance(r, ProbeRecord):
                if r.reply and len(r.reply) >= MIN_LEAK_CHARS:
                    replies[r.reply] = r.id
                if owner is None or not own_log or r.team != owner:
                    problems.append(
                        f"{name}: probe record {r.id} of team {r.team} outside {r.team}/probes.jsonl"
                    )
                elif r.id != probe_id(r.round, owner, r.iteration, r.probe):
                    problems.append(f"{name}: probe record {r.id} has an id its position does not give")
            elif own_log:
                problems.append(f"{name}: {r.id} is a {getattr(r, 'kind', '?')} record, not a probe")
            elif r.role == PROBE_ROLE and name != "events.jsonl" and (owner is None or r.team != owner):
                problems.append(f"{name}: {r.id} was written by a probe of team {r.team}")
    for r in run.of("shared_memory.jsonl"):
        if isinstance(r, Published):
            problems += [
                f"shared_memory.jsonl: {r.id} holds the reply of probe {rid}"
                for reply, rid in replies.items()
                if reply in r.text
            ]
    return problems

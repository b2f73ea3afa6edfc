"""One run folder in, its tidy tables out (runs, turns, drafts, personas,
events, public), each row tagged with ``run_id``. Seats, aliases and logs
come from the run's layout, so every format loads into the same columns.

- turns: every published statement of ``shared_memory.jsonl`` (a drift
  argument, a panel position, a moderated speech, a judge-refined turn),
  with its seat (``team``), alias, kind, phase and ``stage`` (the phase by
  its format's name), and the motion it was argued on where the motion moves.
- drafts: one row per draft. Where a seat keeps persona, thinking and
  critique logs (drift), the records sharing (round, team, iteration) are
  outer-joined, so an iteration whose draft failed validation still counts;
  a seat with notes only (panel) has one row per notes record, unjudged; a
  moderated speech draft is judged by its fact-check (``checker``); a
  judge-refined turn is its own draft.
- personas: a seat's persona records, or its role card (the panel's anchor),
  or else its stance on the motion (the anchor of formats with no persona).
- public: what roles with no seat wrote (summaries, decisions, syntheses,
  fact-checks, verdicts, evaluations, motion changes) and role cards.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from analysis.records_io import read_folder
from harness.store.reader import RunFolder
from harness.store.records import (
    ArgumentRecord,
    CritiqueRecord,
    DecisionRecord,
    DraftRecord,
    Envelope,
    EvaluationRecord,
    EventRecord,
    FactCheckRecord,
    Lineage,
    MotionRecord,
    PersonaRecord,
    PositionRecord,
    Published,
    RoleCardRecord,
    SpeechRecord,
    SummaryRecord,
    SynthesisRecord,
    ThinkingRecord,
    TurnRecord,
    Usage,
    VerdictRecord,
)
from harness.store.snapshot import counts_now

TABLES = ("runs", "turns", "drafts", "personas", "events", "public")
# Config keys that differ between replicates of one sweep cell, or do not
# change the debate at all; everything else defines the cell. A sweep names
# each replicate's folder (run_name), so the name must not split the cell, nor
# may the sweep folder's name (experiment_name): a place key, as the fingerprint
# has it; a control preset's runs are told apart by cfg.control.
REPLICATE_KEYS = (
    "cfg.seed",
    "cfg.model.seed",
    "cfg.replicate",
    "cfg.runs_root",
    "cfg.progress",
    "cfg.run_name",
    "cfg.experiment_name",
    "cfg.resume",
    "cfg.fork.parent",  # forks of several parents under one condition: replicates of one cell
)
# How much a run may spend and at what prices: never a condition of the experiment.
SPENDING = ("cfg.budget.", "cfg.prices.")
R = TypeVar("R", bound=Envelope)


def flatten(data: Any, prefix: str) -> dict[str, Any]:
    """Nested dicts to dotted keys; lists become JSON text (Parquet-friendly)."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}"))
        return out
    if isinstance(data, list):
        return {prefix: json.dumps(data)}
    return {prefix: data}


def cell_of(row: dict[str, Any]) -> tuple[str, str]:
    """(hash, label) of a run's sweep cell: its config less the replicate keys.
    The config holds ``format.name``, so runs of two formats never share a cell."""
    keys = sorted(
        k for k in row if k.startswith("cfg.") and k not in REPLICATE_KEYS and not k.startswith(SPENDING)
    )
    digest = hashlib.sha1(json.dumps([[k, row[k]] for k in keys], default=str).encode()).hexdigest()[:10]
    shown = [("model", "cfg.model.spec"), ("T", "cfg.llm.temperature")]
    if row.get("has_critic", True):  # a format with no critic still has critic settings in its config
        shown.append(("critic", "cfg.critic.name"))
    label = " ".join(f"{short}={row.get(key)}" for short, key in shown if key in row)
    return digest, label


def runs_row(run: RunFolder, rel: str) -> dict[str, Any]:
    manifest, layout = run.manifest, run.layout
    row: dict[str, Any] = {
        "run_id": rel,
        "run_name": manifest.run_id,
        "status": manifest.status,
        "stop_reason": manifest.stop_reason,
        "format": manifest.format,
        "seed": manifest.seed,
        "topic": manifest.topic,
        "started_at": manifest.started_at,
        "ended_at": manifest.ended_at,
        "wall_s": manifest.wall_s,
        # the layout's seat order: the order of turns within a round
        "seats": json.dumps([s.name for s in layout.seats]),
        "aliases": json.dumps([s.alias for s in layout.seats]),
        "n_seats": len(layout.seats),
        "has_critic": "critique" in layout.record_kinds,
    }
    row.update(flatten(counts_now(run.path, manifest).model_dump(), "counts"))  # a killed run's too
    row.update(flatten(manifest.model_specs, "spec"))
    row.update(flatten(run.config, "cfg"))
    row["cell"], row["cell_label"] = cell_of(row)
    row.update(lineage_columns(manifest.lineage))
    row["partial"] = bool(run.notes)
    row["read_notes"] = "\n".join(run.notes)
    return row


def lineage_columns(lineage: Lineage | None) -> dict[str, Any]:
    """A fork's parent, fork round and changed keys (JSON text); None on a run that is no fork."""
    return {
        "lineage.parent_run_id": lineage.parent_run_id if lineage else None,
        "lineage.parent": lineage.parent if lineage else None,
        "lineage.at_round": lineage.at_round if lineage else None,
        "lineage.changed": json.dumps(lineage.changed, sort_keys=True, default=str) if lineage else None,
    }


def _usage(u: Usage | None) -> dict[str, float]:
    u = u or Usage()
    return {"tokens": u.input_tokens + u.output_tokens, "latency_s": u.latency_s}


def _key(r: Any) -> tuple[int, str, int]:
    return (r.round, r.team, r.iteration)


def drafts_rows(
    personas: list[PersonaRecord], thinking: list[ThinkingRecord], critiques: list[CritiqueRecord]
) -> Iterator[dict[str, Any]]:
    by_p = {_key(p): p for p in personas}
    by_t = {_key(t): t for t in thinking}
    by_c = {_key(c): c for c in critiques}
    version = {p.id: p.version for p in personas}
    for key in sorted(set(by_t) | set(by_c)):
        t, c, p = by_t.get(key), by_c.get(key), by_p.get(key)
        usage = [_usage(r.usage if r else None) for r in (p, t, c)]
        yield {
            "round": key[0],
            "team": key[1],
            "iteration": key[2],
            "draft_id": t.id if t else None,
            "text": t.draft if t else None,
            "notes": t.scratchpad if t else None,
            "persona_version": version.get(t.persona_id or "") if t else None,
            "approved": c.is_approved if c else None,
            "feedback": c.feedback if c else None,
            "critic_fallback": c.fallback if c else None,
            "checker": "critic" if c else None,
            "revised": c.revised_argument is not None if c else None,
            "tokens": sum(u["tokens"] for u in usage),
            "latency_s": sum(u["latency_s"] for u in usage),
        }


def checked_drafts_rows(drafts: list[DraftRecord], checks: list[FactCheckRecord]) -> Iterator[dict[str, Any]]:
    """A moderated seat's drafts, each judged by its fact-check (if its stage was checked)."""
    by_draft = {c.draft_id: c for c in checks}
    for d in drafts:
        c = by_draft.get(d.id)
        usage = [_usage(d.usage), _usage(c.usage if c else None)]
        yield {
            "round": d.round,
            "team": d.team,
            "iteration": d.iteration,
            "draft_id": d.id,
            "text": d.text,
            "notes": d.notes,
            "persona_version": None,
            "approved": c.verdict == "pass" if c else None,
            "feedback": c.justification if c else None,
            "critic_fallback": c.fallback if c else None,
            "checker": "fact_checker" if c else None,
            "revised": None,
            "tokens": sum(u["tokens"] for u in usage),
            "latency_s": sum(u["latency_s"] for u in usage),
        }


def turn_as_draft(t: TurnRecord) -> dict[str, Any]:
    """A judge-refined turn: published as written, so it is its own (only) draft."""
    return {
        "round": t.round,
        "team": t.team,
        "iteration": t.iteration,
        "draft_id": t.id,
        "text": t.text,
        "notes": None,
        "persona_version": None,
        "approved": None,
        "feedback": None,
        "critic_fallback": None,
        "checker": None,
        "revised": None,
        **_usage(t.usage),
    }


def of_type(run: RunFolder, kind: type[R], prefix: str) -> list[R]:
    """Records of one type from the logs whose path starts with ``prefix``, in layout order."""
    return [
        r for name, recs in run.files.items() if name.startswith(prefix) for r in recs if isinstance(r, kind)
    ]


def draft_of(p: Published) -> str | None:
    """The record a statement was written from: a drift or moderated draft, a
    panel seat's notes; a judge-refined turn is its own draft."""
    if isinstance(p, ArgumentRecord | SpeechRecord):
        return p.draft_id
    if isinstance(p, TurnRecord):
        return p.id
    return p.notes_id if isinstance(p, PositionRecord) else None


def turn_row(i: int, p: Published, aliases: dict[str, str]) -> dict[str, Any]:
    argument = p if isinstance(p, ArgumentRecord) else None
    return {
        "order": i,
        "round": p.round,
        "team": p.team,
        "alias": p.alias or aliases.get(p.team or ""),
        "kind": getattr(p, "kind", None),
        "phase": p.phase,
        "stage": p.phase,
        "text": p.text,
        "source": getattr(p, "source", None),
        "draft_id": draft_of(p),
        "critique_id": argument.critique_id if argument else None,
        "fact_check_id": getattr(p, "fact_check_id", None),
        "motion": getattr(p, "motion", None),
        "original_motion": getattr(p, "original_motion", None),
        "model": p.model,
        "iteration": p.iteration,
        "ts": p.ts,
    }


def stance_row(seat: str, stance: str, topic: str | None) -> dict[str, Any]:
    """A seat with no persona and no role card is anchored to its stance on the motion."""
    text = f"{stance}: {topic}" if topic else stance
    return {
        "round": 0,
        "team": seat,
        "iteration": 0,
        "version": 1,
        "decision": "initial",
        "persona": text,
        "rationale": "",
        "kind": "stance",
    }


def persona_row(p: PersonaRecord | RoleCardRecord) -> dict[str, Any]:
    if isinstance(p, RoleCardRecord):  # a role card is its seat's anchor, never revised
        text = f"{p.name}. {p.expertise}. {p.mandate}"
        return {
            "round": p.round,
            "team": p.team,
            "iteration": p.iteration,
            "version": 1,
            "decision": "initial",
            "persona": text,
            "rationale": "",
            "kind": p.kind,
        }
    return {
        "round": p.round,
        "team": p.team,
        "iteration": p.iteration,
        "version": p.version,
        "decision": p.decision,
        "persona": p.persona,
        "rationale": p.rationale,
        "kind": p.kind,
    }


def event_row(e: EventRecord) -> dict[str, Any]:
    return {
        "round": e.round,
        "team": e.team,
        "role": e.role,
        "iteration": e.iteration,
        "event": e.event,
        "detail": e.detail,
        "error_kind": e.error.kind if e.error else None,
        "error_type": e.error.type if e.error else None,
        "data": json.dumps(e.data, default=str),
    }


PUBLIC_KINDS = (
    SummaryRecord,
    DecisionRecord,
    SynthesisRecord,
    RoleCardRecord,
    FactCheckRecord,
    Lineage,
    VerdictRecord,
    EvaluationRecord,
    MotionRecord,
)


def public_text(r: Envelope) -> str | None:
    """What a public record says, in one column: a decision's reason, a role
    card's persona, a check's or a verdict's justification, an evaluation, a motion."""
    if isinstance(r, DecisionRecord):
        return r.reason
    if isinstance(r, RoleCardRecord):
        return str(persona_row(r)["persona"])
    if isinstance(r, FactCheckRecord | VerdictRecord):
        return r.justification
    if isinstance(r, EvaluationRecord):
        return r.evaluation
    if isinstance(r, MotionRecord):
        return r.motion
    return getattr(r, "text", None)


def public_row(r: Envelope) -> dict[str, Any]:
    return {
        "round": r.round,
        "team": r.team,
        "role": r.role,
        "kind": getattr(r, "kind", None),
        "text": public_text(r),
        "decision": getattr(r, "decision", None),
        "tension": getattr(r, "tension", None),
        "close_reason": getattr(r, "close_reason", None),
        "fallback": getattr(r, "fallback", False),
        "model": r.model,
        "stage": getattr(r, "stage", None),
        "verdict": getattr(r, "verdict", None),
        "strike": getattr(r, "strike", None),
        "winner": getattr(r, "winner", None),
        "disqualified": getattr(r, "disqualified", None),
        "synthesis": getattr(r, "synthesis", None),
        "motion": getattr(r, "motion", None),
        "final": getattr(r, "final", None),
        **_usage(r.usage),
    }


def load_run_tables(run_dir: Path, rel: str) -> dict[str, pd.DataFrame]:
    """The tables of one run folder (``rel`` becomes its ``run_id``)."""
    run = read_folder(run_dir)
    shared = of_type(run, Published, "shared_memory.jsonl")
    cards = of_type(run, RoleCardRecord, "public/")
    personas: list[dict[str, Any]] = []
    drafts: list[dict[str, Any]] = []
    checks = of_type(run, FactCheckRecord, "public/")
    for seat in run.layout.seats:
        own = f"{seat.name}/"
        ps = of_type(run, PersonaRecord, own)
        anchor: list[PersonaRecord | RoleCardRecord] = [*ps] or [c for c in cards if c.team == seat.name]
        personas += [persona_row(p) for p in anchor] or [
            stance_row(seat.name, seat.stance, run.manifest.topic)
        ]
        ts, cs = of_type(run, ThinkingRecord, own), of_type(run, CritiqueRecord, own)
        drafts += list(drafts_rows(ps, ts, cs))
        drafts += list(
            checked_drafts_rows(of_type(run, DraftRecord, own), [c for c in checks if c.team == seat.name])
        )
    drafts += [turn_as_draft(t) for t in shared if isinstance(t, TurnRecord)]
    published = {draft_of(p) for p in shared} - {None}
    for d in drafts:
        d["published"] = d["draft_id"] in published
    aliases = {s.name: s.alias for s in run.layout.seats}
    public = [r for r in of_type(run, Envelope, "public/") if isinstance(r, PUBLIC_KINDS)]
    tables = {
        "runs": pd.DataFrame([runs_row(run, rel)]),
        "turns": pd.DataFrame([turn_row(i, p, aliases) for i, p in enumerate(shared)], columns=TURN_COLUMNS),
        "drafts": pd.DataFrame(drafts, columns=DRAFT_COLUMNS),
        "personas": pd.DataFrame(personas, columns=PERSONA_COLUMNS),
        "events": pd.DataFrame(
            [event_row(e) for e in of_type(run, EventRecord, "events.jsonl")], columns=EVENT_COLUMNS
        ),
        "public": pd.DataFrame([public_row(r) for r in public], columns=PUBLIC_COLUMNS),
    }
    for name in TABLES[1:]:
        tables[name].insert(0, "run_id", rel)
    return tables


TURN_COLUMNS = [
    "order",
    "round",
    "team",
    "alias",
    "kind",
    "phase",
    "stage",
    "text",
    "source",
    "draft_id",
    "critique_id",
    "fact_check_id",
    "motion",
    "original_motion",
    "model",
    "iteration",
    "ts",
]
DRAFT_COLUMNS = [
    "round",
    "team",
    "iteration",
    "draft_id",
    "text",
    "notes",
    "persona_version",
    "approved",
    "feedback",
    "critic_fallback",
    "checker",
    "revised",
    "tokens",
    "latency_s",
    "published",
]
PERSONA_COLUMNS = ["round", "team", "iteration", "version", "decision", "persona", "rationale", "kind"]
EVENT_COLUMNS = ["round", "team", "role", "iteration", "event", "detail", "error_kind", "error_type", "data"]
PUBLIC_COLUMNS = [
    "round",
    "team",
    "role",
    "kind",
    "text",
    "decision",
    "tension",
    "close_reason",
    "fallback",
    "model",
    "stage",
    "verdict",
    "strike",
    "winner",
    "disqualified",
    "synthesis",
    "motion",
    "final",
    "tokens",
    "latency_s",
]

"""One run folder in, its five tidy tables out (runs, turns, drafts,
personas, events), each row tagged with ``run_id``.

A draft row is one critique iteration: the persona, thinking and critique
records that share (round, team, iteration), outer-joined, so an iteration
whose draft failed validation still counts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.records_io import TEAMS, read_config, read_log, read_manifest
from harness.store.records import (
    ArgumentRecord,
    CritiqueRecord,
    EventRecord,
    PersonaRecord,
    ThinkingRecord,
    Usage,
)

TABLES = ("runs", "turns", "drafts", "personas", "events")
# Config keys that differ between replicates of one sweep cell, or do not
# change the debate at all; everything else defines the cell.
REPLICATE_KEYS = ("cfg.seed", "cfg.model.seed", "cfg.replicate", "cfg.runs_root", "cfg.progress")


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
    """(hash, label) of a run's sweep cell: its config less the replicate keys."""
    keys = sorted(k for k in row if k.startswith("cfg.") and k not in REPLICATE_KEYS)
    digest = hashlib.sha1(json.dumps([[k, row[k]] for k in keys], default=str).encode()).hexdigest()[:10]
    label = " ".join(
        f"{short}={row.get(key)}"
        for short, key in (
            ("model", "cfg.model.spec"),
            ("T", "cfg.llm.temperature"),
            ("critic", "cfg.critic.name"),
        )
        if key in row
    )
    return digest, label


def runs_row(run_dir: Path, rel: str, notes: list[str]) -> dict[str, Any]:
    manifest = read_manifest(run_dir)
    row: dict[str, Any] = {
        "run_id": rel, "run_name": manifest.run_id, "status": manifest.status,
        "stop_reason": manifest.stop_reason, "format": manifest.format, "seed": manifest.seed,
        "topic": manifest.topic, "started_at": manifest.started_at, "ended_at": manifest.ended_at,
        "wall_s": manifest.wall_s,
    }  # fmt: skip
    row.update(flatten(manifest.counts.model_dump(), "counts"))
    row.update(flatten(manifest.model_specs, "spec"))
    row.update(flatten(read_config(run_dir), "cfg"))
    row["cell"], row["cell_label"] = cell_of(row)
    row["partial"] = bool(notes)
    row["read_notes"] = "\n".join(notes)
    return row


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
            "round": key[0], "team": key[1], "iteration": key[2],
            "draft_id": t.id if t else None, "text": t.draft if t else None,
            "persona_version": version.get(t.persona_id or "") if t else None,
            "approved": c.is_approved if c else None, "feedback": c.feedback if c else None,
            "critic_fallback": c.fallback if c else None,
            "revised": c.revised_argument is not None if c else None,
            "tokens": sum(u["tokens"] for u in usage), "latency_s": sum(u["latency_s"] for u in usage),
        }  # fmt: skip


def load_run_tables(run_dir: Path, rel: str) -> dict[str, pd.DataFrame]:
    """The five tables of one run folder (``rel`` becomes its ``run_id``)."""
    notes: list[str] = []
    shared = [r for r in read_log(run_dir / "shared_memory.jsonl", notes) if isinstance(r, ArgumentRecord)]
    events = [r for r in read_log(run_dir / "events.jsonl", notes) if isinstance(r, EventRecord)]
    personas, drafts = [], []
    for team in TEAMS:
        ps = [r for r in read_log(run_dir / team / "persona.jsonl", notes) if isinstance(r, PersonaRecord)]
        ts = [r for r in read_log(run_dir / team / "thinking.jsonl", notes) if isinstance(r, ThinkingRecord)]
        cs = [r for r in read_log(run_dir / team / "critique.jsonl", notes) if isinstance(r, CritiqueRecord)]
        personas += ps
        drafts += list(drafts_rows(ps, ts, cs))
    published = {a.draft_id for a in shared}
    turns = [
        {
            "order": i,
            "round": a.round,
            "team": a.team,
            "text": a.text,
            "source": a.source,
            "draft_id": a.draft_id,
            "critique_id": a.critique_id,
            "model": a.model,
            "iteration": a.iteration,
            "ts": a.ts,
        }  # fmt: skip
        for i, a in enumerate(shared)
    ]
    for d in drafts:
        d["published"] = d["draft_id"] in published
    tables = {
        "runs": pd.DataFrame([runs_row(run_dir, rel, notes)]),
        "turns": pd.DataFrame(turns, columns=TURN_COLUMNS),
        "drafts": pd.DataFrame(drafts, columns=DRAFT_COLUMNS),
        "personas": pd.DataFrame([persona_row(p) for p in personas], columns=PERSONA_COLUMNS),
        "events": pd.DataFrame([event_row(e) for e in events], columns=EVENT_COLUMNS),
    }
    for name in TABLES[1:]:
        tables[name].insert(0, "run_id", rel)
    return tables


def persona_row(p: PersonaRecord) -> dict[str, Any]:
    return {
        "round": p.round, "team": p.team, "iteration": p.iteration, "version": p.version,
        "decision": p.decision, "persona": p.persona, "rationale": p.rationale,
    }  # fmt: skip


def event_row(e: EventRecord) -> dict[str, Any]:
    return {
        "round": e.round, "team": e.team, "role": e.role, "iteration": e.iteration, "event": e.event,
        "detail": e.detail, "error_kind": e.error.kind if e.error else None,
        "error_type": e.error.type if e.error else None, "data": json.dumps(e.data, default=str),
    }  # fmt: skip


TURN_COLUMNS = [
    "order",
    "round",
    "team",
    "text",
    "source",
    "draft_id",
    "critique_id",
    "model",
    "iteration",
    "ts",
]
DRAFT_COLUMNS = [
    "round", "team", "iteration", "draft_id", "text", "persona_version", "approved", "feedback",
    "critic_fallback", "revised", "tokens", "latency_s", "published",
]  # fmt: skip
PERSONA_COLUMNS = ["round", "team", "iteration", "version", "decision", "persona", "rationale"]
EVENT_COLUMNS = ["round", "team", "role", "iteration", "event", "detail", "error_kind", "error_type", "data"]

"""``baseline_similarity``: how close a seat's turns are to what the same model
argues with no persona at all, round by round (issue 30, item 5).

After "Persistent Personas" (EACL 2026): a persona that fades makes the
model's turns converge toward its no-persona baseline, so this similarity
rises. The baseline is a run of ``experiment=control_no_persona``
(``format.persona=false``) on the same topic.

It is a cross-run signal: a turn's value depends on which other runs were
analysed with it. So it lives in its own table (``baseline_table``, written as
``_analysis/baseline_similarity.parquet``), outside the registry and the
drift index, which stay exactly as they were.

``round_similarity`` takes plain texts (a seat's turn per round, the baseline's
turns per round), so spliced transcripts can be scored without run folders.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.cache import VectorStore
from analysis.compute import EMBEDDINGS_FILE  # the signals' embedding cache: turns are embedded once
from analysis.embed import DEFAULT_EMBEDDER, CachedEmbedder, Embedder, get_embedder
from analysis.load import Tables

CONTROL = "no_persona"  # cfg.control of a baseline run (experiment=control_no_persona)
# How closely the baseline runs a seat was compared with match its setting, best first;
# every level also has the seat's format and topic.
MATCHES = ("model+temperature", "model", "topic")
COLUMNS = [
    "run_id",
    "round",
    "team",
    "order",
    "baseline_similarity",
    "baseline_match",  # one of MATCHES; None: no baseline run on this topic
    "baseline_runs",  # how many baseline runs the turn was compared with
    "baseline_scope",  # "round": their turns of this round; "all": every turn (the round is missing)
]


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1, norms)


def similarities(
    turns: np.ndarray, rounds: Sequence[int], baseline: dict[int, np.ndarray]
) -> tuple[np.ndarray, list[str]]:
    """For each turn vector (a row of ``turns``, argued in ``rounds[i]``): its mean
    cosine to the baseline's vectors of that round, or to all of them when the
    baseline has none at that round; and which it was ("round" or "all").
    NaN throughout when the baseline has no turn at all."""
    pool = [v for v in baseline.values() if len(v)]
    if not pool or not len(turns):
        return np.full(len(turns), math.nan), ["none"] * len(turns)
    every = _unit(np.concatenate(pool))
    unit = _unit(np.asarray(turns, dtype=float))
    out, scope = np.empty(len(unit)), []
    for i, round_ in enumerate(rounds):
        here = baseline.get(int(round_))
        same = _unit(here) if here is not None and len(here) else every
        out[i] = float((same @ unit[i]).mean())
        scope.append("round" if same is not every else "all")
    return out, scope


def round_similarity(
    seat: Sequence[str | None],
    baseline: Sequence[Sequence[str]],
    embedder: Embedder | str = DEFAULT_EMBEDDER,
) -> list[float]:
    """``seat[i]``: the seat's turn at round i + 1 (None: it has none);
    ``baseline[i]``: the baseline's turns at round i + 1, over its runs.
    Per round, the mean cosine of the seat's turn to the baseline's turns of
    that round (to every baseline turn when that round has none): rising
    values are a persona converging to the baseline. NaN where the seat has
    no turn, and everywhere when the baseline has no turn at all; never 0."""
    out = [math.nan] * len(seat)
    present = {i + 1: t for i, t in enumerate(seat) if t is not None}
    if not present or not any(len(r) for r in baseline):
        return out
    model = get_embedder(embedder) if isinstance(embedder, str) else embedder
    texts = list(dict.fromkeys([*(t for r in baseline for t in r), *present.values()]))
    vectors = dict(zip(texts, np.asarray(model.encode(texts), dtype=float), strict=True))
    base = {i + 1: np.array([vectors[t] for t in r]) for i, r in enumerate(baseline) if len(r)}
    values, _ = similarities(np.array([vectors[t] for t in present.values()]), list(present), base)
    for round_, value in zip(present, values, strict=True):
        out[round_ - 1] = float(value)
    return out


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def is_baseline(row: dict[str, Any]) -> bool:
    """A no-persona run: ``format.persona=false`` (its control label is ``no_persona``)."""
    persona = row.get("cfg.format.persona")
    return (not _unset(persona) and not bool(persona)) or row.get("cfg.control") == CONTROL


def seat_settings(tables: Tables) -> dict[str, dict[str, tuple[Any, Any]]]:
    """run_id -> team -> (model, temperature) of each seat that published: the
    model its turns name, the temperature its role's override gives (a drift
    seat's role is its team), else the run's ``llm.temperature``."""
    runs = {row["run_id"]: row for row in tables.runs.to_dict("records")}
    out: dict[str, dict[str, tuple[Any, Any]]] = {}
    for (run_id, team), group in tables.turns.groupby(["run_id", "team"]):
        row = runs.get(run_id, {})
        models = group.model.dropna()
        model = models.mode().iloc[0] if len(models) else row.get("cfg.model.spec")
        own = row.get(f"cfg.roles.{team}.temperature")
        temperature = row.get("cfg.llm.temperature") if _unset(own) else own
        out.setdefault(str(run_id), {})[str(team)] = (model, temperature)
    return out


def match(
    run_id: str, team: str, candidates: list[str], settings: dict[str, dict[str, tuple[Any, Any]]]
) -> tuple[list[str], str | None]:
    """The baseline runs a seat is compared with, among ``candidates`` (the
    baseline runs of its format and topic), and how closely they match
    (``MATCHES``): the same model and temperature if any has them, else the same
    model, else all of them. Never the seat's own run."""
    same = [b for b in candidates if b != run_id]
    if not same:
        return [], None
    mine = settings.get(run_id, {}).get(team, (None, None))

    def of(b: str) -> tuple[Any, Any]:  # the baseline's seat of the same team, else another of its seats
        seats = settings.get(b, {})
        return seats.get(team) or next(iter(seats.values()), (None, None))

    for level, keep in ((MATCHES[0], lambda b: of(b) == mine), (MATCHES[1], lambda b: of(b)[0] == mine[0])):
        found = [b for b in same if keep(b)]
        if found:
            return found, level
    return same, MATCHES[2]


def baseline_table(
    tables: Tables, *, embedder: str = DEFAULT_EMBEDDER, progress: bool = False
) -> pd.DataFrame:
    """One row per published turn of every run (``COLUMNS``) when some run analysed
    is a no-persona baseline; empty when none is. A turn with no matching baseline
    has NaN. A baseline run is compared with the other baseline runs (never itself):
    their similarity is the level a persona converging to the baseline would reach."""
    runs = {r["run_id"]: r for r in tables.runs.to_dict("records")}
    turns = tables.turns
    topics: dict[tuple[Any, Any], list[str]] = {}
    for run_id, row in runs.items():
        if is_baseline(row):
            topics.setdefault((row.get("format"), row.get("topic")), []).append(run_id)
    if not topics or turns.empty:
        return pd.DataFrame(columns=COLUMNS)
    settings = seat_settings(tables)
    seats = {(str(r), str(t)): g for (r, t), g in turns.groupby(["run_id", "team"])}
    by_run = {str(r): g for r, g in turns.groupby("run_id")}
    plans = {}
    for run_id, team in seats:
        row = runs.get(run_id, {})
        plans[(run_id, team)] = match(
            run_id, team, topics.get((row.get("format"), row.get("topic")), []), settings
        )
    store = VectorStore(tables.cache_dir / EMBEDDINGS_FILE) if tables.cache_dir else None
    model = CachedEmbedder(embedder, store, progress=progress)
    # embed only what is compared: the seats that have a baseline, and the baselines' turns
    needed = {b for ids, _ in plans.values() for b in ids} | {r for (r, _), (ids, _) in plans.items() if ids}
    try:
        model.prefetch(turns.text[turns.run_id.isin(needed)])
        frames = [
            _seat_rows(seats[key], team_pool(by_run, ids, key[1]), level, len(ids), model)
            for key, (ids, level) in plans.items()
        ]
    finally:
        model.release()
    return pd.concat(frames, ignore_index=True)[COLUMNS].sort_values(["run_id", "order"], ignore_index=True)


def team_pool(by_run: dict[str, pd.DataFrame], ids: list[str], team: str) -> pd.DataFrame:
    """The turns of the baseline runs ``ids``: their seat of ``team`` when they have one, else all."""
    frames = [by_run[b] for b in ids if b in by_run]  # a baseline that published nothing has none
    if not frames:
        return pd.DataFrame(columns=["round", "team", "text"])
    pool = pd.concat(frames)
    return pool[pool.team == team] if pool.team.eq(team).any() else pool


def _seat_rows(
    mine: pd.DataFrame, pool: pd.DataFrame, level: str | None, n_runs: int, model: CachedEmbedder
) -> pd.DataFrame:
    """One seat's turns with their similarity to the baseline turns ``pool``."""
    rows = mine[["run_id", "round", "team", "order"]].copy()
    if pool.empty:
        return rows.assign(
            baseline_similarity=math.nan, baseline_match=None, baseline_runs=0, baseline_scope=None
        )
    base = {int(r): model.encode(list(g.text)) for r, g in pool.groupby("round")}
    values, scope = similarities(model.encode(list(mine.text)), list(mine["round"]), base)
    return rows.assign(
        baseline_similarity=values, baseline_match=level, baseline_runs=n_runs, baseline_scope=scope
    )

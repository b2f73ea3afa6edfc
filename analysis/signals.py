"""Per-turn and per-draft signals for every run in a ``Tables``.

For each run: score every distinct text once (``analysis.text``), embed the
turns, drafts and persona anchors in one batch, then relate each text to the
agent's history, the other seats and the anchor (``analysis.semantic``).

Seats are ordered within a round as the run's layout lists them. "The other
seats" of a turn is the latest turn any other seat published before it (with
two seats: the opponent's last turn), so the same signals hold for any number
of seats and any format.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from analysis.embed import Embedder
from analysis.semantic import against, big5_proxy, history_signals
from analysis.text import text_signals
from harness.store.copies import repeat_share, similarity

BASELINE_TURNS = 2  # an agent's "opening": its first published turns
Vec = Callable[[str], np.ndarray]


def team_rank(runs_row: dict[str, Any]) -> dict[str, int]:
    """Each seat's index within a round: its place in the run's layout."""
    seats = runs_row.get("seats")
    order = json.loads(seats) if isinstance(seats, str) else []
    return {seat: i for i, seat in enumerate(order)}


def anchor_text(personas: pd.DataFrame, team: str) -> str | None:
    """The seat's persona anchor: its first persona record (a panel seat's role card)."""
    rows = personas[personas.team == team].sort_values(["round", "iteration"])
    return None if rows.empty else str(rows.persona.iloc[0])


def embed_pool(turns: pd.DataFrame, drafts: pd.DataFrame, personas: pd.DataFrame) -> list[str]:
    """Every distinct text a run's signals embed: turns, drafts, persona anchors, motions."""
    teams = sorted(set(turns.team) | set(drafts.team))
    anchors = [a for a in (anchor_text(personas, t) for t in teams) if a]
    motions = [m for col in ("motion", "original_motion") if col in turns for m in turns[col].dropna()]
    return list(dict.fromkeys([*turns.text, *drafts.text.dropna(), *anchors, *motions]))


class Turn(NamedTuple):
    pos: tuple[int, int]  # (round, index of the seat within the round)
    text: str


class RunTexts:
    """One run's texts, embeddings and turn order, shared by the row builders."""

    def __init__(
        self,
        turns: pd.DataFrame,
        drafts: pd.DataFrame,
        personas: pd.DataFrame,
        rank: dict[str, int],
        embedder: Embedder,
    ) -> None:
        self.rank = rank
        self.turns = turns.sort_values("order").reset_index(drop=True)
        self.turns["pos"] = [
            (r, rank.get(t, 0)) for r, t in zip(self.turns["round"], self.turns.team, strict=True)
        ]
        # per seat, its turns' positions (sorted) and texts: "latest before" is a bisection
        self.timeline: dict[str, tuple[list[tuple[int, int]], list[str]]] = {}
        for team, group in self.turns.groupby("team"):
            self.timeline[str(team)] = (list(group.pos), list(group.text))
        teams = sorted(set(turns.team) | set(drafts.team))
        self.anchors = {t: anchor_text(personas, t) for t in teams}
        pool = embed_pool(self.turns, drafts, personas)
        self.emb = embedder.encode(pool) if pool else np.zeros((0, 1), dtype=np.float32)
        self.index = {text: i for i, text in enumerate(pool)}

    def vec(self, text: str) -> np.ndarray:
        return self.emb[self.index[text]]

    def last_before(self, team: str, pos: tuple[int, int]) -> Turn | None:
        """The latest turn of ``team`` strictly before ``pos``, or None."""
        positions, texts = self.timeline.get(team, ([], []))
        i = bisect_left(positions, pos)
        return Turn(positions[i - 1], texts[i - 1]) if i else None

    def others_before(self, team: str, pos: tuple[int, int]) -> Turn | None:
        """The latest turn of any other seat strictly before ``pos``, or None."""
        found = [r for r in (self.last_before(t, pos) for t in self.timeline if t != team) if r is not None]
        return max(found, key=lambda r: r.pos) if found else None

    def relate(self, text: str, other: Turn | None) -> dict[str, float]:
        if other is None:
            return against(text, self.vec(text), None, None)
        return against(text, self.vec(text), other.text, self.vec(other.text))

    def motion_distance(self, motion: object, original: object) -> float:
        """How far the motion a turn argued has moved from the original (judge_refine)."""
        if not isinstance(motion, str) or not isinstance(original, str):
            return math.nan
        if motion == original:  # exactly 0: a vector's dot with itself is 1 only to float32 rounding
            return 0.0
        return max(0.0, float(1.0 - self.vec(motion) @ self.vec(original)))

    def anchor_sim(self, text: str, team: str) -> float:
        anchor = self.anchors.get(team)
        return float(self.vec(text) @ self.vec(anchor)) if anchor else math.nan


def copied(texts: list[str]) -> list[float]:
    """Each turn's share of word 5-grams found in the earlier turn it repeats most (any
    seat's; 0 for the first): the measure the run's ``copy`` events apply a threshold to."""
    return [max((similarity(t, e) for e in texts[:i]), default=0.0) for i, t in enumerate(texts)]


def turn_rows(ctx: RunTexts, texts: Callable[[str], dict[str, float]]) -> list[dict[str, float]]:
    turns = ctx.turns
    rows: list[dict[str, float]] = [
        {"copied": c, "repeated": repeat_share(t)}
        for c, t in zip(copied(list(turns.text)), turns.text, strict=True)
    ]
    for _, group in turns.groupby("team"):
        hist = history_signals(list(group.text), np.stack([ctx.vec(t) for t in group.text]))
        for j, i in enumerate(group.index):
            rows[i].update({k: v[j] for k, v in hist.items()})
    for i, turn in enumerate(turns.itertuples()):
        rival = ctx.relate(turn.text, ctx.others_before(turn.team, turn.pos))
        rows[i].update(
            sem_anchor_sim=ctx.anchor_sim(turn.text, turn.team),
            sem_opponent_sim=rival["sim"],
            lsm_opponent=rival["lsm"],
            **texts(turn.text),
            motion_distance=ctx.motion_distance(
                getattr(turn, "motion", None), getattr(turn, "original_motion", None)
            ),
        )
    return rows


def draft_rows(ctx: RunTexts, drafts: pd.DataFrame, texts: Callable[[str], dict[str, float]]) -> list[dict]:
    rows = []
    for d in drafts.itertuples():
        pos = (d.round, ctx.rank.get(d.team, 0))
        own = ctx.relate(d.text, ctx.last_before(d.team, pos))
        rival = ctx.relate(d.text, ctx.others_before(d.team, pos))
        rows.append(
            {
                "sem_anchor_sim": ctx.anchor_sim(d.text, d.team),
                "sem_prev_sim": own["sim"],
                "ngram_rep_prev": own["ngram"],
                "sem_opponent_sim": rival["sim"],
                "lsm_opponent": rival["lsm"],
                **texts(d.text),
            }
        )
    return rows


def add_anchor_shift(sig: pd.DataFrame, teams: pd.Series, baseline: dict[str, float]) -> None:
    sig["sem_anchor_shift"] = sig["sem_anchor_sim"] - teams.map(baseline).astype(float).to_numpy()


def add_big5(ctx: RunTexts, sig: pd.DataFrame, texts: pd.Series, embedder: Embedder) -> None:
    if len(texts):
        for name, values in big5_proxy(np.stack([ctx.vec(t) for t in texts]), embedder).items():
            sig[name] = values


def run_signals(
    turns: pd.DataFrame,
    drafts: pd.DataFrame,
    personas: pd.DataFrame,
    rank: dict[str, int],
    embedder: Embedder,
    texts: Callable[[str], dict[str, float]] = text_signals,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Text signals of one run: (per published turn, per draft), keyed like the tables."""
    drafts = drafts[drafts.text.notna()].reset_index(drop=True)
    ctx = RunTexts(turns, drafts, personas, rank, embedder)
    tsig = pd.DataFrame(turn_rows(ctx, texts))
    dsig = pd.DataFrame(draft_rows(ctx, drafts, texts))
    teams = sorted(set(ctx.turns.team))
    baseline = {
        t: float(tsig[(ctx.turns.team == t).to_numpy()].sem_anchor_sim.head(BASELINE_TURNS).mean())
        for t in teams
    }
    if len(tsig):
        add_anchor_shift(tsig, ctx.turns.team, baseline)
        add_big5(ctx, tsig, ctx.turns.text, embedder)
    if len(dsig):
        add_anchor_shift(dsig, drafts.team, baseline)
        add_big5(ctx, dsig, drafts.text, embedder)
    tsig.insert(0, "order", ctx.turns["order"].to_numpy())
    dsig.insert(0, "iteration", drafts.iteration.to_numpy())
    for frame, sig in ((ctx.turns, tsig), (drafts, dsig)):
        sig.insert(0, "team", frame.team.to_numpy())
        sig.insert(0, "round", frame["round"].to_numpy())
    return tsig, dsig

"""Signals that relate a text to others: persona anchor, the agent's own
history, the opponent, and the IPIP personality items.

Input is one run's turns (or drafts) with their embeddings; ``position``
orders turns within a run: (round, index of the team in the round).
"""

from __future__ import annotations

import math
from functools import cache, lru_cache

import numpy as np

from analysis.embed import Embedder
from analysis.lexicons import ipip_items
from analysis.text import function_profile, style_matching, tokens

TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")


@lru_cache(maxsize=8192)  # a turn is compared with several others
def trigrams(text: str) -> frozenset[tuple[str, ...]]:
    toks = tokens(text)
    return frozenset(tuple(toks[i : i + 3]) for i in range(len(toks) - 2))


@lru_cache(maxsize=8192)
def profile(text: str) -> dict[str, float]:
    return function_profile(tokens(text))


def overlap(
    grams: frozenset[tuple[str, ...]], seen: set[tuple[str, ...]] | frozenset[tuple[str, ...]]
) -> float:
    return len(grams & seen) / len(grams) if grams else math.nan


@cache  # keyed by the embedder object, which get_embedder builds once per spec
def _ipip_matrix(embedder: Embedder) -> tuple[np.ndarray, dict[str, tuple[slice, slice]]]:
    """All IPIP items embedded once; per trait, the rows of its +/- items."""
    texts: list[str] = []
    spans = {}
    for trait in TRAITS:
        keyed = ipip_items()[trait]
        start = len(texts)
        texts += keyed["+"]
        mid = len(texts)
        texts += keyed["-"]
        spans[trait] = (slice(start, mid), slice(mid, len(texts)))
    return embedder.encode(texts), spans


def big5_proxy(emb: np.ndarray, embedder: Embedder) -> dict[str, np.ndarray]:
    """PROXY: mean cosine to +keyed minus -keyed items, per trait."""
    items, spans = _ipip_matrix(embedder)  # type: ignore[arg-type]
    sims = emb @ items.T
    return {f"big5_{t}": sims[:, pos].mean(1) - sims[:, neg].mean(1) for t, (pos, neg) in spans.items()}


HISTORY = ("sem_prev_sim", "sem_max_earlier_sim", "sem_centroid_dist", "ngram_rep_prev", "ngram_rep_history")


def history_signals(texts: list[str], emb: np.ndarray) -> dict[str, list[float]]:
    """Each published turn against the same agent's earlier turns (in order);
    the agent's first turn has no history, so its values are missing."""
    out: dict[str, list[float]] = {k: [math.nan] for k in HISTORY} if texts else {k: [] for k in HISTORY}
    sims = emb @ emb.T
    seen: set[tuple[str, ...]] = set(trigrams(texts[0])) if texts else set()
    for i in range(1, len(texts)):
        grams = trigrams(texts[i])
        centroid = emb[:i].mean(0)
        norm = float(np.linalg.norm(centroid)) or 1.0
        out["sem_prev_sim"].append(float(sims[i, i - 1]))
        out["sem_max_earlier_sim"].append(float(sims[i, :i].max()))
        out["sem_centroid_dist"].append(1.0 - float(emb[i] @ centroid) / norm)
        out["ngram_rep_prev"].append(overlap(grams, trigrams(texts[i - 1])))
        out["ngram_rep_history"].append(overlap(grams, seen))
        seen |= grams
    return out


def against(
    text: str, emb: np.ndarray, other_text: str | None, other_emb: np.ndarray | None
) -> dict[str, float]:
    """One text against one other (the opponent's last turn, or the agent's previous)."""
    if other_text is None or other_emb is None:
        return {"sim": math.nan, "lsm": math.nan, "ngram": math.nan}
    return {
        "sim": float(emb @ other_emb),
        "lsm": style_matching(profile(text), profile(other_text)),
        "ngram": overlap(trigrams(text), trigrams(other_text)),
    }

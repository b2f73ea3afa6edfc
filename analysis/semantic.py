"""Signals that relate a text to others: persona anchor, the agent's own
history, the opponent, and the IPIP personality items.

Input is one run's turns (or drafts) with their embeddings; ``position``
orders turns within a run: (round, index of the team in the round).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from analysis.embed import Embedder
from analysis.lexicons import ipip_items
from analysis.text import function_profile, style_matching, tokens

TRAITS = ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")


def trigrams(text: str) -> set[tuple[str, ...]]:
    toks = tokens(text)
    return {tuple(toks[i : i + 3]) for i in range(len(toks) - 2)}


def overlap(grams: set[tuple[str, ...]], seen: set[tuple[str, ...]]) -> float:
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


def history_signals(texts: list[str], emb: np.ndarray) -> dict[str, list[float]]:
    """Each published turn against the same agent's earlier turns (in order)."""
    n = len(texts)
    out: dict[str, list[float]] = {k: [] for k in ("sem_prev_sim", "sem_max_earlier_sim", "sem_centroid_dist", "ngram_rep_prev", "ngram_rep_history")}  # fmt: skip
    seen: set[tuple[str, ...]] = set()
    prev: set[tuple[str, ...]] = set()
    sims = emb @ emb.T if n else np.zeros((0, 0))
    for i in range(n):
        grams = trigrams(texts[i])
        if i == 0:
            for key in ("sem_prev_sim", "sem_max_earlier_sim", "sem_centroid_dist"):
                out[key].append(math.nan)
            out["ngram_rep_prev"].append(math.nan)
            out["ngram_rep_history"].append(math.nan)
        else:
            centroid = emb[:i].mean(0)
            norm = float(np.linalg.norm(centroid)) or 1.0
            out["sem_prev_sim"].append(float(sims[i, i - 1]))
            out["sem_max_earlier_sim"].append(float(sims[i, :i].max()))
            out["sem_centroid_dist"].append(1.0 - float(emb[i] @ centroid) / norm)
            out["ngram_rep_prev"].append(overlap(grams, prev))
            out["ngram_rep_history"].append(overlap(grams, seen))
        seen |= grams
        prev = grams
    return out


def against(
    text: str, emb: np.ndarray, other_text: str | None, other_emb: np.ndarray | None
) -> dict[str, float]:
    """One text against one other (the opponent's last turn, or the agent's previous)."""
    if other_text is None or other_emb is None:
        return {"sim": math.nan, "lsm": math.nan, "ngram": math.nan}
    return {
        "sim": float(emb @ other_emb),
        "lsm": style_matching(function_profile(tokens(text)), function_profile(tokens(other_text))),
        "ngram": overlap(trigrams(text), trigrams(other_text)),
    }

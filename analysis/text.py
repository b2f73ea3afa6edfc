"""Signals that read one text on its own: affect, LIWC-like rates, structure.

Everything here is a pure function of the text, so results can be cached by
text. Rates are per 100 words, as in LIWC. Tokens are lower-cased word forms
(no lemmatiser: the lexicons are matched on surface forms).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache

from analysis.lexicons import NRC_EMOTIONS, WordList, nrc, textstat, vader, warriner, wordlists

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"[.!?]+(?:\s+|$)")
# The function-word categories of language style matching (Ireland & Pennebaker 2010).
LSM_CATEGORIES = (
    "personal_pronouns",
    "impersonal_pronouns",
    "articles",
    "conjunctions",
    "prepositions",
    "auxiliary_verbs",
    "adverbs",
    "negation",
    "quantifiers",
)
RATE_SIGNALS = {
    "pron_i": "pronoun_i",
    "pron_we": "pronoun_we",
    "pron_you": "pronoun_you",
    "negation": "negation",
    "causal": "causal",
    "insight": "insight",
    "absolutist": "absolutist",
    "hedges": "hedges",
    "boosters": "boosters",
}


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def count(toks: Sequence[str], wl: WordList) -> int:
    """Occurrences of a list's words and phrases in ``toks``."""
    n = sum(1 for t in toks if t in wl.words)
    for phrase in wl.phrases:
        k = len(phrase)
        n += sum(1 for i in range(len(toks) - k + 1) if tuple(toks[i : i + k]) == phrase)
    return n


def per100(n: int, total: int) -> float:
    return 100.0 * n / total if total else math.nan


def function_profile(toks: Sequence[str]) -> dict[str, float]:
    """Percent of words in each LSM function-word category."""
    lists = wordlists()
    return {c: per100(count(toks, lists[c]), len(toks)) for c in LSM_CATEGORIES}


@cache
def function_words() -> frozenset[str]:
    """Union of the function-word categories (a word counts once)."""
    lists = wordlists()
    return frozenset().union(*(lists[c].words for c in LSM_CATEGORIES))


def style_matching(a: dict[str, float], b: dict[str, float]) -> float:
    """Ireland & Pennebaker (2010) LSM: mean over categories of 1 - |a-b|/(a+b+0.0001)."""
    scores = [1 - abs(a[c] - b[c]) / (a[c] + b[c] + 0.0001) for c in LSM_CATEGORIES]
    return float(sum(scores) / len(scores)) if not any(map(math.isnan, scores)) else math.nan


def ttr(toks: Sequence[str]) -> float:
    return len(set(toks)) / len(toks) if toks else math.nan


def mattr(toks: Sequence[str], window: int = 50) -> float:
    """Moving-average TTR (Covington & McFall 2010), sliding window of ``window`` words."""
    if len(toks) <= window:
        return ttr(toks)
    counts: dict[str, int] = {}
    for t in toks[:window]:
        counts[t] = counts.get(t, 0) + 1
    total = len(counts)
    for i in range(window, len(toks)):
        old, new = toks[i - window], toks[i]
        counts[old] -= 1
        if counts[old] == 0:
            del counts[old]
        counts[new] = counts.get(new, 0) + 1
        total += len(counts)
    return total / (len(toks) - window + 1) / window


def _mtld_pass(toks: Sequence[str], threshold: float) -> float:
    factors, types, n, current = 0.0, set[str](), 0, 1.0
    for t in toks:
        n += 1
        types.add(t)
        current = len(types) / n
        if current <= threshold:
            factors, types, n, current = factors + 1, set(), 0, 1.0
    if n:
        factors += (1 - current) / (1 - threshold)
    # No factor completed (every word new): cap at the text length.
    return len(toks) / factors if factors else float(len(toks))


def mtld(toks: Sequence[str], threshold: float = 0.72) -> float:
    """MTLD (McCarthy & Jarvis 2010): mean of the forward and backward passes."""
    if not toks:
        return math.nan
    return (_mtld_pass(toks, threshold) + _mtld_pass(list(reversed(toks)), threshold)) / 2


def analytic_index(profile: dict[str, float]) -> float:
    """Categorical-dynamic index (Pennebaker et al. 2014), raw percent units."""
    p = profile
    return (
        30
        + p["articles"]
        + p["prepositions"]
        - p["personal_pronouns"]
        - p["impersonal_pronouns"]
        - p["auxiliary_verbs"]
        - p["conjunctions"]
        - p["adverbs"]
        - p["negation"]
    )


def affect_signals(text: str, toks: Sequence[str]) -> dict[str, float]:
    # VADER scores sentences (its authors average them for longer texts); scoring a
    # 200-word text whole is also quadratic in its length inside vaderSentiment.
    scored = [vader().polarity_scores(s)["compound"] for s in sentences(text)]
    out = {"vader_compound": float(sum(scored) / len(scored)) if scored else math.nan}
    norms = warriner()
    rated = [norms[t] for t in toks if t in norms]
    for i, name in enumerate(("vad_valence", "vad_arousal", "vad_dominance")):
        out[name] = sum(r[i] for r in rated) / len(rated) if rated else math.nan
    lex = nrc()
    lex.load_token_list(toks)
    for emotion in NRC_EMOTIONS:
        out[f"nrc_{emotion}"] = float(lex.affect_frequencies.get(emotion, 0.0))
    return out


def liwc_signals(toks: Sequence[str], profile: dict[str, float]) -> dict[str, float]:
    lists = wordlists()
    out = {name: per100(count(toks, lists[key]), len(toks)) for name, key in RATE_SIGNALS.items()}
    out["analytic"] = analytic_index(profile)
    return out


def structure_signals(text: str, toks: Sequence[str]) -> dict[str, float]:
    sents = sentences(text)
    ts = textstat()
    function = function_words()
    function_share = sum(1 for t in toks if t in function) / len(toks) if toks else math.nan
    return {
        "n_words": float(len(toks)),
        "sentence_len": len(toks) / len(sents) if sents else math.nan,
        "flesch_reading_ease": float(ts.flesch_reading_ease(text)) if toks else math.nan,
        "fk_grade": float(ts.flesch_kincaid_grade(text)) if toks else math.nan,
        "ttr": ttr(toks),
        "mattr": mattr(toks),
        "mtld": mtld(toks),
        "lexical_density": 1 - function_share,
    }


def text_signals(text: str) -> dict[str, float]:
    """Every single-text signal of ``text`` (see ``analysis.registry``)."""
    toks = tokens(text)
    profile = function_profile(toks)
    return {
        **affect_signals(text, toks),
        **liwc_signals(toks, profile),
        **structure_signals(text, toks),
    }

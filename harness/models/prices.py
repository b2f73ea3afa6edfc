"""What model calls cost: the price table and the dollars of one call.

The shipped table is ``conf/prices/default.yaml`` (versioned, each entry with
its source and ``as_of`` date). A user's own file (``prices.file``) and single
entries (``prices.models``) are merged over it. Scripted, local and human
models cost $0 by definition; a model with no entry costs *unknown* (None),
which sums to unknown and is never shown as $0.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.models.base import Completion, ModelConfigError
from harness.paths import conf_dir

# Providers whose calls cost nothing: they run here, or a person answers.
FREE_PROVIDERS = frozenset({"scripted", "local", "human"})
# A dated snapshot (gpt-4o-mini-2024-07-18, claude-3-5-haiku-20241022) or an
# alias (-latest) is priced as its base model when it has no entry of its own.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")
PER = 1_000_000  # prices are dollars per million tokens


class Price(BaseModel):
    """Dollars per million tokens of one ``provider:model``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float
    output: float  # reasoning tokens are output tokens, billed at this rate
    cache_read: float | None = None  # None: billed as input
    cache_write: float | None = None  # None: billed as input
    batch_discount: float = 0.0  # the share off through the provider's batch API
    as_of: str = "user"
    source: str = "user"


class PriceError(ModelConfigError):
    """A price file or entry that cannot be read, named in one line."""


@dataclass(frozen=True)
class PriceTable:
    version: str
    entries: dict[str, Price]

    def price(self, spec: str) -> Price | None:
        """The entry for ``spec`` (or its base model's); None if it has none."""
        if spec in self.entries:
            return self.entries[spec]
        base = _SNAPSHOT.sub("", spec)
        return self.entries.get(base)

    def is_free(self, spec: str) -> bool:
        """Free by definition, unless given a price of its own (a demo, a test)."""
        return spec.split(":", 1)[0] in FREE_PROVIDERS and self.price(spec) is None

    def known(self, spec: str) -> bool:
        return self.is_free(spec) or self.price(spec) is not None

    def cost(self, spec: str, c: Completion) -> float | None:
        """The dollars of one call; None when ``spec`` has no price."""
        if self.is_free(spec):
            return 0.0
        price = self.price(spec)
        if price is None:
            return None
        fresh = max(0, c.input_tokens - c.cache_read_tokens - c.cache_write_tokens)
        read = price.input if price.cache_read is None else price.cache_read
        write = price.input if price.cache_write is None else price.cache_write
        dollars = (
            fresh * price.input
            + c.cache_read_tokens * read
            + c.cache_write_tokens * write
            + c.output_tokens * price.output
        )
        return dollars / PER

    def estimate(self, spec: str, input_tokens: int, output_tokens: int) -> float | None:
        """The dollars of a call not made yet (no cache assumed: the upper figure)."""
        return self.cost(spec, Completion("", input_tokens, output_tokens, 0.0))

    def digest(self, specs: list[str]) -> dict[str, str]:
        """{spec: hash of its entry} for the priced models among ``specs`` (a fingerprint part)."""
        out = {}
        for spec in sorted(set(specs)):
            if (price := self.price(spec)) is not None:
                blob = json.dumps(price.model_dump(exclude={"as_of", "source"}), sort_keys=True)
                out[spec] = hashlib.sha256(blob.encode()).hexdigest()[:16]
        return out


def default_file() -> Path:
    return conf_dir() / "prices" / "default.yaml"


def read_file(path: Path, key: str) -> tuple[str, dict[str, Price]]:
    """(version, entries) of one price file; any problem is one line naming the file."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PriceError(f"{key}: {path} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise PriceError(f"{key}: {path} needs a 'models' mapping of provider:model -> prices")
    entries = parse_entries(data["models"], f"{key} ({path})")
    return str(data.get("version", "unversioned")), entries


def parse_entries(raw: dict[str, Any], key: str) -> dict[str, Price]:
    entries = {}
    for spec, fields in raw.items():
        if ":" not in str(spec):
            raise PriceError(f"{key}: entry {spec!r} must be named provider:model")
        try:
            entries[str(spec)] = Price.model_validate(dict(fields or {}))
        except (ValidationError, TypeError, ValueError) as exc:
            first = str(exc).splitlines()
            detail = f"{first[1].strip()} {first[2].strip()}" if len(first) > 2 else str(exc)
            raise PriceError(f"{key}: entry {spec!r}: {detail}") from None
        price = entries[str(spec)]
        rates = [price.input, price.output, price.cache_read or 0, price.cache_write or 0]
        if min(rates) < 0 or not 0 <= price.batch_discount < 1:
            raise PriceError(f"{key}: entry {spec!r}: prices must be >= 0 and batch_discount in [0, 1)")
    return entries


def load_prices(file: str | None = None, models: dict[str, Any] | None = None) -> PriceTable:
    """The shipped table, then ``file``'s entries, then ``models``' entries over both.
    Read once per process for each (file and its mtime, entries): a sweep's thousand
    cells share one table instead of parsing YAML twice per cell."""
    stamp = Path(file).stat().st_mtime_ns if file and Path(file).exists() else None
    return _load(file, stamp, json.dumps(models or {}, sort_keys=True, default=str))


@functools.lru_cache(maxsize=64)
def _load(file: str | None, stamp: int | None, models_json: str) -> PriceTable:
    models = json.loads(models_json)
    version, entries = read_file(default_file(), "prices")
    if file:
        own_version, own = read_file(Path(file), "prices.file")
        version, entries = f"{version}+{own_version}", {**entries, **own}
    if models:
        entries = {**entries, **parse_entries(models, "prices.models")}
        version += "+models"
    return PriceTable(version, entries)


def format_usd(value: float | None) -> str:
    """Dollars as people read them; unknown stays unknown."""
    if value is None:
        return "unknown"
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"

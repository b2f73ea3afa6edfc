"""One shared, adaptive limiter per provider endpoint, for every model call in the process.

Many cells of a sweep run as threads of one process; left alone, each call
retries on its own and together they keep a provider's rate limit saturated
(a herd of retries after every reset). ``limiter_for(key)`` hands every caller
of one endpoint (provider, base_url, API key, model) the same ``Limiter``:

- adaptive concurrency (AIMD, after inspect_ai's adaptive connections): a
  float limit in [1, maximum]; each success adds ``1/limit`` (so +1 per
  window of ``limit`` successes), a 429 multiplies it by 0.8, a 5xx or a
  timeout pauses growth for ``pause_s`` without shrinking it;
- a 429's ``Retry-After`` (or, without one, the ``x-ratelimit-reset-*`` /
  ``anthropic-ratelimit-*-reset`` time of the exhausted limit) blocks every
  NEW acquisition until then, not only the caller that was refused;
- an optional RPM pacer (``harness.models.pacing``: evenly spaced, shared by
  a sweep's processes on one machine) and TPM bucket, a request weighted by
  its estimated tokens; a 429 naming only a paced limit is waited out
  without cutting concurrency;
- slots handed out first come first served, so every cell keeps one pace.

The retry policy stays ``harness.models.retry``: the limiter only decides
when an attempt may start. Every change of the limit goes, as a
``LimitChange``, to an optional sink (``JsonlSink`` appends ``limits.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from harness.models.pacing import pacer, token_bucket
from harness.models.retry import classify, retry_after
from harness.slots import Slots

DECREASE = 0.8  # a 429 multiplies the limit by this
PAUSE_S = 10.0  # a 5xx or timeout stops growth this long
MAX_BLOCK_S = 120.0  # a reset header further off than this (a daily quota) is not waited out here
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LimitChange:
    """One change of a limiter's state, as written to ``limits.jsonl``."""

    time: str  # ISO 8601, UTC
    key: str  # the limiter's label (never the API key)
    old: float
    new: float
    reason: str  # "429", "5xx pause", "increase", "retry-after until <time>"


Sink = Callable[[LimitChange], None]


class JsonlSink:
    """Appends each change as one JSON line: one ``os.write`` and an fsync per
    line, on a file opened with O_APPEND, so concurrent writers never interleave."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __call__(self, change: LimitChange) -> None:
        data = (json.dumps(asdict(change), separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


class Slot:
    """One acquired slot; reports its call's outcome to its limiter once."""

    def __init__(self, limiter: Limiter, epoch: int) -> None:
        self.limiter, self.epoch, self.reported = limiter, epoch, False

    def succeeded(self) -> None:
        self.reported = True
        self.limiter.on_success()

    def failed(self, exc: BaseException) -> None:
        self.reported = True
        self.limiter.on_failure(exc, self.epoch)


class Limiter:
    """Thread-safe adaptive concurrency plus optional RPM/TPM buckets (see the module doc)."""

    def __init__(
        self,
        label: str = "",
        *,
        initial: float = 8,
        maximum: float = 64,
        rpm: int | None = None,
        tpm: int | None = None,
        window_s: float = 60.0,
        pause_s: float = PAUSE_S,
        max_block_s: float = MAX_BLOCK_S,
        sink: Sink | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if maximum < 1:
            raise ValueError(f"maximum concurrency must be >= 1, got {maximum}")
        self.label, self.sink = label, sink
        self.maximum = float(maximum)
        self.limit = min(max(float(initial), 1.0), self.maximum)
        self.pause_s, self.max_block_s = pause_s, max_block_s
        self.tpm = tpm
        self._clock = clock
        self._cond = threading.Condition()
        self._turns = Slots(1)  # a lock handed to the longest waiter
        self._in_flight = 0
        self._blocked_until = 0.0  # on self._clock
        self._paused_until = 0.0
        # decreases so far: a 429 to a request sent before the last decrease
        # says nothing new about the new limit (TCP: one decrease per window)
        self._epoch = 0
        self._rpm = pacer(rpm, window_s, label)
        self._tpm = token_bucket(tpm, window_s)

    @property
    def capacity(self) -> int:
        return max(1, int(self.limit))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def blocked_until(self) -> float:
        return self._blocked_until

    @contextmanager
    def slot(self, tokens: int = 0) -> Iterator[Slot]:
        """Hold a slot for one call; an exception from the body is reported as its outcome."""
        slot = self.acquire(tokens)
        try:
            yield slot
        except Exception as exc:
            if not slot.reported:
                slot.failed(exc)
            raise
        else:
            if not slot.reported:
                slot.succeeded()
        finally:
            self.release()

    def acquire(self, tokens: int = 0) -> Slot:
        """In turn, first come first served: wait out any Retry-After block and for a
        free slot, then for the buckets. A turn keeps every cell of a sweep moving at
        one pace (a cell waiting at random fell behind and ended the sweep alone),
        and only the caller whose turn it is waits on the slots' condition."""
        self._turns.acquire()
        try:
            epoch = self._take_slot()
            try:  # the buckets block on their own lock, not ours
                if self._rpm is not None:
                    self._rpm.try_acquire("rpm", 1)
                if self._tpm is not None and self.tpm:
                    # a request costlier than the whole TPM would never fit; the provider says so
                    self._tpm.try_acquire("tpm", min(max(int(tokens), 1), self.tpm))
            except BaseException:
                self.release()
                raise
        finally:
            self._turns.release()
        return Slot(self, epoch)

    def _take_slot(self) -> int:
        """Wait out any block and for a free slot; take it. The epoch it was taken in."""
        with self._cond:
            while True:
                now = self._clock()
                if now < self._blocked_until:
                    self._cond.wait(self._blocked_until - now)
                elif self._in_flight < self.capacity:
                    self._in_flight += 1
                    return self._epoch
                else:
                    self._cond.wait()

    def release(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()  # every waiter re-checks: a block may have ended too

    def set_maximum(self, maximum: float) -> None:
        """A new ceiling for the adaptive limit, at once (``ctl set model.max_concurrency=N``)."""
        change = None
        with self._cond:
            old = self.limit
            self.maximum = float(max(1, maximum))
            self.limit = min(self.limit, self.maximum)
            change = self._change(old, f"maximum {self.maximum:g}")
            self._cond.notify_all()
        self._emit(change)

    def on_success(self) -> None:
        """Additive increase, unless a 5xx paused growth; reported when the integer part moves."""
        change = None
        with self._cond:
            if self._clock() < self._paused_until or self.limit >= self.maximum:
                return
            old = self.limit
            self.limit = min(self.maximum, old + 1.0 / old)
            if int(self.limit) > int(old):
                change = self._change(old, "increase")
                self._cond.notify_all()
        self._emit(change)

    def on_failure(self, exc: BaseException, epoch: int | None = None) -> None:
        kind = classify(exc)
        if kind == "rate_limit":
            self.on_rate_limit(rate_limit_wait(exc), epoch, cut=not self._paced(exc))
        elif kind == "transient":
            self.on_transient()

    def _paced(self, exc: BaseException) -> bool:
        """Whether a 429 names only limits this limiter paces (requests with ``rpm``,
        tokens with ``tpm``): its block is the answer, as fewer calls in flight
        only starve the pace (10,000 RPM in two processes: 21 cuts took them down
        to 30 calls in flight of the ~42 each needed)."""
        paced = {"requests"} if self._rpm is not None else set()
        paced |= {"tokens", "input-tokens", "output-tokens"} if self._tpm is not None else set()
        headers = getattr(getattr(exc, "response", None), "headers", None)
        hit = exhausted(headers) if headers is not None else set()
        return bool(hit) and hit <= paced

    def on_rate_limit(
        self, wait_s: float | None = None, epoch: int | None = None, *, cut: bool = True
    ) -> None:
        """Multiplicative decrease (once per epoch, unless not ``cut``) and a block on
        new acquisitions for ``wait_s``."""
        changes: list[LimitChange | None] = []
        with self._cond:
            now = self._clock()
            if cut and (epoch is None or epoch == self._epoch):
                old = self.limit
                self.limit = max(1.0, old * DECREASE)
                self._epoch += 1
                if self.limit != old:
                    changes.append(self._change(old, "429"))
            if wait_s is not None and wait_s > 0:
                until = now + min(wait_s, self.max_block_s)
                if until > self._blocked_until:
                    starts = now >= self._blocked_until  # extending a block is not news
                    self._blocked_until = until
                    if starts:
                        when = datetime.now(UTC) + timedelta(seconds=until - now)
                        changes.append(self._change(self.limit, f"retry-after until {_iso(when)}"))
        for change in changes:
            self._emit(change)

    def on_transient(self) -> None:
        """A 5xx or timeout: no growth for ``pause_s``; the limit stays."""
        change = None
        with self._cond:
            now = self._clock()
            if now >= self._paused_until:
                change = self._change(self.limit, "5xx pause")
            self._paused_until = max(self._paused_until, now + self.pause_s)
        self._emit(change)

    def _change(self, old: float, reason: str) -> LimitChange:
        return LimitChange(_iso(datetime.now(UTC)), self.label, round(old, 3), round(self.limit, 3), reason)

    def _emit(self, change: LimitChange | None) -> None:
        # outside the lock: a sink may fsync
        if change is None or self.sink is None:
            return
        try:
            self.sink(change)
        except Exception:  # a diagnostic log must not fail the model call
            _log.warning("limit change not recorded: %s", change, exc_info=True)


# -- reading the server's wait ------------------------------------------------

_RESET = (re.compile(r"x-ratelimit-reset-(.+)"), re.compile(r"anthropic-ratelimit-(.+)-reset"))
_REMAINING = (re.compile(r"x-ratelimit-remaining-(.+)"), re.compile(r"anthropic-ratelimit-(.+)-remaining"))
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def rate_limit_wait(exc: BaseException) -> float | None:
    """Seconds until a 429'd endpoint takes requests again: ``Retry-After`` (the
    exact answer) if sent, else the reset time of the exhausted limit."""
    asked = retry_after(exc)
    if asked is not None:
        return asked
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return reset_wait(headers) if headers is not None else None


def exhausted(headers: Mapping[str, str] | Any) -> set[str]:
    """The limits whose remaining is 0 (``requests``, ``tokens``, ``input-tokens``...)."""
    return {name for _, name in _exhausted(_items(headers))}


def reset_wait(headers: Mapping[str, str] | Any) -> float | None:
    """From ``x-ratelimit-reset-*`` / ``anthropic-ratelimit-*-reset``: the latest reset
    among limits whose remaining is 0, else the earliest reset; None if none parse.

    A reset is when a limit is whole again, later than when one more request
    fits, so it is only the fallback to Retry-After.
    """
    items = _items(headers)
    resets: dict[tuple[int, str], float] = {}
    for raw_name, value in items:
        name = str(raw_name).lower()
        for family, reset in enumerate(_RESET):
            if (m := reset.fullmatch(name)) and (seconds := _seconds(str(value))) is not None:
                resets[(family, m.group(1))] = seconds
    if not resets:
        return None
    spent = _exhausted(items)
    hit = [s for dim, s in resets.items() if dim in spent]
    return max(hit) if hit else min(resets.values())


def _items(headers: Mapping[str, str] | Any) -> list[tuple[Any, Any]]:
    """A response's headers as pairs; none if they are not a mapping."""
    try:
        return list(headers.items())
    except (AttributeError, TypeError):
        return []


def _exhausted(items: list[tuple[Any, Any]]) -> set[tuple[int, str]]:
    """(header family, limit) of each limit whose remaining is 0."""
    return {
        (family, m.group(1))
        for raw_name, value in items
        for family, remaining in enumerate(_REMAINING)
        if (m := remaining.fullmatch(str(raw_name).lower())) and str(value).strip() == "0"
    }


def _seconds(value: str) -> float | None:
    """``12``, ``1m2.5s``, ``850ms`` (OpenAI) or an RFC 3339 time (Anthropic), as seconds from now."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNIT_S[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds")


# -- the process-wide registry --------------------------------------------------


@dataclass(frozen=True)
class LimiterKey:
    """An endpoint: the API key only as a sha256 prefix, so logs and keys can be shown."""

    provider: str
    base_url: str
    key_hash: str
    model: str

    @property
    def label(self) -> str:
        where = self.base_url or "default"
        return f"{self.provider}:{self.model}@{where}#{self.key_hash or 'nokey'}"


def key_for(provider: str, base_url: str | None, api_key: str | None, model: str) -> LimiterKey:
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:12] if api_key else ""
    return LimiterKey(provider, (base_url or "").rstrip("/"), digest, model)


_REGISTRY: dict[LimiterKey, Limiter] = {}
_REGISTRY_LOCK = threading.Lock()
_default_sink: Sink | None = None


def limiter_for(key: LimiterKey, **settings: Any) -> Limiter:
    """The one ``Limiter`` for ``key`` in this process; ``settings`` (``Limiter``'s
    keyword arguments) apply when it is created, the first caller's win."""
    with _REGISTRY_LOCK:
        limiter = _REGISTRY.get(key)
        if limiter is None:
            settings.setdefault("sink", _default_sink)
            limiter = _REGISTRY[key] = Limiter(key.label, **settings)
        return limiter


def set_sink(sink: Sink | None) -> None:
    """Send every limiter's changes, existing and future, to ``sink`` (e.g. a sweep's limits.jsonl)."""
    global _default_sink
    with _REGISTRY_LOCK:
        _default_sink = sink
        for limiter in _REGISTRY.values():
            limiter.sink = sink


def limiters() -> dict[LimiterKey, Limiter]:
    with _REGISTRY_LOCK:
        return dict(_REGISTRY)


def reset_limiters() -> None:
    """Forget every limiter (tests; a new sweep in a long-lived process)."""
    with _REGISTRY_LOCK:
        _REGISTRY.clear()


def estimate_tokens(messages: Sequence[Mapping[str, Any]], max_tokens: int) -> int:
    """What a provider charges against TPM on admission: ~4 characters a prompt
    token, plus ``max_tokens`` (OpenAI counts the whole allowance)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4 + max(int(max_tokens), 0)


__all__ = [
    "JsonlSink",
    "LimitChange",
    "Limiter",
    "LimiterKey",
    "Slot",
    "estimate_tokens",
    "key_for",
    "limiter_for",
    "limiters",
    "rate_limit_wait",
    "reset_limiters",
    "reset_wait",
    "set_sink",
]

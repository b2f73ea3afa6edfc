"""Pacing a known request rate (``model.rpm``): requests spaced evenly (GCRA).

A token bucket full at rest lets a minute's requests out at once; a provider
enforcing the minute's limit over a shorter window (OpenAI says it may) refuses
that burst, and each refusal costs the limiter a block and a cut in
concurrency. GCRA spaces requests at ``window_s / limit``, at most ``BURST_S``
seconds' worth ahead. One process paces its own calls (pyrate-limiter's GCRA);
the processes of one sweep on one machine (``sweep.processes=P``) share one
pacer instead of each taking ``limit / P``, so a worker that starts late or a
share that ends early leaves no part of the limit unused (``FilePacer``: the
state is one timestamp in a file under ``PACER_DIR_ENV``, read and written
under ``flock``).
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import struct
import time
from pathlib import Path
from typing import Any

BURST_S = 0.1  # a paced request may go this far ahead of an even spacing
PACER_DIR_ENV = "DRIFT_PACER_DIR"  # set by a sweep's driver for itself and its workers
_TAT = struct.Struct("d")


def pacer(limit: int | None, window_s: float, label: str) -> Any:
    """What paces ``limit`` requests per ``window_s`` of the endpoint ``label`` (None: unpaced)."""
    if not limit:
        return None
    burst = max(1, math.ceil(limit * BURST_S / window_s))
    if shared := os.environ.get(PACER_DIR_ENV):
        name = hashlib.sha256(label.encode()).hexdigest()[:12]
        return FilePacer(Path(shared) / f"rpm-{name}", limit, window_s, burst)
    from pyrate_limiter import GCRA

    return _pyrate(limit, window_s, GCRA(), burst)


def token_bucket(limit: int | None, window_s: float) -> Any:
    """A weighted token bucket of ``limit`` per ``window_s`` (``model.tpm``; None: none).

    A token bucket admits a full burst at rest, as Anthropic documents its
    limits; against a sliding window (OpenAI, the simulator) that first burst
    can overshoot, and the limiter's 429 and Retry-After handling absorbs it.
    Tokens are not paced: GCRA would refuse for ever a request weighing more
    than its burst.
    """
    if not limit:
        return None
    from pyrate_limiter import TokenBucket

    return _pyrate(limit, window_s, TokenBucket(), None)


def _pyrate(limit: int, window_s: float, algorithm: Any, burst: int | None) -> Any:
    """pyrate-limiter's StateBucket under ``algorithm``: constant state however large
    the weight (its window log keeps one entry per token), a blocking
    ``try_acquire(name, weight)`` that sleeps without holding its lock, and no
    leaker thread with ``schedule_leak=False``. aiolimiter is asyncio-only."""
    from pyrate_limiter import Limiter as PyrateLimiter
    from pyrate_limiter import Rate, SingleBucketFactory, StateBucket

    bucket = StateBucket([Rate(int(limit), max(1, int(window_s * 1000)), burst=burst)], algorithm=algorithm)
    return PyrateLimiter(SingleBucketFactory(bucket, schedule_leak=False), buffer_ms=5)


class FilePacer:
    """GCRA whose theoretical arrival time is kept in ``path``, for every process
    of this machine that opens it: on CLOCK_MONOTONIC, one clock for all of them.
    The same ``try_acquire(name, weight)`` as pyrate-limiter's, blocking."""

    def __init__(self, path: Path, limit: int, window_s: float, burst: int) -> None:
        self.emission = window_s / limit
        self.tolerance = (burst - 1) * self.emission
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # open now: the folder may go later

    def try_acquire(self, name: str, weight: int = 1) -> bool:
        while True:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                now = time.monotonic()
                raw = os.pread(self.fd, _TAT.size, 0)
                tat = _TAT.unpack(raw)[0] if len(raw) == _TAT.size else now
                tat = now if tat > now + 3600 else max(tat, now)  # an hour ahead: another boot's
                wait = tat - now - self.tolerance
                if wait <= 0:
                    os.pwrite(self.fd, _TAT.pack(tat + weight * self.emission), 0)
                    return True
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            time.sleep(wait)

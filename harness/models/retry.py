"""The one retry policy: tenacity, exponential backoff with jitter, and an
error classifier. Transient errors and rate limits are retried; everything
else fails fast. Each retry is reported through ``on_retry`` so it can be
recorded as an event.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
)

from harness.schema import RetryConfig
from harness.slots import waiting
from harness.store.records import ErrorInfo, ErrorKind

T = TypeVar("T")

_TRANSIENT_NAMES = {
    "APITimeoutError",
    "APIConnectionError",
    "InternalServerError",
    "ServiceUnavailableError",
    "TimeoutException",
    "ConnectError",
    "ReadTimeout",
    "ReadError",
    "RemoteProtocolError",
    "ConnectTimeout",
    "OverloadedError",
    # a reply cut off or garbled in transit (a truncated 200 body): the next
    # attempt may well arrive whole. The harness parses model output itself,
    # after this layer, so a decode error raised here is always the transport's.
    "JSONDecodeError",
    "APIResponseValidationError",
    "IncompleteRead",
    "ChunkedEncodingError",
    "DecodingError",
}
_RATE_LIMIT_NAMES = {"RateLimitError", "TooManyRequests", "ResourceExhausted"}


def classify(exc: BaseException) -> ErrorKind:
    """Transient, rate limit or fatal: by HTTP status when known, else by type."""
    status = getattr(exc, "status_code", None) or getattr(exc, "status", None)
    if isinstance(status, int):
        if status == 429:
            return "rate_limit"
        if status >= 500 or status == 408:
            return "transient"
        return "fatal"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _RATE_LIMIT_NAMES:
        return "rate_limit"
    if names & _TRANSIENT_NAMES or isinstance(exc, (TimeoutError, ConnectionError)):
        return "transient"
    return "fatal"


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``Retry-After``/``retry-after-ms``), if it said."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        if (value := headers.get("retry-after")) is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:  # an HTTP date
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def error_info(exc: BaseException) -> ErrorInfo:
    message = " ".join(str(exc).split()) or type(exc).__name__
    return ErrorInfo(kind=classify(exc), type=type(exc).__name__, message=message[:500])


def backoff(policy: RetryConfig) -> Callable[[RetryCallState], float]:
    """initial_s * 2**(n-1) plus uniform jitter, capped at max_s.

    Written out rather than ``wait_exponential_jitter``, whose keyword for the
    base wait was renamed (``initial`` -> ``multiplier``) inside the declared
    range tenacity>=8.2: one spelling is a TypeError on older releases, the
    other a DeprecationWarning on newer ones.
    """

    def wait(state: RetryCallState) -> float:
        base = policy.initial_s * 2 ** (state.attempt_number - 1)
        own = min(policy.max_s, base + random.uniform(0, policy.jitter_s))
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after(exc) if exc is not None else None
        # the server's Retry-After is a floor, honoured even above max_s
        return own if asked is None else max(own, asked)

    return wait


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryConfig,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Call ``fn``; retry transient errors per ``policy``; re-raise the last error.

    The first attempt runs outside tenacity: nearly every call succeeds at once,
    and building a ``Retrying`` per call was most of this layer's CPU. A failed
    first attempt hands its error to tenacity as that attempt's outcome, so the
    waits, the retries reported and the error re-raised are tenacity's as before."""
    try:
        return fn()
    except Exception as exc:
        if classify(exc) == "fatal":  # tenacity would not retry it: re-raised as is
            raise
        first: BaseException | None = exc

    def attempt() -> T:
        nonlocal first
        if first is not None:
            failed, first = first, None
            raise failed
        return fn()

    return _retrying(policy, on_retry)(attempt)


def _lent_sleep(seconds: float) -> None:
    """A backoff's sleep lends the cell's run slot, as the call around it may not (``ChatModel.waits``)."""
    with waiting():
        time.sleep(seconds)


def _retrying(policy: RetryConfig, on_retry: Callable[[int, BaseException, float], None] | None) -> Retrying:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        if on_retry is not None and exc is not None:
            on_retry(state.attempt_number, exc, wait)

    return Retrying(
        retry=retry_if_exception(lambda e: classify(e) != "fatal"),
        stop=stop_after_attempt(policy.max_attempts),
        wait=backoff(policy),
        before_sleep=before_sleep,
        sleep=_lent_sleep,
        reraise=True,
    )

"""The one retry policy: tenacity, exponential backoff with jitter, and an
error classifier. Transient errors and rate limits are retried; everything
else fails fast. Each retry is reported through ``on_retry`` so it can be
recorded as an event.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
)

from harness.config import RetryConfig
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
        return min(policy.max_s, base + random.uniform(0, policy.jitter_s))

    return wait


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryConfig,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Call ``fn``; retry transient errors per ``policy``; re-raise the last error."""

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        if on_retry is not None and exc is not None:
            on_retry(state.attempt_number, exc, wait)

    retrying = Retrying(
        retry=retry_if_exception(lambda e: classify(e) != "fatal"),
        stop=stop_after_attempt(policy.max_attempts),
        wait=backoff(policy),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(fn)

"""``sweep.concurrency``'s bounds and check, read by the in-process launcher,
its steered queue and ``ctl set`` alike (a module of its own so that none of
them imports another for a number)."""

from __future__ import annotations

MAX_CONCURRENCY = 4096  # threads, not processes; past this a machine runs out of descriptors first


def check_concurrency(value: object) -> int:
    """``sweep.concurrency``'s value (a number, or its text on the command line),
    or a one-line error naming the key."""
    from harness.schema import ConfigError

    n = int(value) if isinstance(value, str) and value.strip().isdigit() else value
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CONCURRENCY:
        raise ConfigError(
            f"sweep.concurrency: must be a whole number from 1 to {MAX_CONCURRENCY}, got {value!r}"
        )
    return n

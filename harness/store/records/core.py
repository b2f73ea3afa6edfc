"""What every record carries, whatever its kind: the envelope, its usage and
error fields, the statement base class and the deterministic id.

A field added later gets a default and ``SCHEMA_VERSION`` goes up. Errors are
stored as data (``ErrorInfo``), never as free text alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

# A seat's name (a team, an analyst): the formats define them, records only carry them.
Seat = str
ErrorKind = Literal["transient", "rate_limit", "fatal", "validation"]


def utcnow() -> datetime:
    return datetime.now(UTC)


class ErrorInfo(BaseModel):
    """An error captured as data: what kind, which exception, what it said."""

    kind: ErrorKind
    type: str
    message: str


class Usage(BaseModel):
    """Cost of one model call (or of several, summed over repairs and retries).

    ``cost_usd`` is computed from the price table (``harness.models.prices``):
    None means unknown (a model with no price), never 0. ``billed_usd`` is the
    provider's own figure when its reply carried one. Reasoning tokens are
    already inside ``output_tokens``; cache reads and writes inside
    ``input_tokens``. The detail fields are left out of a record while they
    hold their defaults, so records of free models read as they always did.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    calls: int = 0
    # the detail fields: left out of a record while they hold their defaults
    cost_usd: float | None = Field(default=0.0, exclude_if=lambda v: v == 0.0)
    billed_usd: float | None = Field(default=None, exclude_if=lambda v: v is None)
    reasoning_tokens: int = Field(default=0, exclude_if=lambda v: v == 0)
    cache_read_tokens: int = Field(default=0, exclude_if=lambda v: v == 0)
    cache_write_tokens: int = Field(default=0, exclude_if=lambda v: v == 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            latency_s=self.latency_s + other.latency_s,
            calls=self.calls + other.calls,
            cost_usd=add_cost(self.cost_usd, other.cost_usd),
            billed_usd=add_billed(self.billed_usd, other.billed_usd),
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


def add_cost(a: float | None, b: float | None) -> float | None:
    """Dollars summed; unknown anywhere makes the sum unknown (never shown as 0)."""
    return None if a is None or b is None else a + b


def add_billed(a: float | None, b: float | None) -> float | None:
    """The provider's billed figures summed where there are any (None: none reported)."""
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


class Envelope(BaseModel):
    """Fields every record carries, whatever its kind.

    ``id`` is deterministic (round, team, role, iteration, kind), so replaying a
    node after a crash produces the same id and the log refuses a second copy.
    ``seq`` and ``prev_hash`` are filled by the log at append time and chain
    each file's records together.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    seq: int = -1
    prev_hash: str | None = None
    ts: datetime = Field(default_factory=utcnow)
    round: int
    team: Seat | None = None  # the seat the record belongs to (None: no seat)
    role: str
    iteration: int = 0
    model: str | None = None
    usage: Usage = Field(default_factory=Usage)

    def counted(self) -> dict[str, int]:
        """What this record adds to the run's ``RunCounts`` fields beyond its
        kind and usage (a critique: an approval or a rejection); none by default."""
        return {}


class Published(Envelope):
    """A statement in the shared transcript, of any format: an argument, a
    position, later a speech or a cited turn. ``phase`` says where in the
    format it was made; ``alias`` is the name other seats know it by."""

    text: str
    phase: str = "round"
    alias: str | None = None


def record_id(round_: int, team: str | None, role: str, iteration: int, *extra: object) -> str:
    """Deterministic, human-readable record id, e.g. ``r0003.pros.critique.i1``."""
    parts = [f"r{round_:04d}", team or "all", role, f"i{iteration}"]
    parts += [str(e) for e in extra]
    return ".".join(parts)

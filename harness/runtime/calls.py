"""What one model call is made with: the model bound to a role's sampling
settings and prices (``RoleModel``), the call's seed (``call_seed``), the
hash a kept reply is matched by (``request_sha``), and the hook the progress
bar listens on (``StepHook``)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from harness.models.base import ChatModel, Completion, ModelRequest
from harness.models.limiter import estimate_tokens
from harness.models.prices import PriceTable


@dataclass
class RoleModel:
    """A model bound to one role's sampling settings."""

    role: str
    model: ChatModel
    temperature: float
    max_tokens: int
    prices: PriceTable | None = None  # None: no dollars are counted (cost left at 0)

    @property
    def spec(self) -> str:
        return self.model.spec

    def priced(self, completion: Completion) -> Completion:
        """``completion`` with its dollars from the price table (None: unknown)."""
        if self.prices is None:
            return completion
        cost = self.prices.cost(self.spec, completion)
        if cost == completion.cost_usd and type(cost) is type(completion.cost_usd):
            return completion  # priced as it came (a free model's $0): no copy
        return dataclasses.replace(completion, cost_usd=cost)

    def worst_case(self, request: ModelRequest) -> tuple[float | None, int]:
        """What a call could cost at most: (dollars, tokens), the whole reply allowance used."""
        prompt = estimate_tokens(request.messages, 0)
        usd = self.prices.estimate(self.spec, prompt, request.max_tokens) if self.prices else 0.0
        return usd, prompt + request.max_tokens


@dataclass
class StepHook:
    """Where the progress bar listens for 'agent X is working'."""

    fn: Callable[[str], None] = lambda label: None


def call_seed(seed: int, *parts: object) -> int:
    """Per-call seed derived from the run seed and the call's position, so a
    replayed call after resume samples exactly as the original would have."""
    digest = hashlib.sha256("|".join(map(str, (seed, *parts))).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def request_sha(request: ModelRequest) -> str:
    """What a kept reply answered: a replay must be of the same request."""
    asked = [request.messages, request.schema, request.temperature, request.max_tokens, request.seed]
    return hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()

"""Debate formats: each is one ``build_graph(ctx)`` plus one config option."""

from collections.abc import Callable
from typing import Any

from harness.formats import drift

# name -> (build_graph, initial_state, max_steps)
FORMATS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., int]]] = {
    "drift": (drift.build_graph, drift.initial_state, drift.max_steps),
}

__all__ = ["FORMATS", "drift"]

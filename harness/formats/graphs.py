"""A format's graph, compiled once a process for each wiring and streamed with one run's nodes.

Compiling a LangGraph graph cost every cell of a sweep ~4 ms of CPU on the
driver's one interpreter lock: LangGraph reads each node's type hints and the
source of each node's function. Yet a format's wiring (its nodes' names and
functions, its edges and routes) is the same for every run of one shape; only
the object whose methods the nodes are (``DriftNodes(ctx)``) is the run's.

So a format module imports ``SharedStateGraph as StateGraph`` and wires its graph
as LangGraph's: ``add_node(name, n.method)``, ``add_edge``, ``add_conditional_edges``.
These are recorded; ``compile`` compiles each wiring once, its nodes and routers
calling the streaming run's own object, which LangGraph hands them as the run
context, and returns that graph bound to this run's object (``RunGraph``). A
format module's code is fingerprinted (``Format.prompt_modules``), its imports
are not: importing this changes no run's fingerprint.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from types import MethodType
from typing import Any

from langgraph.graph import StateGraph
from langgraph.runtime import Runtime

# A recorded wiring step: ("node", name, action), ("edge", start, end) or
# ("route", start, path, ((label, node), ...)).
Step = tuple[Any, ...]

_COMPILED: dict[Hashable, Any] = {}
_COMPILING = threading.Lock()  # cells starting together compile a wiring once, not once apiece


@dataclass(frozen=True)
class RunGraph:
    """A compiled graph shared by the runs of one wiring, bound to one run's nodes object."""

    graph: Any  # a CompiledStateGraph
    nodes: object

    def stream(self, state: dict[str, Any], config: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        return self.graph.stream(state, config, context=self.nodes, **kwargs)  # type: ignore[no-any-return]


class SharedStateGraph:
    """LangGraph's ``StateGraph`` as the formats wire it, compiled once per wiring."""

    def __init__(self, state_schema: type) -> None:
        self.state_schema = state_schema
        self.steps: list[Step] = []

    def add_node(self, name: str, action: Callable[..., Any]) -> None:
        self.steps.append(("node", name, action))

    def add_edge(self, start: str, end: str) -> None:
        self.steps.append(("edge", start, end))

    def add_conditional_edges(self, start: str, path: Callable[..., Any], path_map: dict[Any, str]) -> None:
        self.steps.append(("route", start, path, tuple(path_map.items())))

    def compile(self) -> Any:
        """The compiled graph of this wiring, bound to the object whose methods its
        nodes and routers are; a wiring of anything else is compiled as it is."""
        actions = [step[2] for step in self.steps if step[0] != "edge"]
        owners = {id(action.__self__) for action in actions if isinstance(action, MethodType)}
        if len(owners) != 1 or not all(isinstance(action, MethodType) for action in actions):
            return self._wired(lambda action: action).compile()
        nodes = actions[0].__self__
        shape = (self.state_schema, *(_unbound(step) for step in self.steps))
        with _COMPILING:
            if (graph := _COMPILED.get(shape)) is None:
                graph = _COMPILED[shape] = self._wired(_calling_context).compile()
        return RunGraph(graph, nodes)

    def _wired(self, node: Callable[[Callable[..., Any]], Callable[..., Any]]) -> StateGraph:
        """LangGraph's graph of the recorded steps, each node and router made by ``node``."""
        graph: StateGraph[Any] = StateGraph(self.state_schema)
        for kind, start, *rest in self.steps:
            if kind == "node":
                graph.add_node(start, node(rest[0]))
            elif kind == "edge":
                graph.add_edge(start, rest[0])
            else:
                graph.add_conditional_edges(start, node(rest[0]), dict(rest[1]))
        return graph


def _unbound(step: Step) -> Step:
    """A step with its method as the function, the same for every run's object."""
    return step if step[0] == "edge" else (*step[:2], step[2].__func__, *step[3:])


def _calling_context(method: Any) -> Callable[[Any, Runtime[Any]], Any]:
    """A node (or router) calling ``method``'s function on the streaming run's nodes object."""
    function = method.__func__

    def call(state: Any, runtime: Runtime[Any]) -> Any:
        return function(runtime.context, state)

    call.__name__ = call.__qualname__ = function.__name__
    return call

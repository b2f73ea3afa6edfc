"""A format's graph is compiled once per wiring and streamed with each run's own nodes."""

from __future__ import annotations

from typing import Literal, TypedDict

from langgraph.graph import END, START

from harness.formats.graphs import RunGraph, SharedStateGraph


class Count(TypedDict):
    n: int
    who: str


class Nodes:
    def __init__(self, who: str) -> None:
        self.who = who

    def step(self, state: Count) -> dict:
        return {"n": state["n"] + 1, "who": self.who}

    def route(self, state: Count) -> Literal["step", "end"]:
        return "end" if state["n"] >= 2 else "step"


def wired(nodes: object, action: object = None) -> object:
    graph = SharedStateGraph(Count)
    graph.add_node("step", action or nodes.step)  # type: ignore[attr-defined]
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", nodes.route, {"step": "step", "end": END})  # type: ignore[attr-defined]
    return graph.compile()


def last(graph: object) -> dict:
    out: dict = {}
    for values in graph.stream({"n": 0, "who": ""}, {}, stream_mode="values"):  # type: ignore[attr-defined]
        out = values
    return out


def test_two_runs_share_one_compiled_graph_and_each_calls_its_own_nodes():
    first, second = wired(Nodes("first")), wired(Nodes("second"))
    assert isinstance(first, RunGraph) and isinstance(second, RunGraph)
    assert first.graph is second.graph
    assert last(first) == {"n": 2, "who": "first"}
    assert last(second) == {"n": 2, "who": "second"}


def test_a_wiring_of_anything_but_one_objects_methods_is_compiled_as_it_is():
    nodes = Nodes("plain")
    graph = wired(nodes, action=lambda state: {"n": state["n"] + 1, "who": "lambda"})
    assert not isinstance(graph, RunGraph)
    assert last(graph) == {"n": 2, "who": "lambda"}

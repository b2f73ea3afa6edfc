"""Team isolation, proved with canaries: the scripted model stamps every
private field (scratchpad, rationale, persona, critique feedback) with
``[canary:<team>:<field>:<round>.<iteration>]``, so any leak is visible."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harness.config import resolve
from harness.engine import build_roles, preflight
from harness.formats import DRIFT
from harness.formats.drift import DriftNodes
from harness.runtime.context import RunContext
from harness.store.memory import JsonlLog, RunMemory

CANARY = re.compile(r"\[canary:(pros|cons):(\w+):[\d.]+\]")
TEAMS = ("pros", "cons")


def canaries(text: str) -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for m in CANARY.finditer(text)}


def test_no_prompt_carries_the_other_teams_private_text(run, records):
    # rejections make the critic's feedback flow back into prompts too
    result = run("rounds=4", "model.reject_first=1", "critic.max_iterations=3")
    seen: dict[str, set[tuple[str, str]]] = {}
    for team in TEAMS:
        prompts = records(result.run_dir / team / "prompts.jsonl")
        assert prompts, f"{team} logged no prompts"
        text = "\n".join(m["content"] for p in prompts for m in p.messages)
        seen[team] = canaries(text)
    # the canaries are real: each team's own private text does reach its prompts
    assert ("pros", "persona") in seen["pros"] and ("pros", "critique_feedback") in seen["pros"]
    assert ("cons", "persona") in seen["cons"] and ("cons", "critique_feedback") in seen["cons"]
    assert {t for t, _ in seen["pros"]} == {"pros"}
    assert {t for t, _ in seen["cons"]} == {"cons"}
    # and shared memory (which both read) carries no private text at all
    shared = (result.run_dir / "shared_memory.jsonl").read_text()
    assert canaries(shared) == set()


def test_private_text_stays_in_its_own_team_folder(run):
    result = run("rounds=2", "model.reject_first=1")
    for team, other in (("pros", "cons"), ("cons", "pros")):
        for path in (result.run_dir / team).glob("*.jsonl"):
            assert {t for t, _ in canaries(path.read_text())} <= {team}, path
        assert canaries((result.run_dir / team / "persona.jsonl").read_text()), "canary missing"
        assert other not in {t for t, _ in canaries((result.run_dir / team / "critique.jsonl").read_text())}


def reachable_logs(root: Any) -> list[JsonlLog]:
    """Every JsonlLog reachable from ``root`` through attributes and containers."""
    found: list[JsonlLog] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type(None))):
            continue
        seen.add(id(obj))
        if isinstance(obj, JsonlLog):
            found.append(obj)
            continue
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif hasattr(obj, "__self__"):  # a bound method holds its instance
            stack.append(obj.__self__)
        elif hasattr(obj, "__closure__") and obj.__closure__:
            stack.extend(c.cell_contents for c in obj.__closure__)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            stack.extend(vars(obj).values())
    return found


@pytest.fixture
def nodes(make_cfg, tmp_path):
    run = resolve(make_cfg())
    cfg = run.cfg
    memory = RunMemory(tmp_path / "run", DRIFT.layout(cfg))
    ctx = RunContext(
        cfg=cfg, memory=memory, roles=build_roles(run, preflight(run)), seats=DRIFT.seat_list(cfg)
    )
    return DriftNodes(ctx), memory


def team_paths(memory: RunMemory, team: str) -> set:
    return {log.path for name, log in memory.logs().items() if name.startswith(f"{team}/")}


def test_team_view_holds_only_shared_and_own_logs(nodes):
    drift, memory = nodes
    for team, other in (("pros", "cons"), ("cons", "pros")):
        view = memory.seat(team)
        paths = {log.path for log in reachable_logs(view)}
        assert paths == team_paths(memory, team) | {memory.shared.path}
        assert not paths & team_paths(memory, other)
        assert memory.events.path not in paths
        # the agents are built on this team's view, not the other's
        for agents in (drift.persona_agent, drift.thinking_agent, drift.critique_agent):
            assert agents[team].view is view


def test_agent_cannot_reach_other_teams_logs(nodes):
    drift, memory = nodes
    for team, other in (("pros", "cons"), ("cons", "pros")):
        for agents in (drift.persona_agent, drift.thinking_agent, drift.critique_agent):
            paths = {log.path for log in reachable_logs(agents[team])}
            assert not paths & team_paths(memory, other), f"{team} agent reaches {other} logs"
            assert memory.seat(team).persona.path in paths  # the walk does find what it may reach

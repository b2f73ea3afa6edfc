"""Scripted dry passes: a cell's own config, run in-process with every role
answered by the scripted model, so the plan sees the format's real call
structure and the prompts it really renders, and no paid model is called.

A pass changes only what a plan needs changed: the run's length (``rounds``,
or ``format.exchanges`` for the moderated format; interview rounds past it
asked at its last round), a temporary folder, no
budget, no tracing, search in-process, and every role's model. A role whose
model is scripted keeps its spec, knobs, temperature and seed, so a scripted
cell's pass is the run itself. Any other role gets ``scripted:default`` at
the scripted model's reference temperature, and the cell's seed gives way to
a fixed one: the words differ, their sizes and the structure do not, and cells
of an API sweep that differ only in temperature or replicate share one pass.

Three kinds of pass:

- ``point``: the scripted model as configured (for an API model, its
  defaults: the critic approves the first draft, a fact-check fails one
  speech in five, a panel judge stops at even odds);
- ``low``: nothing rejected, every check passed, a panel judge stopping at
  its first chance; and ``short``, the same but every fact-check failed, so
  a side is disqualified as soon as ``format.max_strikes`` allows (the
  shortest moderated debate);
- ``high``: every draft rejected to the loop-lock cap (the last approved, so
  no abort cuts the run short), every fact-check failed to the re-speech
  cap with no disqualification, every citation bad, a panel judge never
  stopping early, and every string of every reply padded to the length its
  schema allows, so later prompts carry replies as long as they can be.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf, open_dict

from harness.config import resolve
from harness.engine import run_debate
from harness.formats import get_format
from harness.formats.base import Format
from harness.models.base import ChatModel, Completion, ModelRequest
from harness.models.registry import build_model
from harness.models.scripted import REFERENCE_TEMPERATURE
from harness.models.structured import CHARS_PER_TOKEN, min_tokens
from harness.schema import LOCAL_ONLY, Config, ModelConfig

Kind = Literal["point", "low", "short", "high"]
PLAN_ROLE = "plan_role"  # a model kwarg naming the role, so each role gets a recorder of its own
_NO_BUDGET = {"usd": None, "tokens": None, "sweep_usd": None, "sweep_tokens": None}
_LOW = {"reject_first": 0, "factcheck_fail_rate": 0.0, "synthesize_rate": 1.0, "bad_citation_rate": 0.0}
_KNOBS: dict[Kind, dict[str, Any]] = {
    "point": {},
    "low": _LOW,
    "short": {**_LOW, "factcheck_fail_rate": 1.0},
    "high": {"factcheck_fail_rate": 1.0, "synthesize_rate": 0.0, "bad_citation_rate": 1.0},
}
# format options the ceiling pass sets, where the format has them: nobody is
# disqualified and no cap aborts the run, so every retry is made
_HIGH_FORMAT = {"max_strikes": 10**6, "on_speech_cap": "publish_last"}
# fields the scripted model ties to the passages in its prompt: padding them breaks a citation
_KEEP_LENGTH = frozenset({"id", "quote", "passage", "query"})
_FILLER = " and the evidence for this point holds"


@dataclass(frozen=True)
class Call:
    """One model call of a dry pass: what was sent and what came back."""

    role: str  # the model role that answered
    prompt: tuple[str, ...]  # each message's content
    reply: str
    max_tokens: int
    least_chars: int  # the shortest valid reply, in characters (the reply budget's fit)
    structured: bool
    tag: tuple[str, str] = ("", "")  # the call's (team, role) tags, as a run's replies record them
    round: int = 0  # the round it was asked at


def length_key(cfg: Config) -> tuple[str, int]:
    """(the key that sets the run's length, planned rounds per unit of it)."""
    return get_format(cfg.format.name).length_key


def units_of(cfg: Config) -> int:
    key, _ = length_key(cfg)
    value = cfg.rounds if key == "rounds" else getattr(cfg.format, key.split(".", 1)[1])
    return int(value)


def asked_rounds(cfg: Config, units: int) -> dict[int, int]:
    """{chosen interview round: the round a pass of ``units`` asks it at}: a pass
    shorter than the run asks its interviews past its end at its last round,
    where the prompts are as long as a later round's once the window is full."""
    last = rounds_of(cfg, units)
    return {r: min(r, last) for r in cfg.interviews.rounds}


def rounds_of(cfg: Config, units: int) -> int:
    """The rounds a run of ``cfg`` at ``units`` units plans (the moderated format's
    exchanges have an opening and a closing speech about them)."""
    key = length_key(cfg)[0]
    if key == "rounds":
        return units
    options = replace(cfg.format, **{key.split(".", 1)[1]: units})
    return get_format(cfg.format.name).planned_rounds(replace(cfg, format=options))


def scripted(spec: str) -> bool:
    return spec.startswith("scripted:")


class Recorder:
    """The scripted model answering one role, keeping every call it answers."""

    def __init__(self, inner: ChatModel, role: str, calls: list[Call], pad: bool) -> None:
        self.inner, self.role, self.calls, self.pad = inner, role, calls, pad
        self.spec = inner.spec

    def model_files(self) -> dict[str, str]:
        return {}

    def complete(self, request: ModelRequest) -> Completion:
        completion = self.inner.complete(request)
        if self.pad and request.schema is not None:
            completion = replace(completion, text=padded(completion.text, request.schema))
        schema = request.schema
        least = math.ceil(min_tokens(schema) * CHARS_PER_TOKEN) if schema is not None else 0
        prompt = tuple(str(m.get("content") or "") for m in request.messages)
        tag = (str(request.tags.get("team")), str(request.tags.get("role")))
        self.calls.append(
            Call(
                self.role,
                prompt,
                completion.text,
                request.max_tokens,
                least,
                schema is not None,
                tag,
                int(request.tags.get("round") or 0),
            )
        )
        return completion


def padded(text: str, schema: dict[str, Any]) -> str:
    """A JSON reply with every free string filled to its schema's ``maxLength``."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(_pad(value, schema, schema))


def _pad(value: Any, node: dict[str, Any], root: dict[str, Any]) -> Any:
    if "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    node = next((o for o in node.get("anyOf", []) if o.get("type") != "null"), node)
    if isinstance(value, dict):
        props = node.get("properties", {})
        return {k: v if k in _KEEP_LENGTH else _pad(v, props.get(k, {}), root) for k, v in value.items()}
    if isinstance(value, list):
        return [_pad(v, node.get("items", {}), root) for v in value]
    if isinstance(value, str) and "maxLength" in node and not {"enum", "pattern"} & node.keys():
        limit = int(node["maxLength"])
        return (value + _FILLER * (limit // len(_FILLER) + 1))[:limit]
    return value


def dry_config(cfg: DictConfig, settings: Config, kind: Kind, units: int, seed_offset: int) -> DictConfig:
    """The cell's config as one dry pass runs it (see the module docstring)."""
    fmt = get_format(settings.format.name)
    out = copy.deepcopy(cfg)
    specs = {role: settings.role_model(role)[0].spec for role in fmt.model_roles(settings)}
    all_api = not any(scripted(s) for s in specs.values())
    with open_dict(out):
        OmegaConf.update(out, length_key(settings)[0], units, merge=False)
        if asked := asked_rounds(settings, units):
            OmegaConf.update(out, "interviews.rounds", sorted(set(asked.values())), merge=False)
        out.progress, out.chat, out.resume, out.run_name = False, None, None, None
        out.seed = (0 if all_api else settings.seed) + seed_offset
        if all_api:  # what only tells API cells apart (a temperature, a replicate, a model) is left out
            out.replicate, out.llm.temperature = 0, REFERENCE_TEMPERATURE
            out.model.spec, out.model.kwargs = "scripted:default", {}
        out.budget = dict(_NO_BUDGET)
        OmegaConf.update(out, "tracing.otel", False, merge=False)
        if "search" in out:
            out.search.transport = "local"  # the same passages, without the MCP server's process
        if not all(scripted(s) for s in specs.values()):
            # the scripted stand-in takes no local-only key: the chat prompt, not a base model's
            # document (a few words shorter; a pilot calibrates what is sent), and no penalty
            for name, (neutral, _) in LOCAL_ONLY.items():
                OmegaConf.update(out, f"model.{name}", neutral, merge=False)
        for role, spec in specs.items():
            own = scripted(spec)
            OmegaConf.update(out, f"roles.{role}.spec", spec if own else "scripted:default", merge=False)
            OmegaConf.update(out, f"roles.{role}.kwargs", {PLAN_ROLE: role}, merge=False)
            if not own:
                OmegaConf.update(out, f"roles.{role}.temperature", REFERENCE_TEMPERATURE, merge=False)
        knobs = {"latency_s": 0.0, "error_rate": 0.0, **_KNOBS[kind]}
        if kind == "high":
            knobs["reject_first"] = settings.critic.max_iterations - 1
            out.critic.on_loop_lock = "publish_last"
            for key, value in _HIGH_FORMAT.items():
                if key in out.format:
                    out.format[key] = value
        for key, value in knobs.items():
            OmegaConf.update(out, f"model.{key}", value, merge=False)
    return out


def cache_key(cfg: DictConfig) -> str:
    """Two passes of equal configs record the same calls."""
    data = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(data, dict)
    return json.dumps({k: v for k, v in data.items() if k not in ("runs_root", "run_name")}, sort_keys=True)


def run_pass(cfg: DictConfig, kind: Kind) -> list[Call]:
    """Run one dry pass in a temporary folder (removed after) and return its calls."""
    calls: list[Call] = []

    def build(model_cfg: ModelConfig) -> ChatModel:
        role = str(model_cfg.kwargs.get(PLAN_ROLE, "?"))
        return Recorder(build_model(model_cfg), role, calls, pad=kind == "high")

    shm = Path("/dev/shm")  # a pass writes a run folder; on tmpfs its fsyncs cost nothing
    folder = Path(tempfile.mkdtemp(prefix="drift-plan-", dir=shm if shm.is_dir() else None))
    try:
        with open_dict(cfg):
            cfg.runs_root = str(folder)
        raw = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(raw, dict)
        result = run_debate(resolve(cfg), {str(k): v for k, v in raw.items()}, build=build)
        if result.manifest.status == "interrupted":  # no budget here: a Ctrl-C stopped the pass part-way
            raise KeyboardInterrupt  # its calls are a part of the cell's, planned they would be wrong
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return calls


class Passes:
    """Dry passes of the cells being planned, each run once however many cells share it."""

    def __init__(self) -> None:
        self.done: dict[str, list[Call]] = {}
        self.runs = 0
        self.seconds = 0.0  # the passes' wall time, and their calls: the engine's own time a call
        self.made = 0

    def calls(self, cfg: DictConfig, settings: Config, kind: Kind, units: int, seed: int) -> list[Call]:
        dry = dry_config(cfg, settings, kind, units, seed)
        key = f"{kind}|{cache_key(dry)}"
        if key not in self.done:
            started = time.perf_counter()
            self.done[key] = run_pass(dry, kind)
            self.seconds += time.perf_counter() - started
            self.runs, self.made = self.runs + 1, self.made + len(self.done[key])
        return self.done[key]

    def engine_s(self) -> float:
        """Seconds the harness itself spends on a call (the scripted model takes none):
        the plan adds it to each call's own time. Set-up is in it too, spread over a short pass."""
        return self.seconds / self.made if self.made else 0.0


def window_plateau(settings: Config, fmt: Format) -> int:
    """The first unit from which prompts stop growing: the window the format's
    nodes read (``memory.window_rounds``, or the format's longer one), plus one."""
    _, per = length_key(settings)
    return math.ceil(fmt.window_rounds(settings) / per) + 1

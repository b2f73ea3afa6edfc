"""The probe set a run carries: loaded from ``probes.*`` of the validated
config (``conf/probes/<name>.yaml`` picks the catalog, ``probes.use`` the
probes), and the rules text the team's prompts carry.

With probes off, ``rules`` is empty and every prompt is byte-identical to a
run made before probes existed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.probes.checkers import Asker, param_problem, run_checker
from harness.schema_sections import ConfigError, ProbesConfig
from harness.store.records import record_id

if TYPE_CHECKING:
    from harness.schema import Config

PROBE_ROLE = "probe"  # the role of every record a probe writes
PROBE_LOG = "probes"  # each probed seat's private log: <seat>/probes.jsonl
# Modules whose code shapes a probed run's prompts and verdicts: fingerprinted when probes are on.
PROBE_MODULES = ("harness.agents.probe", "harness.probes.catalog", "harness.probes.checkers")


@dataclass(frozen=True)
class Probe:
    """One probe of a run: its instruction (params filled in), its question, its checker."""

    name: str
    instruction: str
    question: str
    checker: str
    params: dict[str, Any] = field(default_factory=dict)

    def check(self, reply: str, asker: Asker) -> bool:
        return run_checker(self.checker, self.params, reply, asker)


def active_probes(cfg: ProbesConfig) -> tuple[Probe, ...]:
    """The probes a run asks, in ``probes.use`` order (catalog order if null); none when off."""
    if not cfg.enabled:
        return ()
    probes = []
    for name in cfg.active():
        spec = cfg.catalog[name]
        instruction = spec.instruction.format(**spec.params)
        probes.append(Probe(name, instruction, spec.question, spec.checker, dict(spec.params)))
    return tuple(probes)


def rules(cfg: Config) -> str:
    """What a team's persona and thinking prompts add: its probes' instructions,
    as one sentence starting with a space; empty when probes are off."""
    probes = active_probes(cfg.probes)
    if not probes:
        return ""
    listed = " ".join(f"({i}) {p.instruction}" for i, p in enumerate(probes, 1))
    return f" Your team always follows these rules in everything it writes: {listed}"


def probe_id(round_: int, team: str, index: int, name: str) -> str:
    """A probe record's id, e.g. ``r0003.pros.probe.i2.short_answer``: ``iteration``
    is the probe's place in the run's probe list, so its prompt, reply and seed
    differ from every other probe's of the same turn."""
    return record_id(round_, team, PROBE_ROLE, index, name)


def check_specs(probes: ProbesConfig) -> None:
    """Each probe's checker takes its params, and they fill its instruction;
    raise a one-line ``ConfigError`` naming the key at fault. (The schema checks
    the rest of a probe; the checkers are the probes' own.)"""
    for name, spec in probes.catalog.items():
        key = f"probes.catalog.{name}"
        if (problem := param_problem(spec.checker, spec.params)) is not None:
            raise ConfigError(f"{key}.{problem[0]}: {problem[1]}")
        try:
            spec.instruction.format(**spec.params)
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"{key}.instruction: cannot fill {exc} from its params") from None

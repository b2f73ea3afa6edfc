"""Behavioural probes (after Li et al. 2024, "Measuring and Controlling
Persona Drift in Language Model Dialogs"): a team's persona carries
instructions ("answer in under 60 words"), and after each of its turns the
team is asked a fixed question per probe in a fork of its view; a
deterministic checker scores whether the reply followed the instruction.
See docs/probes.md.

- ``checkers``: the registry of checker functions (``CHECKERS``);
- ``catalog``: the probe set a run carries (``active_probes``) and the rules
  text its prompts add (``rules``);
- ``integrity``: ``verify``'s check that probes write only to their own team.
The probe role itself is ``harness.agents.probe``.
"""

from harness.probes.catalog import PROBE_LOG, PROBE_MODULES, PROBE_ROLE, Probe, active_probes, probe_id, rules
from harness.probes.checkers import CHECKERS, Asker, Checker, checker, param_problem, run_checker
from harness.probes.isolation import check_probes

__all__ = [
    "CHECKERS",
    "PROBE_LOG",
    "PROBE_MODULES",
    "PROBE_ROLE",
    "Asker",
    "Checker",
    "Probe",
    "active_probes",
    "check_probes",
    "checker",
    "param_problem",
    "probe_id",
    "rules",
    "run_checker",
]

"""Behavioural probes (after Li et al. 2024, "Measuring and Controlling
Persona Drift in Language Model Dialogs"): a team's persona carries
instructions ("answer in under 60 words"), and after each of its turns the
team is asked a fixed question per probe in a fork of its view; a
deterministic checker scores whether the reply followed the instruction.
See docs/probes.md.

- ``checkers``: the registry of checker functions (``CHECKERS``);
- ``catalog``: the probe set a run carries (``active_probes``) and the rules
  text its prompts add (``rules``);
- ``isolation``: the drift format's ``verify`` check that probes write only
  to their own team.
The probe role itself is ``harness.agents.probe``.

Import from the modules: this package imports none of them, so the schema
can import ``checkers`` without loading the rest.
"""

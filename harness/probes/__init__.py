"""Behavioural probes (after Li et al. 2024, "Measuring and Controlling
Persona Drift in Language Model Dialogs"): a team's persona carries
instructions ("answer in under 60 words"), and after each of its turns the
team is asked a fixed question per probe in a fork of its view; a
deterministic checker scores whether the reply followed the instruction.
See docs/probes.md.

- ``checkers``: the registry of checker functions (``CHECKERS``);
- ``catalog``: the probe set a run carries (``active_probes``) and the rules
  text its prompts add (``rules``);
- ``questionnaire``: checkpoint interviews' items (``questionnaire``) and
  answer ids: a fixed questionnaire asked of each seat in a fork of its view
  at chosen rounds (docs/interviews.md);
- ``isolation``: the ``verify`` checks that probes and interviews write only
  to their own seat.
The probe and interview roles themselves are ``harness.agents.probe`` and
``harness.agents.interview``.

Import from the modules: this package imports none of them, so the schema
can import ``checkers`` without loading the rest.
"""

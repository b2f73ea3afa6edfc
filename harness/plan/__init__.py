"""A plan before anything runs: ``python -m harness.plan <harness.run's overrides>``.

The story, one module each: compose the cells as ``harness.run`` would
(``cells``), run each on the scripted model in a few short dry passes that
render the real prompts (``dry``), count and extrapolate their calls and
tokens to the cell's length as a point and an interval (``estimate``), price
them and time them at the configured limits (``totals``), and print a row per
cell and the totals (``cli``). Nothing here calls a paid model.
"""

from harness.plan.cli import build_plan, main, parse
from harness.plan.totals import Plan

__all__ = ["Plan", "build_plan", "main", "parse"]

"""Console plumbing shared by the commands: one-line errors, the progress
bar and the closing report. The commands themselves are ``harness.run``,
``harness.resume``, ``harness.verify``, ``harness.export``, ``harness.store``
and ``harness.sweep``."""

from harness.cli.errors import fail, one_line
from harness.cli.progress import Progress, summary_line

__all__ = ["Progress", "fail", "one_line", "summary_line"]

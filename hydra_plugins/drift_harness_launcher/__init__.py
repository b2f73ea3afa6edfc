"""Hydra registers launchers it finds in the ``hydra_plugins`` namespace, by
the module that defines them; the launcher's code lives with the sweep code
(``harness.sweep.launcher``), and this is its name for Hydra."""

from harness.sweep import launcher


class InProcessLauncher(launcher.InProcessLauncher):
    """Cells of a sweep as threads of one process: ``sweep.concurrency=N``."""

"""Hydra registers the plugins it finds in the ``hydra_plugins`` namespace, by
the module that defines them: the in-process launcher, whose code lives with
the sweep code (``harness.sweep.launcher``), and the search path of formats
installed from outside the package (``harness.plugins``)."""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from harness.plugins import conf_search_paths
from harness.sweep import launcher


class InProcessLauncher(launcher.InProcessLauncher):
    """Cells of a sweep as threads of one process: ``sweep.concurrency=N``."""


class FormatConfigs(SearchPathPlugin):
    """The config folders of formats installed from outside the package
    (entry point group ``drift_harness.conf``, ``harness.plugins``)."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for provider, path in conf_search_paths():
            search_path.append(provider=provider, path=path)

"""Formats installed from outside the package, found through entry points.

A distribution that ships a debate format declares two entry points:

    [project.entry-points."drift_harness.formats"]
    interview = "my_formats:INTERVIEW"      # a ``harness.formats.base.Format``
    [project.entry-points."drift_harness.conf"]
    interview = "pkg://my_formats.conf"     # a Hydra search path: its ``format/*.yaml``

``harness.formats.get_format`` loads the first group when it meets a name it
does not know, and Hydra's search path gains the second through the harness's
own search-path plugin (``hydra_plugins.drift_harness_launcher``), so
``python -m harness.run format=interview`` and ``harness.resume`` work in a new
process with no ``hydra.searchpath=`` and no import of the plugin's own.
This module reads only package metadata: Hydra's plugin scan imports it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

FORMATS_GROUP = "drift_harness.formats"
CONF_GROUP = "drift_harness.conf"


def format_entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=FORMATS_GROUP), key=lambda ep: ep.name)


def conf_search_paths() -> list[tuple[str, str]]:
    """(provider name, path) of each installed format's config folder, by name."""
    return [(f"drift-harness-plugin-{ep.name}", ep.value) for ep in entry_points(group=CONF_GROUP)]

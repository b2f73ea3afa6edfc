"""Formats installed from outside the package, found through entry points.

A distribution that ships a debate format declares two entry points:

    [project.entry-points."drift_harness.formats"]
    interview = "my_formats:INTERVIEW"      # a ``harness.formats.base.Format``
    [project.entry-points."drift_harness.conf"]
    interview = "pkg://my_formats.conf"     # a Hydra search path: its ``format/*.yaml``
    [project.entry-points."drift_harness.records"]
    interview = "my_formats.records"        # its record kinds and events, if it has any

``harness.formats.get_format`` loads the first group when it meets a name it
does not know, and Hydra's search path gains the second through the harness's
own search-path plugin (``hydra_plugins.drift_harness_launcher``), so
``python -m harness.run format=interview`` and ``harness.resume`` work in a new
process with no ``hydra.searchpath=`` and no import of the plugin's own.
A reader that meets a kind or event it does not know imports the third
group's modules, once (``harness.store.records.kinds``): those modules
declare record classes and events only, importing nothing above
``harness.store.records``, so reading a run pulls in no engine or format.

The live sweep page's drift index comes the same way, from the ``analysis``
package the harness may not import:

    [project.entry-points."drift_harness.live_signals"]
    drift = "analysis.live:score_rounds"    # (sweep folder, cells) -> (what it draws, {cell: {round: value}})
This module reads only package metadata: Hydra's plugin scan imports it.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any

FORMATS_GROUP = "drift_harness.formats"
CONF_GROUP = "drift_harness.conf"
RECORDS_GROUP = "drift_harness.records"
LIVE_SIGNALS_GROUP = "drift_harness.live_signals"


class PluginError(ValueError):
    """An installed plugin's module that does not import (a ValueError: a reader
    reports the line it was reading as unreadable, naming the plugin)."""


def format_entry_points() -> list[EntryPoint]:
    return sorted(entry_points(group=FORMATS_GROUP), key=lambda ep: ep.name)


def conf_search_paths() -> list[tuple[str, str]]:
    """(provider name, path) of each installed format's config folder, by name."""
    return list(_conf_search_paths(tuple(sys.path)))


@functools.cache  # a command asks three times as it starts; each look reads every distribution's metadata
def _conf_search_paths(path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((f"drift-harness-plugin-{ep.name}", ep.value) for ep in entry_points(group=CONF_GROUP))


def import_record_modules() -> list[str]:
    """Import each installed plugin's records module; the names imported."""
    names = []
    for ep in sorted(entry_points(group=RECORDS_GROUP), key=lambda ep: ep.name):
        try:
            importlib.import_module(ep.value)
        except Exception as exc:  # noqa: BLE001 (any error of the plugin's: one line naming it)
            raise PluginError(f"records plugin {ep.name!r} ({ep.value}) does not import: {exc}") from exc
        names.append(ep.value)
    return names


def live_signals() -> Callable[..., Any] | str:
    """The installed live drift scorer (the first by name), or one line saying why there is none."""
    found = sorted(entry_points(group=LIVE_SIGNALS_GROUP), key=lambda ep: ep.name)
    if not found:
        return f"no {LIVE_SIGNALS_GROUP} entry point installed (pip install -e '.[analysis]')"
    try:
        return found[0].load()  # type: ignore[no-any-return]
    except Exception as exc:  # noqa: BLE001 (any error of the plugin's: one line naming it)
        return f"{LIVE_SIGNALS_GROUP} {found[0].name!r} ({found[0].value}) does not load: {exc}"

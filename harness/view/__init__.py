"""The run viewer: ``python -m harness.view <runs_root | run_dir>`` serves the
runs list, each run's transcript with every turn's private history, its
verify verdict and drift trajectory, two runs side by side, each sweep
followed live (``/live``) and a search of every transcript (``/search``);
``--static`` writes the run pages as HTML files.

Its names are imported on first use: a sweep's driver reads ``driver.lock``
through ``harness.view.watch`` and would otherwise pay for Jinja, SQLite and
the server (~40 ms of CPU a sweep command).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Catalog": "harness.view.catalog",
    "Links": "harness.view.pages",
    "compare_page": "harness.view.pages",
    "run_page": "harness.view.pages",
    "runs_page": "harness.view.pages",
    "verify_page": "harness.view.pages",
    "route": "harness.view.server",
    "serve": "harness.view.server",
    "export_static": "harness.view.static",
}

if TYPE_CHECKING:
    from harness.view.catalog import Catalog
    from harness.view.pages import Links, compare_page, run_page, runs_page, verify_page
    from harness.view.server import route, serve
    from harness.view.static import export_static


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.view' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


__all__ = [
    "Catalog",
    "Links",
    "compare_page",
    "export_static",
    "route",
    "run_page",
    "runs_page",
    "serve",
    "verify_page",
]

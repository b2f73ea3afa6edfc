"""The run viewer: ``python -m harness.view <runs_root | run_dir>`` serves the
runs list, each run's transcript with every turn's private history, its
verify verdict and drift trajectory, two runs side by side, each sweep
followed live (``/live``) and a search of every transcript (``/search``);
``--static`` writes the run pages as HTML files."""

from harness.view.catalog import Catalog
from harness.view.pages import Links, compare_page, run_page, runs_page, verify_page
from harness.view.server import route, serve
from harness.view.static import export_static

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

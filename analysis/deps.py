"""Optional dependencies of the analysis extra, imported on first use.

The harness installs without ``.[analysis]``; analysis code asks for each
third-party package here, so a missing one fails with one line that names
it and the extra that brings it, instead of a traceback from deep inside.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

EXTRA_HINT = "pip install -e '.[analysis]'"


class MissingDependency(ImportError):
    """An analysis package is not installed; ``str()`` is one line."""


def require(module: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise ``MissingDependency`` naming its PyPI package."""
    try:
        with warnings.catch_warnings():
            # textstat 0.7.4 imports pkg_resources, which warns on import.
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return importlib.import_module(module)
    except ImportError as exc:
        name = package or module.split(".")[0]
        raise MissingDependency(
            f"analysis needs the '{name}' package ({exc.name or module} not importable); run: {EXTRA_HINT}"
        ) from None

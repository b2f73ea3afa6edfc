"""Where the shipped Hydra configs are.

``conf/`` lives at the top of the repository, and the wheel ships it inside
the package as ``harness/conf`` (``[tool.setuptools] package-dir`` in
pyproject.toml). Everything that needs the config folder asks ``conf_dir``.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def conf_dir() -> Path:
    """The shipped config folder: ``harness/conf`` in an installed wheel,
    ``<repo>/conf`` in a source checkout (an editable install, or a bare
    ``python -m`` from the repo). When neither exists it is the packaged
    place, so Hydra's own error names where the configs were expected."""
    packaged = _HERE / "conf"
    source = _HERE.parent / "conf"
    if not packaged.is_dir() and (source / "config.yaml").is_file():
        return source
    return packaged

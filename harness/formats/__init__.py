"""Debate formats: each module defines one ``Format`` object (see
``harness.formats.base``), and ``FORMATS`` maps a format's name to it."""

from __future__ import annotations

from typing import Any

from harness.formats.base import Format, FormatOptions, RunLogs, Seat
from harness.formats.drift import DRIFT
from harness.formats.grounded import GROUNDED
from harness.formats.judge_refine import JUDGE_REFINE
from harness.formats.moderated import MODERATED
from harness.formats.panel import PANEL
from harness.store.records import RunLayout

FORMATS: dict[str, Format] = {f.name: f for f in (DRIFT, PANEL, MODERATED, JUDGE_REFINE, GROUNDED)}


def get_format(name: str) -> Format:
    """The format called ``name``; a one-line ``ConfigError`` if there is none."""
    from harness.config import ConfigError

    if name not in FORMATS:
        raise ConfigError(f"format.name: unknown format {name!r}; known: {', '.join(sorted(FORMATS))}")
    return FORMATS[name]


def layout_of(manifest_layout: RunLayout | None, config: dict[str, Any]) -> RunLayout:
    """A run's layout: as its manifest recorded it, or, for a run made before
    manifests kept one, as its format lays out its recorded config."""
    if manifest_layout is not None:
        return manifest_layout
    from harness.config import validate

    return get_format(str((config.get("format") or {}).get("name", "drift"))).layout(validate(config))


__all__ = [
    "DRIFT",
    "FORMATS",
    "GROUNDED",
    "JUDGE_REFINE",
    "MODERATED",
    "PANEL",
    "Format",
    "FormatOptions",
    "RunLogs",
    "Seat",
    "get_format",
    "layout_of",
]

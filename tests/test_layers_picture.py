"""docs/images/layers.svg draws the layers lint-imports enforces: each row of
.importlinter's harness-layers contract is a row of text in the committed
picture (regenerate it with ``make layers``)."""

from __future__ import annotations

import sys
from html import unescape
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
sys.path.insert(0, str(DOCS))

import draw_layers  # noqa: E402


def test_the_committed_picture_has_every_layer_of_the_contract_in_order(tmp_path):
    svg = unescape(draw_layers.OUT.read_text())
    rows = ["  ·  ".join(draw_layers.short(m) for m in row) for row in draw_layers.layers()]
    assert len(rows) > 10
    positions = [svg.find(f">{row}<") for row in rows]
    assert -1 not in positions, [r for r, p in zip(rows, positions, strict=True) if p < 0]  # make layers
    assert positions == sorted(positions)
    fresh = unescape(draw_layers.draw(tmp_path / "layers.svg").read_text())
    assert all(f">{row}<" in fresh for row in rows)

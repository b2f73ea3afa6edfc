"""Draw docs/images/layers.svg, the import layers of docs/architecture.md,
from the contracts lint-imports checks (.importlinter), so the picture
cannot drift from what is enforced.

    .venv/bin/python docs/draw_layers.py     # or: make layers
"""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "layers.svg"


def layers(contract: str = "importlinter:contract:harness-layers") -> list[list[str]]:
    """Each layer of a layers contract, highest first, as its modules."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    rows = [line.strip() for line in parser[contract]["layers"].splitlines() if line.strip()]
    return [[m.strip() for m in row.replace("|", ":").split(":")] for row in rows]


def short(module: str) -> str:
    return module.removeprefix("harness.") or module


def draw(out: Path = OUT) -> Path:
    stack = layers()
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: greppable, and no font paths
    plt.rcParams["svg.hashsalt"] = "layers"  # ids stable between two draws
    fig, ax = plt.subplots(figsize=(11, 0.42 * len(stack) + 0.8))
    for i, row in enumerate(stack):
        y = len(stack) - 1 - i
        ax.add_patch(plt.Rectangle((0, y + 0.08), 1, 0.84, color="#dfe9f5" if i % 2 else "#eef3f9"))
        ax.text(0.01, y + 0.5, "  ·  ".join(short(m) for m in row), va="center", fontsize=8.5)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, len(stack))
    ax.axis("off")
    ax.set_title(
        "harness import layers, highest first: a module imports only from rows below it", fontsize=10
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(draw(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))

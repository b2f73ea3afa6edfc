"""How fast a long run opens in the viewer: the first page of a 1,000-round
scripted debate (default), cold (nothing read yet) and warm (the run read
and cached), beside a 10-round run, timed through the same route the
server answers with. The goal is a first screen under 2 s.

    .venv/bin/python benchmarks/viewer_first_screen.py [--rounds 1000]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config import resolve
from harness.engine import run_debate
from harness.view import Catalog, route
from harness.view.catalog import _read_cached

CONF = Path(__file__).resolve().parents[1] / "conf"


def make_run(root: Path, rounds: int, name: str) -> None:
    overrides = [
        "model=scripted",
        "progress=false",
        f"rounds={rounds}",
        f"runs_root={root}",
        f"run_name={name}",
    ]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    raw: Any = OmegaConf.to_container(cfg, resolve=True)
    with patch("os.fsync", lambda fd: None):  # the runs' durability is not what is measured here
        run_debate(resolve(cfg), raw)


def timed(catalog: Catalog, target: str) -> tuple[float, int]:
    started = time.perf_counter()
    status, html = route(catalog, target)
    assert status == 200, html[:200]
    return time.perf_counter() - started, len(html)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        make_run(root, args.rounds, "long")
        make_run(root, 10, "short")
        print(f"made the runs in {time.perf_counter() - started:.1f} s")
        catalog = Catalog(root)
        print(f"{'page':<28} {'cold s':>8} {'warm s':>8} {'KB':>6}")
        for target in ("/", "/run/short", "/run/long", f"/run/long?page={args.rounds // 20}"):
            _read_cached.cache_clear()
            cold, size = timed(catalog, target)
            warm, _ = timed(catalog, target)
            print(f"{target:<28} {cold:>8.3f} {warm:>8.3f} {size / 1024:>6.0f}")
        _read_cached.cache_clear()
        long_cold, _ = timed(catalog, "/run/long")
        short_cold, _ = timed(catalog, "/run/short")
        print(f"first screen of {args.rounds} rounds ÷ of 10 rounds (cold): {long_cold / short_cold:.1f}x")


if __name__ == "__main__":
    main()

"""Time of the SQL store's cold build against an incremental one.

Makes N scripted runs in a temporary root (three drift runs of 2 rounds for
each panel run of 2 rounds, in-process through ``harness.engine.run_debate``,
one composed config per format, fsync made a no-op while they are written),
then times ``build_store`` three times: cold (no store yet), incremental with
nothing changed (every run's stamp checked, none read), and incremental with
one run's log touched (that run alone read again).

    .venv/bin/python benchmarks/store_build.py [--runs 1000] [--root DIR]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from harness.config import Resolved, resolve
from harness.engine import run_debate
from harness.store.sql import build_store

CONF = Path(__file__).resolve().parents[1] / "conf"
FORMATS = {"drift": ["rounds=2"], "panel": ["format=panel", "rounds=2"]}


def composed(root: Path) -> dict[str, tuple[Resolved, dict[str, Any]]]:
    """One validated config and its raw dict per format, reused for every run."""
    out = {}
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for name, overrides in FORMATS.items():
            cfg = compose(
                "config",
                overrides=[
                    "model=scripted",
                    f"runs_root={root}",
                    "progress=false",
                    *overrides,
                ],
            )
            raw: Any = OmegaConf.to_container(cfg, resolve=True)
            out[name] = (resolve(cfg), raw)
    return out


def make_runs(root: Path, n: int) -> float:
    """Write ``n`` runs under ``root``; returns the seconds it took."""
    configs = composed(root)
    real_fsync = os.fsync
    os.fsync = lambda fd: None  # the runs' durability is not what is measured here
    started = time.perf_counter()
    try:
        for i in range(n):
            name = "panel" if i % 4 == 3 else "drift"
            run, raw = configs[name]
            run_name = f"{name}-{i:05d}"  # named, so no run probes for a free folder name
            named = dataclasses.replace(run.cfg, seed=i, run_name=run_name)
            result = run_debate(dataclasses.replace(run, cfg=named), {**raw, "seed": i, "run_name": run_name})
            assert result.manifest.status == "completed", result.run_dir
    finally:
        os.fsync = real_fsync
    return time.perf_counter() - started


def timed_build(root: Path) -> tuple[float, str]:
    started = time.perf_counter()
    report = build_store(root)
    return time.perf_counter() - started, report.summary()


def touch_one(root: Path) -> None:
    log = next(root.glob("drift-*/pros/thinking.jsonl"))
    st = log.stat()
    os.utime(log, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def table_sizes(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        tables = ("runs", "records", "statements", "events", "usage")
        return ", ".join(f"{t} {con.execute(f'SELECT count(*) FROM {t}').fetchone()[0]}" for t in tables)
    finally:
        con.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--root", type=Path, help="make the runs here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="store-build-") as tmp:
        root = args.root or Path(tmp) / "runs"
        made_s = make_runs(root, args.runs)
        print(f"made {args.runs} scripted runs (3 drift : 1 panel, 2 rounds each) in {made_s:.1f} s")
        cold_s, cold = timed_build(root)
        warm_s, warm = timed_build(root)
        touch_one(root)
        one_s, one = timed_build(root)
        db = root / "_store.sqlite"
        print(f"  cold build:                 {cold_s:8.3f} s   ({cold})")
        print(f"  incremental, none changed:  {warm_s:8.3f} s   ({warm})")
        print(f"  incremental, one touched:   {one_s:8.3f} s   ({one})")
        print(f"  cold / incremental:         {cold_s / warm_s:8.1f}x")
        print(
            f"  per run: cold {cold_s / args.runs * 1e3:.2f} ms, incremental {warm_s / args.runs * 1e3:.3f} ms"
        )
        print(f"  store: {db.stat().st_size / 1e6:.1f} MB; rows: {table_sizes(db)}")


if __name__ == "__main__":
    main()

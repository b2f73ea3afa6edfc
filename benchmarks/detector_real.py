"""Detector validation on real text: the ``--real`` block of
``benchmarks/detector_validity.py`` (its docstring says what it measures),
moved here to keep that script one size. No model is called.

The same detectors, tuning rule and rate tables as the scripted validation,
on planted changes spliced from real model turns (``analysis.splice``).
Those live in ``detector_validity``, looked up at each call (``_bench``), so
a caller that narrows its grid (a test) narrows this one too.

    .venv/bin/python benchmarks/detector_validity.py --real research_runs/long,research_runs/pilot \
        --json docs/detector_validity.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

# the library's settings; penalty: detector_validity.DEFAULT_PENALTY, filled in at the call
LIBRARY = {"pelt_column": "drift_index", "trend_column": "drift_index", "alpha": 0.05}


def _bench() -> Any:
    """``detector_validity`` as loaded now (the script, or a test's copy of it)."""
    import detector_validity

    return detector_validity


SCRIPTED_JSON = Path(__file__).resolve().parents[1] / "docs" / "detector_validity.json"


def real_validity(
    sources: list[Any],
    n_tune: int,
    n_held: int,
    embedder: str,
    scripted: dict[str, Any],
    **plan: Any,
) -> dict[str, Any]:
    """Settings tuned, as above, on splices of the tuning sources; rates per model
    on splices of the held-out sources (other cells' runs), at the real-tuned
    settings, at the scripted model's (``scripted['params']``) and at the library's.
    ``plan`` goes to ``analysis.splice.plan`` (``cap``: most rounds; ``cells``), to measure less."""
    from analysis import splice

    dv = _bench()
    library = LIBRARY | {"penalty": dv.DEFAULT_PENALTY}
    started = time.perf_counter()
    tune_src, held_src = splice.split(sources)
    tune_rows = measure_tuning(tune_src, n_tune, embedder, **plan)
    params, grids = dv.tune(tune_rows)
    settings_of = {
        "real-tuned": params,
        "scripted settings": scripted.get("params") or library,
        "library": library,
    }
    pelt = {(p["pelt_column"], p["penalty"]) for p in settings_of.values()}
    held_rows = splice.measure(
        splice.plan(held_src, n_held, dv.HELD_SEED0, **plan), embedder, pelt, dv.TREND_COLUMNS
    )
    tables = model_tables(tune_rows, held_rows, params, settings_of)
    held_tables = {f"HELD-OUT {m}": t["held-out real-tuned"] for m, t in tables.items()}
    column = params["pelt_column"]
    shift = {m: planted_shift([r for r in held_rows if r["model"] == m], column) for m in tables}
    return {
        "embedder": embedder,
        "models": sorted(tables),
        "params": params,
        "scripted_params": settings_of["scripted settings"],
        "tuning_grids": grids,
        "sources": {
            name: source_summary(src) for name, src in (("tuning", tune_src), ("held_out", held_src))
        },
        "splices": {"tuning": n_tune, "held_out": n_held},
        "tables": tables,
        "columns": [f"held-out {name}" for name in settings_of],
        "pooled": {
            m: {name: {k: dv.pooled(v, k) for k in METRICS} for name, v in t.items()}
            for m, t in tables.items()
        },
        "scripted_pooled": {k: dv.pooled(scripted_held(scripted, embedder), k) for k in METRICS},
        "goals": {name: dv.verdict(t) for name, t in held_tables.items()},
        "planted_shift": {"column": column, "median_abs_d": shift},
        "note": REAL_NOTE,
        "timing": {"total_s": time.perf_counter() - started, "splices": len(tune_rows) + len(held_rows)},
        "rows": {"tuning": tune_rows, "held_out": held_rows},  # per splice: its truth and detections
    }


def measure_tuning(tune_src: list[Any], n_tune: int, embedder: str, **plan: Any) -> list[dict[str, Any]]:
    """The detections on the tuning splices, at every setting of the tuning grid."""
    from analysis import splice

    dv = _bench()
    grid = [(c, p) for c in dv.PELT_COLUMNS for p in dv.PENALTIES]
    rows = splice.measure(
        splice.plan(tune_src, n_tune, dv.TUNE_SEED0, **plan), embedder, grid, dv.TREND_COLUMNS
    )
    missing = set(KINDS) - {r["kind"] for r in rows}
    if missing:
        raise SystemExit(
            f"--real: the tuning sources make no {', '.join(sorted(missing))} splice "
            "(stable needs two runs of one cell and seat)"
        )
    return rows


def model_tables(
    tune_rows: list[dict[str, Any]],
    held_rows: list[dict[str, Any]],
    params: dict[str, Any],
    settings_of: dict[str, dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """Per model: its rate table on the tuning splices, then on the held-out
    splices at each of ``settings_of``."""
    dv = _bench()
    tables: dict[str, dict[str, Any]] = {}
    for model in sorted({r["model"] for r in tune_rows + held_rows}):
        mine = [r for r in held_rows if r["model"] == model]
        tables[model] = {
            "tuning": dv.report([r for r in tune_rows if r["model"] == model], params, params["penalty"])
        }
        tables[model] |= {
            f"held-out {name}": dv.report(mine, p, p["penalty"]) for name, p in settings_of.items()
        }
    return tables


def planted_shift(rows: list[dict[str, Any]], column: str) -> dict[str, float | None]:
    """Per splice kind, the planted change's median size in ``column``, in SDs:
    a clean step is 2 or more (a scripted switch at round 20 of 40 measured 1.9
    in affect)."""
    return {k: median_abs([r["shift"][column] for r in rows if r["kind"] == k]) for k in KINDS}


METRICS = ("pelt_hit", "pelt_false", "trend_power", "trend_false", "pelt_any")
KINDS = ("switch", "drift", "stable")


def median_abs(values: list[float]) -> float | None:
    finite = [abs(v) for v in values if v == v]
    return float(statistics.median(finite)) if finite else None


REAL_NOTE = (
    "Each splice is one seat's real turns, several replicate runs of a cell laid end to end where one "
    "run is too short; a switch hands over to another persona (another seat, or another topic) at k; "
    "a drift draws the other persona's turn with a chance rising linearly from round 3 to 1 at 5/6 of "
    "the length; a stable splice hands over between replicate runs of the same cell and seat. "
    "A splice has no opponent, so the opponent signals are missing."
)


def scripted_held(scripted: dict[str, Any], embedder: str) -> dict[str, Any]:
    """The scripted model's held-out rates at its tuned settings, with ``embedder`` where measured."""
    dv = _bench()
    tables = scripted.get("tables", {})
    return tables.get(f"HELD-OUT {embedder}") or tables.get(
        "held-out MiniLM" if embedder == dv.MINILM else "", {}
    )


def source_summary(sources: list[Any]) -> dict[str, Any]:
    """Per model: the cells, runs and turns a set of sources holds."""
    out: dict[str, Any] = {}
    for model in sorted({s.model for s in sources}):
        mine = [s for s in sources if s.model == model]
        out[model] = {
            "cells": sorted({s.cell for s in mine}),
            "runs": len({s.run for s in mine}),
            "turns": sum(len(s.turns) for s in mine),
        }
    return out


def real_main(args: argparse.Namespace) -> None:
    from analysis import splice

    dv = _bench()
    scripted_path = args.json or SCRIPTED_JSON
    scripted = json.loads(scripted_path.read_text()) if scripted_path.is_file() else {}
    sources = splice.from_runs(args.real.split(","))
    label = "QUICK SMOKE RUN, NOT THE VALIDATION: " if args.quick else ""
    print(
        f"{label}detector validity on real text: {len(sources)} seat runs under {args.real}, embedder "
        f"{args.embedder}; {args.real_tune} tuning and {args.real_held} held-out splices per model and cell"
    )
    out = real_validity(sources, args.real_tune, args.real_held, args.embedder, scripted)
    for name, summary in out["sources"].items():
        print(
            f"  {name} sources: "
            + "; ".join(
                f"{m}: {v['runs']} runs, {len(v['cells'])} cells, {v['turns']} turns"
                for m, v in summary.items()
            )
        )
    dv.print_grid("PELT", out["tuning_grids"]["pelt"], "pen")
    dv.print_grid("trend", out["tuning_grids"]["trend"], "alpha")
    p, sp = out["params"], out["scripted_params"]
    print(
        f"tuned on the real tuning splices: PELT {p['pelt_column']} pen {p['penalty']:g}, trend "
        f"{p['trend_column']} alpha {p['alpha']:g} (scripted: {sp['pelt_column']} pen {sp['penalty']:g}, "
        f"{sp['trend_column']} alpha {sp['alpha']:g})"
    )
    for model, tables in out["tables"].items():
        dv.print_table(f"{model}: rates per cell (k as a fraction of the splice's length L)", tables)
    print("\npooled held-out rates beside the scripted model's (held-out, its tuned settings):")
    dv.row("model", "metric", [*out["columns"], "scripted model"])
    for model, tables in out["pooled"].items():
        for metric in METRICS:
            dv.row(
                model[:24],
                metric,
                [dv.pct(tables[c][metric]) for c in out["columns"]]
                + [dv.pct(out["scripted_pooled"][metric])],
            )
    shift = out["planted_shift"]
    for model, d in shift["median_abs_d"].items():
        sizes = ", ".join(f"{k} {v:.2f}" for k, v in d.items() if v is not None)
        print(f"{model}: median |shift| in {shift['column']} at k on held-out splices, in SDs: {sizes}")
    for name, lines in out["goals"].items():
        print(f"goals, {name} (real-tuned settings):\n" + "\n".join(lines))
    print(f"timing: {out['timing']['total_s']:.1f} s for {out['timing']['splices']} splices")
    rows = out.pop("rows")
    if args.real_rows:  # one line per splice: what was planted where, and what the detectors found
        lines = [json.dumps({"set": name} | r) + "\n" for name, part in rows.items() for r in part]
        args.real_rows.write_text("".join(lines))
        print(f"wrote {len(lines)} splices' truth and detections to {args.real_rows}")
    if args.json:
        payload = json.loads(args.json.read_text()) if args.json.is_file() else {}
        payload["real_text"] = out | {"roots": args.real.split(","), "quick": args.quick}
        args.json.write_text(json.dumps(payload, indent=1))
        print(f"wrote real_text into {args.json}")

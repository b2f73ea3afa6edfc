"""Signals for a whole ``Tables``: text signals per run (cached beside the
table cache, keyed by the run's files and the embedder), plus the process
signals, which come from the critique and event tables.

The runs to compute are embedded together first, in a few large batches,
through the embedding cache (``_analysis/cache/embeddings.sqlite``): a text
already embedded under the same model is never embedded again, and the model
loads only when some text is new.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from analysis.cache import VectorStore, cached_rows
from analysis.embed import DEFAULT_EMBEDDER, CachedEmbedder
from analysis.grounding import FACTCHECK_SIGNALS, factcheck_signals
from analysis.load import Tables
from analysis.registry import signal_names
from analysis.signals import embed_pool, run_signals, team_rank
from analysis.text import text_signals

# bump when a signal's method changes (6: repeated; 5: copied; 4: motion_distance exact 0)
SIGNALS_VERSION = 6
KEYS = ["run_id", "round", "team"]
EMBEDDINGS_FILE = "embeddings.sqlite"  # in the cache folder, shared by every embedder


@dataclass
class Signals:
    """Signal values: one row per published turn, and one per draft."""

    turns: pd.DataFrame
    drafts: pd.DataFrame
    embedder: str


def process_signals(tables: Tables) -> pd.DataFrame:
    """Per published turn: critique iterations, rejections, fact-check failures,
    strikes so far, loop-locks, schema failures, cost."""
    d = tables.drafts
    if d.empty:
        return pd.DataFrame(columns=[*KEYS, *PROCESS_COLUMNS])
    checker = (
        d.checker if "checker" in d.columns else pd.Series("critic", index=d.index).where(d.approved.notna())
    )
    by_critic, by_checker = checker.eq("critic"), checker.eq("fact_checker")
    g = d.assign(
        critiqued=by_critic,
        rejected=by_critic & d.approved.eq(False),
        checked=by_checker,
        failed=by_checker & d.approved.eq(False),
    ).groupby(KEYS)
    critiqued, checked = g.critiqued.sum(), g.checked.sum()
    out = pd.DataFrame(
        {
            # a turn no critic (fact-checker) saw has no rejection (failure) rate, not a perfect one
            "critique_iterations": critiqued,
            "rejection_rate": (g.rejected.sum() / critiqued).where(critiqued > 0),
            "factcheck_fail_rate": (g.failed.sum() / checked).where(checked > 0),
            "tokens": g.tokens.sum(),
            "latency_s": g.latency_s.sum(),
        }
    ).reset_index()
    ev = tables.events
    for name, kind in (("loop_lock", "loop_lock"), ("schema_failures", "schema_failure")):
        counts = ev[ev.event == kind].groupby(KEYS).size().rename(name) if not ev.empty else None
        out = out.merge(counts, on=KEYS, how="left") if counts is not None else out.assign(**{name: 0})
        out[name] = out[name].fillna(0).astype(float)
    out["loop_lock"] = out.loop_lock.clip(upper=1)
    out["strikes_so_far"] = strikes_so_far(out, ev)
    # the fact-checker's grounding (analysis.grounding): NaN where a speech had no such check
    return out.merge(factcheck_signals(tables), on=KEYS, how="left")


PROCESS_COLUMNS = [
    "critique_iterations",
    "rejection_rate",
    "factcheck_fail_rate",
    "tokens",
    "latency_s",
    "loop_lock",
    "schema_failures",
    "strikes_so_far",
    *FACTCHECK_SIGNALS,
]


def strikes_so_far(turns: pd.DataFrame, events: pd.DataFrame) -> pd.Series:
    """Per turn: the strikes its side has taken up to and including its round
    (NaN where the run had no fact-checker, so formats without one read as missing)."""
    strikes = events[events.event == "strike"] if not events.empty else events
    checked = turns.run_id.isin(set(turns.run_id[turns.factcheck_fail_rate.notna()]) | set(strikes.run_id))
    out = pd.Series(float("nan"), index=turns.index)
    # each side's strike rounds, sorted: a turn's count is a bisection, not a scan
    rounds = {key: np.sort(g["round"].to_numpy()) for key, g in strikes.groupby(["run_id", "team"])}
    for i, run_id, team, round_ in turns.loc[checked, ["run_id", "team", "round"]].itertuples():
        out[i] = float(np.searchsorted(rounds.get((run_id, team), np.empty(0)), round_, side="right"))
    return out


def _slug(embedder: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in embedder)


def _by_run(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {str(k): g for k, g in df.groupby("run_id")} if not df.empty else {}


def compute_signals(tables: Tables, *, embedder: str = DEFAULT_EMBEDDER, progress: bool = True) -> Signals:
    """Every signal of every turn and draft. The embedder loads only if some text is not cached."""
    memo = lru_cache(maxsize=4096)(text_signals)
    parts = {name: _by_run(tables.table(name)) for name in ("turns", "drafts", "personas")}
    ranks = {row["run_id"]: team_rank(row) for row in tables.runs.to_dict("records")}
    store = VectorStore(tables.cache_dir / EMBEDDINGS_FILE) if tables.cache_dir else None
    model = CachedEmbedder(embedder, store, progress=progress)
    bar = tqdm(total=len(tables.turns), desc="signals", unit="turn", disable=not progress)

    def frames(run_id: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        turns, drafts, personas = (
            parts[n].get(run_id, tables.table(n).iloc[0:0]) for n in ("turns", "drafts", "personas")
        )
        return turns, drafts, personas

    def prepare(run_ids: list[str]) -> None:  # every run to compute, embedded in one go
        model.prefetch(text for r in run_ids for text in embed_pool(*frames(r)))

    def build(run_id: str) -> dict[str, pd.DataFrame]:
        tsig, dsig = run_signals(*frames(run_id), ranks[run_id], model, memo)
        bar.update(len(tsig))
        return {"turns": tsig.assign(run_id=run_id), "drafts": dsig.assign(run_id=run_id)}

    folder = tables.cache_dir / f"signals-{_slug(embedder)}" if tables.cache_dir else None
    stamps = {  # only the runs in tables.runs, so a filtered Tables computes just those
        r: {"tables": tables.stamps.get(r), "v": SIGNALS_VERSION, "embedder": embedder} for r in ranks
    }
    try:
        rows, _ = cached_rows(folder, ("turns", "drafts"), stamps, build, prepare)
    finally:
        bar.close()
        model.release()
    turns = rows["turns"].merge(process_signals(tables), on=KEYS, how="left")
    return Signals(turns=_front(turns), drafts=_front(rows["drafts"]), embedder=embedder)


def _front(df: pd.DataFrame) -> pd.DataFrame:
    """Key columns first, then signals in registry order, for readable tables."""
    keys = [c for c in ("run_id", "round", "team", "order", "iteration") if c in df.columns]
    known = [n for n in signal_names() if n in df.columns]
    return df[keys + known + [c for c in df.columns if c not in keys and c not in known]]

"""Grounding signals of grounded debates: what each turn cited, how much of
it the citation checker found in the passages, and what its searches found.

    from analysis import load_runs, grounding_turns, grounding_summary
    tables = load_runs("research_runs/")
    turns = grounding_turns(tables)                  # one row per cited turn
    summary = grounding_summary(turns, tables)       # one row per run and side

Why per side: a side whose queries find passages can win by retrieval
rather than by argument. ``hit_asymmetry`` (hits of FOR minus AGAINST, over
their sum) shows how uneven the evidence each side had to work with was,
beside who won (``winner``, when the run ended in a verdict).

Cited turns are read from ``shared_memory.jsonl`` and their searches from
each seat's ``searches.jsonl``; the text tables carry neither. Runs with no
cited turn (every other format) are never read again and yield no rows.
Rows are cached per run beside the table cache, keyed on the run's files.

The moderated format's fact-checks, grounded or not, are read the same way
(``public/factchecks.jsonl``): ``factcheck_checks`` gives one row per check
with its rulings counted, ``factcheck_signals`` the process signals per
speech (the checker's grounding precision, the share of strikes a
contradicting passage backs, the share of claims not found) and
``factcheck_summary`` the same per run and side.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.cache import cached_rows
from analysis.load import Tables, load_runs
from analysis.records_io import layout_of, read_logs
from harness.store.records import CitedTurnRecord, FactCheckRecord, SearchRecord

GROUNDING_VERSION = 1  # bump when a column's method changes
FACTCHECKS_VERSION = 1
FACTCHECKS = "public/factchecks.jsonl"
SHARED = "shared_memory.jsonl"
STATUSES = ("supported", "unsupported", "unknown")
Source = Tables | str | Path | Sequence[str | Path]


def grounding_turns(source: Source, *, cache: bool = True) -> pd.DataFrame:
    """One row per cited turn of every run in ``source`` (a ``Tables``, or a
    runs root or run folder, or several, loaded with ``load_runs``).

    ``precision`` is supported / citations (NaN for a turn that cites
    nothing: no citation is neither good nor bad); ``cited`` is 0/1, so its
    mean is the share of turns that cite at all. A citation the checker
    never marked counts in ``citations`` only.
    """
    if isinstance(source, str | Path):
        source = load_runs(source, cache=cache)
    if not isinstance(source, Tables):
        parts = [grounding_turns(path, cache=cache) for path in source]
        return pd.concat(parts, ignore_index=True) if parts else empty_turns()
    tables = source
    grounded = grounded_runs(tables)
    if not grounded:
        return empty_turns()
    folder = tables.cache_dir / "grounding" if tables.cache_dir else None
    stamps = {r: {"tables": tables.stamps.get(r), "v": GROUNDING_VERSION} for r in grounded}
    frames, _ = cached_rows(
        folder, ("turns",), stamps, lambda rel: {"turns": run_turns(tables.run_dirs[rel], rel)}
    )
    turns = frames["turns"].merge(search_retries(tables.events), on=["run_id", "round", "team"], how="left")
    turns["search_retries"] = turns.search_retries.fillna(0).astype(int)
    return turns[TURN_COLUMNS]


def grounded_runs(tables: Tables) -> list[str]:
    """The runs that published a cited turn, in load order: only these are read again."""
    t = tables.turns
    with_cites = set(t.run_id[t.kind == "cited_turn"]) if not t.empty else set()
    return [r for r in tables.runs.run_id if r in with_cites]


def run_turns(run_dir: Path, rel: str) -> pd.DataFrame:
    """The cited turns of one run folder, each with the searches it was written after."""
    searches_logs = [name for name in layout_of(run_dir).files() if name.endswith("/searches.jsonl")]
    logs = read_logs(run_dir, [SHARED, *searches_logs])
    searches = {s.id: s for name in searches_logs for s in logs[name] if isinstance(s, SearchRecord)}
    rows = [
        turn_row(t, [searches[sid] for sid in t.searches if sid in searches])
        for t in logs[SHARED]
        if isinstance(t, CitedTurnRecord)
    ]
    df = pd.DataFrame(rows, columns=TURN_COLUMNS[1:-1])
    df.insert(0, "run_id", rel)
    return df


def turn_row(t: CitedTurnRecord, found: list[SearchRecord]) -> dict[str, Any]:
    """``hits`` is what the turn record says its searches returned; the
    latency is summed over the searches its seat's log still holds."""
    marks: Counter[str | None] = Counter(c.status for c in t.citations)
    n, made = len(t.citations), len(t.searches)
    return {
        "round": t.round,
        "team": t.team,
        "side": t.side,
        "iteration": t.iteration,
        "model": t.model,
        "citations": n,
        "cited": int(n > 0),
        **{s: marks[s] for s in STATUSES},
        "precision": marks["supported"] / n if n else float("nan"),
        "searches": made,
        "hits": t.hits,
        "hits_per_search": t.hits / made if made else float("nan"),
        "truncated": t.truncated,
        "search_latency_s": sum(s.latency_s for s in found),
    }


def search_retries(events: pd.DataFrame) -> pd.DataFrame:
    """Search calls retried (each one a server restart) per run, round and seat."""
    keys = ["run_id", "round", "team"]
    if events.empty:
        return pd.DataFrame(columns=[*keys, "search_retries"])
    retried = events[(events.event == "retry") & (events.role == "search") & events["round"].notna()]
    counts = retried.astype({"round": int}).groupby(keys).size()
    return counts.rename("search_retries").reset_index()


def empty_turns() -> pd.DataFrame:
    return pd.DataFrame(columns=TURN_COLUMNS)


TURN_COLUMNS = [
    "run_id",
    "round",
    "team",
    "side",
    "iteration",
    "model",
    "citations",
    "cited",
    *STATUSES,
    "precision",
    "searches",
    "hits",
    "hits_per_search",
    "truncated",
    "search_latency_s",
    "search_retries",
]


def grounding_summary(turns: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """One row per run and side. ``precision`` is micro-averaged (total
    supported over total citations), so a turn with many citations weighs
    more than one with few. ``hit_asymmetry`` is per run, the same on both
    of its rows: (hits FOR - hits AGAINST) / (their sum), +1 when only FOR's
    searches found anything, NaN when neither found anything or a side has
    no turn. ``winner`` is the verdict's (from ``tables``), else None."""
    if turns.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    g = turns.groupby(["run_id", "side"], sort=False)
    sums = g[["citations", *STATUSES, "searches", "hits", "search_retries"]].sum()
    out = pd.DataFrame(
        {
            "turns": g.size(),
            "cited_share": g.cited.mean(),
            "precision": (sums.supported / sums.citations).where(sums.citations > 0),
            "citations": sums.citations,
            "supported": sums.supported,
            "unsupported_quotes": sums.unsupported,
            "unknown_citations": sums.unknown,
            "searches": sums.searches,
            "hits": sums.hits,
            "truncated": g.truncated.sum().astype(int),
            "search_retries": sums.search_retries,
        }
    ).reset_index()
    out = out.merge(hit_asymmetry(out), on="run_id", how="left")
    won = winners(tables) if tables is not None else {}
    out["winner"] = [won.get(r) for r in out.run_id]
    return out[SUMMARY_COLUMNS]


def hit_asymmetry(per_side: pd.DataFrame) -> pd.DataFrame:
    hits = per_side.pivot(index="run_id", columns="side", values="hits").reindex(columns=["for", "against"])
    total = hits["for"] + hits["against"]  # NaN where a side has no turn
    asym = ((hits["for"] - hits["against"]) / total).where(total > 0)
    return asym.astype(float).rename("hit_asymmetry").reset_index()


def winners(tables: Tables) -> dict[str, Any]:
    """Each run's last verdict's winner (None: the judge named no one)."""
    p = tables.public
    if p.empty:
        return {}
    verdicts = p[p.kind == "verdict"]
    return verdicts.groupby("run_id").winner.last().to_dict() if not verdicts.empty else {}


SUMMARY_COLUMNS = [
    "run_id",
    "side",
    "turns",
    "cited_share",
    "precision",
    "citations",
    "supported",
    "unsupported_quotes",
    "unknown_citations",
    "searches",
    "hits",
    "truncated",
    "search_retries",
    "hit_asymmetry",
    "winner",
]


def grounding_table(summary: pd.DataFrame, *, max_runs: int = 10) -> str:
    """The summary as a short text table for the terminal (the first
    ``max_runs`` runs; the Parquet file holds all of them)."""
    runs = summary.run_id.drop_duplicates()
    shown = summary[summary.run_id.isin(set(runs.head(max_runs)))]
    cols = {
        "run_id": "run",
        "side": "side",
        "turns": "turns",
        "cited_share": "cited_share",
        "precision": "precision",
        "unsupported_quotes": "unsupported",
        "unknown_citations": "unknown",
        "searches": "searches",
        "hits": "hits",
        "hit_asymmetry": "hit_asym",
        "winner": "winner",
    }
    shown = shown[list(cols)].rename(columns=cols).fillna({"winner": "-"})
    text = shown.to_string(index=False, float_format="{:.2f}".format, na_rep="-")
    more = len(runs) - max_runs
    return text + (f"\n... and {more} more run(s) in grounding_summary.parquet" if more > 0 else "")


# -- fact-checks of moderated debates ---------------------------------------------


def factcheck_checks(tables: Tables) -> pd.DataFrame:
    """One row per fact-check of every moderated run in ``tables``: its verdict,
    and for a grounded check its rulings and citation marks counted. ``backed``
    is 1 for a strike whose check rules a claim contradicted with a quote the
    checker marked supported (an ungrounded strike cites nothing: 0)."""
    d = tables.drafts
    checked = set(d.run_id[d.checker.eq("fact_checker")]) if "checker" in d.columns and not d.empty else set()
    runs = [r for r in tables.runs.run_id if r in checked]
    if not runs:
        return pd.DataFrame(columns=CHECK_COLUMNS)
    folder = tables.cache_dir / "factchecks" if tables.cache_dir else None
    stamps = {r: {"tables": tables.stamps.get(r), "v": FACTCHECKS_VERSION} for r in runs}
    frames, _ = cached_rows(
        folder, ("checks",), stamps, lambda rel: {"checks": run_checks(tables.run_dirs[rel], rel)}
    )
    return frames["checks"][CHECK_COLUMNS]


def run_checks(run_dir: Path, rel: str) -> pd.DataFrame:
    logs = read_logs(run_dir, [FACTCHECKS])
    rows = [check_row(c) for c in logs[FACTCHECKS] if isinstance(c, FactCheckRecord)]
    df = pd.DataFrame(rows, columns=CHECK_COLUMNS[1:])
    df.insert(0, "run_id", rel)
    return df


def check_row(c: FactCheckRecord) -> dict[str, Any]:
    rulings: Counter[str] = Counter(r.ruling for r in c.rulings)
    cites = [r.citation for r in c.rulings if r.citation is not None]
    backed = any(
        r.ruling == "contradicted" and r.citation and r.citation.status == "supported" for r in c.rulings
    )
    return {
        "round": c.round,
        "team": c.team,
        "iteration": c.iteration,
        "grounded": c.grounded,
        "strike": int(c.verdict == "fail"),
        "fallback": c.fallback,
        "ruled": len(c.rulings),
        "supported": rulings["supported"],
        "contradicted": rulings["contradicted"],
        "not_found": rulings["not_found"],
        "citations": len(cites),
        "supported_marks": sum(x.status == "supported" for x in cites),
        "backed": int(c.verdict == "fail" and backed),
        "hits": c.hits,
    }


CHECK_COLUMNS = [
    "run_id",
    "round",
    "team",
    "iteration",
    "grounded",
    "strike",
    "fallback",
    "ruled",
    "supported",
    "contradicted",
    "not_found",
    "citations",
    "supported_marks",
    "backed",
    "hits",
]
FACTCHECK_SIGNALS = ["factcheck_precision", "strike_backed_share", "claim_not_found_rate"]


def _rates(g: Any) -> pd.DataFrame:
    """The three fact-check signals of grouped check rows (NaN where the denominator is 0)."""
    sums = g[["citations", "supported_marks", "strike", "backed", "ruled", "not_found"]].sum()
    return pd.DataFrame(
        {
            "factcheck_precision": (sums.supported_marks / sums.citations).where(sums.citations > 0),
            "strike_backed_share": (sums.backed / sums.strike).where(sums.strike > 0),
            "claim_not_found_rate": (sums.not_found / sums.ruled).where(sums.ruled > 0),
        }
    )


def factcheck_signals(tables: Tables) -> pd.DataFrame:
    """Per speech (run, round, team), over all its fact-checks (every attempt):
    ``factcheck_precision`` (supported marks / citations), ``strike_backed_share``
    (strikes a contradicting passage backs / strikes), ``claim_not_found_rate``
    (claims ruled not found / claims ruled on)."""
    checks = factcheck_checks(tables)
    keys = ["run_id", "round", "team"]
    if checks.empty:  # typed, so it merges onto any turn table
        dtypes = {
            "run_id": object,
            "round": "int64",
            "team": object,
            **dict.fromkeys(FACTCHECK_SIGNALS, float),
        }
        return pd.DataFrame({name: pd.Series(dtype=t) for name, t in dtypes.items()})
    return _rates(checks.astype({"round": "int64"}).groupby(keys)).reset_index()


def factcheck_summary(checks: pd.DataFrame) -> pd.DataFrame:
    """One row per run and side (the seat checked): its checks, strikes and
    fallbacks, and the three signals over all its checks."""
    keys = ["run_id", "team"]
    if checks.empty:
        return pd.DataFrame(columns=[*keys, "checks", "strikes", "fallbacks", "claims", *FACTCHECK_SIGNALS])
    g = checks.groupby(keys, sort=False)
    counts = pd.DataFrame(
        {
            "checks": g.size(),
            "strikes": g.strike.sum(),
            "fallbacks": g.fallback.sum().astype(int),
            "claims": g.ruled.sum(),
        }
    )
    return counts.join(_rates(g)).reset_index()

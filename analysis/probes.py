"""Behavioural probes (docs/probes.md): did a team keep following its
persona's instructions as the debate went on?

    from analysis import load_runs, probe_table, instruction_stability
    tables = load_runs("research_runs/")
    probes = probe_table(tables)                 # one row per probe record
    stability = instruction_stability(probes)    # one row per run, team and round

A behavioural measure, independent of the text signals: each row is a
deterministic checker's verdict on a reply the team gave, in a fork of its
view, to a fixed probe question after its turn (after Li et al. 2024).
Probe records are read from each probed seat's ``probes.jsonl``; runs made
without probes have none and yield no rows. Rows are cached per run beside
the table cache, keyed on the run's files.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.cache import cached_rows
from analysis.load import Tables, load_runs
from analysis.records_io import layout_of, read_logs
from harness.store.records import ProbeRecord

PROBES_VERSION = 1  # bump when a column's method changes
PROBE_COLUMNS = [
    "run_id",
    "round",
    "team",
    "probe",
    "iteration",
    "checker",
    "passed",
    "reply_words",
    "reply_chars",
    "tokens",
    "calls",
    "model",
    "persona_id",
]
STABILITY_COLUMNS = ["run_id", "team", "round", "probes", "passed", "pass_rate", "stability"]


def probe_table(source: Tables | str | Path, *, cache: bool = True) -> pd.DataFrame:
    """One row per probe record of every run in ``source`` (a ``Tables``, or a
    runs root or run folder). ``passed`` is True/False, or None where no reply
    validated; ``tokens`` and ``calls`` are the probe's own (never in the
    debate's counts)."""
    tables = load_runs(source, cache=cache) if isinstance(source, str | Path) else source
    probed = {rel: logs for rel in tables.runs.run_id if (logs := probe_logs(tables.run_dirs[rel]))}
    if not probed:
        return pd.DataFrame(columns=PROBE_COLUMNS)
    folder = tables.cache_dir / "probes" if tables.cache_dir else None
    stamps = {rel: {"tables": tables.stamps.get(rel), "v": PROBES_VERSION} for rel in probed}
    frames, _ = cached_rows(
        folder,
        ("probes",),
        stamps,
        lambda rel: {"probes": run_probes(tables.run_dirs[rel], rel, probed[rel])},
    )
    return frames["probes"][PROBE_COLUMNS]


def probe_logs(run_dir: Path) -> list[str]:
    """The run's probe logs, one per probed seat (none if it ran without probes)."""
    return [name for name in layout_of(run_dir).files() if name.endswith("/probes.jsonl")]


def run_probes(run_dir: Path, rel: str, names: list[str]) -> pd.DataFrame:
    logs = read_logs(run_dir, names)
    rows = [
        {
            "run_id": rel,
            "round": r.round,
            "team": r.team,
            "probe": r.probe,
            "iteration": r.iteration,
            "checker": r.checker,
            "passed": r.passed,
            "reply_words": len(r.reply.split()) if r.reply is not None else None,
            "reply_chars": len(r.reply) if r.reply is not None else None,
            "tokens": r.usage.input_tokens + r.usage.output_tokens,
            "calls": r.usage.calls,
            "model": r.model,
            "persona_id": r.persona_id,
        }
        for name in names
        for r in logs[name]
        if isinstance(r, ProbeRecord)
    ]
    df = pd.DataFrame(rows, columns=PROBE_COLUMNS)
    df["passed"] = df.passed.astype("boolean")  # True, False or <NA>: Parquet keeps all three
    return df.sort_values(["round", "team", "iteration"], kind="stable", ignore_index=True)


def instruction_stability(probes: pd.DataFrame) -> pd.DataFrame:
    """Checker pass rate per (run, team, round), and ``stability``: that rate over
    the team's rate at its first probed turn (1.0 = as obedient as at the start;
    NaN where the first rate was 0). Probes with no valid reply are not scored."""
    scored = probes.dropna(subset=["passed"])
    if scored.empty:
        return pd.DataFrame(columns=STABILITY_COLUMNS)
    grouped = scored.assign(passed=scored.passed.astype(bool)).groupby(["run_id", "team", "round"], sort=True)
    out = grouped.passed.agg(probes="size", passed="sum").reset_index()
    out["pass_rate"] = out.passed / out.probes
    first = out.groupby(["run_id", "team"]).pass_rate.transform("first")
    out["stability"] = out.pass_rate / first.where(first > 0)
    return out[STABILITY_COLUMNS]

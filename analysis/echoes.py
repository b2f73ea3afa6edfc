"""Echo rates: how often what the models wrote copies their instructions.

A text that holds ``n`` consecutive words of the prompt text the harness wrote,
or of a reply schema (or ``n`` words of them with a word or two changed,
``harness.models.altered``), or nothing but field names, says nothing the debate
asked for (issue 30). ``harness.models.echo`` defines such runs, and rejects
replies that hold one when ``structured.echo_words`` is set; here the same test
is applied after the fact, to runs of any age, at one ``n`` for all of them.

Per model and role: the share of published turns, of drafts and critic
feedback (the drafts table) and of every kept reply (``replies.jsonl``, each
attempt, the rejected ones too) that carries such a run, beside the
schema-failure rate. A reply is tested against its own prompt's instruction
runs; a published turn or a draft against those of every prompt its run
logged (``memory.log_prompts``); a run that logged none against all of the
prompt code's and its config's.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from pydantic import BaseModel

from analysis.records_io import read_logs
from harness.models.echo import EchoCheck, config_texts, echo_check, strings, written_ngrams, written_pieces
from harness.models.structured import extract_json, schema_text
from harness.schema import StructuredConfig
from harness.store.records import PromptRecord, ReplyRecord

if TYPE_CHECKING:
    from analysis.pipeline import Analysis

ECHO_WORDS = StructuredConfig().echo_words  # the harness's default n, for every run alike
COLUMNS = [
    "model",
    "role",
    "source",
    "texts",
    "echoes",
    "echo_rate",
    "accepted",
    "accepted_echoes",
    "schema_failures",
    "asks",
    "schema_failure_rate",
]
Key = tuple[int, str | None, str, int]  # (round, team, role, iteration): one structured call


@functools.cache
def reply_schemas() -> tuple[str, ...]:
    """Every fixed reply schema of the agents (``*Output`` classes), as JSON text."""
    import harness.agents as agents

    found: set[str] = set()
    for info in pkgutil.iter_modules(agents.__path__, "harness.agents."):
        for obj in vars(importlib.import_module(info.name)).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__name__.endswith("Output"):
                found.add(schema_text(obj))
    return tuple(sorted(found))


def _config(run: pd.Series) -> dict[str, Any]:
    """The run's config from its ``cfg.*`` columns, under dotted keys."""
    return {str(k)[4:]: v for k, v in run.items() if str(k).startswith("cfg.")}


def _key(r: PromptRecord | ReplyRecord) -> Key:
    return (r.round, r.team, r.role, r.iteration)


def run_checks(
    run_dir: Path, run: pd.Series, n: int
) -> tuple[EchoCheck, dict[Key, EchoCheck], list[ReplyRecord]]:
    """One run's tests: for a text of no known prompt, for each call by its own
    prompt, and the replies they apply to."""
    seats = [*json.loads(run.get("seats") or "[]"), "public"]
    logs = read_logs(run_dir, [f"{s}/{log}" for s in seats for log in ("prompts.jsonl", "replies.jsonl")])
    records = [r for recs in logs.values() for r in recs]
    extra = config_texts(_config(run), n)
    base = echo_check([], reply_schemas(), extra, n)
    own = {
        _key(p): echo_check(p.messages, reply_schemas(), extra, n)
        for p in records
        if isinstance(p, PromptRecord) and ".prompt" in p.id  # not a failed reply kept beside them
    }
    # no prompt logged: test against whatever the harness could have written
    union = frozenset().union(*(c.instructions for c in own.values())) if own else written_ngrams(extra, n)
    pieces = [c.instruction_pieces for c in own.values()] if own else [written_pieces(extra, n)]
    replies = [r for r in records if isinstance(r, ReplyRecord)]
    every = tuple(dict.fromkeys(p for held in pieces for p in held))
    return dataclasses.replace(base, instructions=union, instruction_pieces=every), own, replies


def echoes(check: EchoCheck, text: Any) -> bool:
    return isinstance(text, str) and check.why("text", text) is not None


def reply_echoes(check: EchoCheck, raw: str) -> bool:
    """Whether any text field of a raw reply is an echo (an unreadable reply is not)."""
    try:
        data = extract_json(raw)
    except ValueError:
        return False
    return any(check.why(path, text) is not None for path, text in strings(data))


def _spec(run: pd.Series, role: str) -> str:
    spec = run.get(f"spec.{role}")
    return str(spec if isinstance(spec, str) else run.get("cfg.model.spec"))


def text_rows(result: Analysis, run: pd.Series, check: EchoCheck) -> list[dict[str, Any]]:
    """Published turns, drafts and critic feedback of one run, each tested."""
    t = result.tables
    rid = run["run_id"]
    rows = [
        {
            "model": m if isinstance(m, str) else _spec(run, str(team)),
            "role": "published",
            "source": "turns",
            "echo": echoes(check, text),
        }
        for team, m, text in t.turns.loc[t.turns.run_id == rid, ["team", "model", "text"]].itertuples(
            index=False
        )
    ]
    drafts = t.drafts[t.drafts.run_id == rid]
    for d in drafts.itertuples(index=False):
        if isinstance(d.text, str):
            rows.append(
                {
                    "model": _spec(run, str(d.team)),
                    "role": "draft",
                    "source": "drafts",
                    "echo": echoes(check, d.text),
                }
            )
        # a fallback's feedback and the no-critic control's are the harness's words, not a model's
        if (
            d.checker == "critic"
            and d.critic_fallback is not True
            and run.get("cfg.critic.approve_all") is not True
        ):
            rows.append(
                {
                    "model": _spec(run, "critic"),
                    "role": "critic feedback",
                    "source": "drafts",
                    "echo": echoes(check, d.feedback),
                }
            )
    return rows


def _team(team: Any) -> str | None:
    return team if isinstance(team, str) else None


def reply_rows(
    run: pd.Series, events: pd.DataFrame, checks: tuple[EchoCheck, dict[Key, EchoCheck], list[ReplyRecord]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every kept reply of one run, tested against its own prompt; and its
    schema failures, each with the model that failed."""
    union, own, replies = checks
    failures = events[(events.run_id == run["run_id"]) & (events.event == "schema_failure")]
    failed = {(int(e.round), _team(e.team), str(e.role), int(e.iteration)) for e in failures.itertuples()}
    last: dict[Key, int] = {}
    for r in replies:
        last[_key(r)] = max(last.get(_key(r), 0), r.attempt)
    model = {_key(r): r.model for r in replies if r.model}
    rows = [
        {
            "model": r.model or _spec(run, r.role),
            "role": r.role,
            "source": "replies",
            "echo": reply_echoes(own.get(_key(r), union), r.text),
            "accepted": r.attempt == last[_key(r)] and _key(r) not in failed,
            "ask": _key(r) if r.attempt == 0 else None,
        }
        for r in replies
    ]
    fails = [{"model": model.get(k) or _spec(run, k[2]), "role": k[2]} for k in sorted(failed, key=str)]
    return rows, fails


def echo_rates(result: Analysis, n: int = ECHO_WORDS) -> pd.DataFrame:
    """Per model and role, the share of texts carrying an ``n``-word run of
    their instructions or schema (``COLUMNS``): published turns (role
    ``published``), drafts and critic feedback, and kept replies (every
    attempt; ``accepted``: the ones a call ended on). Schema failures are the
    ``schema_failure`` events, per call for a reply role and per model over all
    its roles for published turns."""
    t = result.tables
    texts: list[dict[str, Any]] = []
    fails: list[dict[str, Any]] = []
    for run in (row for _, row in t.runs.iterrows()):
        run_dir = t.run_dirs.get(run["run_id"])
        if run_dir is None:
            continue
        checks = run_checks(run_dir, run, n)
        texts += text_rows(result, run, checks[0])
        replied, failed = reply_rows(run, t.events, checks)
        texts += replied
        fails += failed
    if not texts:
        return pd.DataFrame(columns=COLUMNS)
    return _aggregate(pd.DataFrame(texts), pd.DataFrame(fails, columns=["model", "role"]))


def _aggregate(texts: pd.DataFrame, fails: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, role, source): the texts tested and the failures beside them."""
    for column in ("accepted", "ask"):
        if column not in texts:
            texts[column] = None
    texts["accepted_echo"] = texts.accepted.eq(True) & texts.echo
    out = (
        texts.groupby(["model", "role", "source"], sort=True)
        .agg(
            texts=("echo", "size"),
            echoes=("echo", "sum"),
            accepted=("accepted", lambda s: s.eq(True).sum()),
            accepted_echoes=("accepted_echo", "sum"),
            asks=("ask", "count"),
        )
        .reset_index()
    )
    out["echo_rate"] = out.echoes / out.texts
    per_role = fails.groupby(["model", "role"]).size()
    per_model = fails.groupby("model").size()
    calls = out[out.source == "replies"].groupby("model").asks.sum()
    nan = float("nan")

    def failures(row: Any) -> tuple[float, float]:
        """(schema failures, structured calls) beside a row."""
        if row.source == "replies":  # the role's own calls
            return per_role.get((row.model, row.role), 0), row.asks
        if row.source == "turns":  # a turn may come from any of its model's roles
            return per_model.get(row.model, 0), calls.get(row.model, nan)
        return nan, nan  # a draft's or feedback's call is the format's business

    out[["schema_failures", "asks"]] = [failures(row) for row in out.itertuples(index=False)]
    out["schema_failure_rate"] = out.schema_failures / out.asks.where(out.asks > 0)
    for column in ("accepted", "accepted_echoes"):
        out[column] = out[column].where(out.source == "replies")
    return out[COLUMNS]


def echo_section(result: Analysis, n: int = ECHO_WORDS) -> list[str]:
    """``echo_rates`` as Markdown lines for docs/findings.md: one sentence per
    model on its published turns, then the table."""
    rates = echo_rates(result, n)
    if rates.empty:
        return [f"_No texts to test for {n}-word echoes._"]
    lines = [
        f"A text echoes when it holds {n} consecutive words of the prompt text the harness wrote (its "
        "prompt code's and config's, not the motion, transcript or passages it quotes) or of a reply "
        f"schema, or {n} words of them with a word or two changed (harness.models.altered), "
        "only field names, or another field's snake_case name (harness.models.echo; "
        "`structured.echo_words` rejects such replies from issue 30 on). A reply is tested against its "
        "own prompt, every attempt counted; `accepted` are the replies a call ended on.",
        "",
    ]
    for r in rates[rates.role == "published"].itertuples(index=False):
        failures = (
            f"; {int(r.schema_failures)} schema failure(s) in {r.asks:.0f} structured calls"
            if pd.notna(r.asks)
            else ""
        )
        lines.append(
            f"- {int(r.echoes)} of {int(r.texts)} published turns of {r.model} ({r.echo_rate:.1%}) echo "
            f"their instructions or schema ({n} words of them, or a field name){failures}."
        )
    return [*lines, "", _md(rates)]


def _md(frame: pd.DataFrame) -> str:
    """A Markdown table, numbers to 3 places, "–" where there is none (tabulate is no dependency)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "–" if v != v else f"{v:.3f}".rstrip("0").rstrip(".")
        return str(v).replace("|", "/")

    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns), *rows])

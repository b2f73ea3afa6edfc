"""Checkpoint interviews (docs/interviews.md): does a seat still answer its
questionnaire as it did at its first interview?

    from analysis.interviews import interview_table, consistency, item_flips, interview_change
    answers = interview_table("research_runs/")      # one row per answer
    scored = consistency(answers, embedder="hash:512", judge=None)
    flips = item_flips(scored)                        # one row per run, seat and item
    change = interview_change(scored)                 # one row per run, seat and round: the detector signal

or, from run folders to the signal in one call, ``interview_change_scores(path)``.

Each answer is read against the seat's first answer to the same item asked
the same way (an item whose question changed starts again): ``distance`` is
one minus the cosine of their embeddings (0: the same words); a judge model,
where one is given, says whether the two are the same in substance
(``judged_same``). An answer is ``changed`` when the judge says different,
or, with no judge, when its distance exceeds ``threshold``. A ``flip`` is an
interview whose ``changed`` differs from the item's previous interview: a
move away from the first answer, or back to it.

Per run, seat and round, ``interview_change`` averages the items: ``change``
(mean distance), ``changed_share`` and ``flips``, which a detector thresholds
like any per-round signal. An answer that never validated is not scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import BaseModel

from analysis.embed import DEFAULT_EMBEDDER, get_embedder
from analysis.records_io import find_runs, layout_of, read_logs
from harness.models.base import ChatModel, Completion, ModelRequest
from harness.models.retry import call_with_retry
from harness.models.structured import generate_structured
from harness.schema import RetryConfig
from harness.store.records import InterviewRecord

ANSWER_COLUMNS = ["run_id", "seat", "round", "item", "aspect", "question", "answer", "model", "persona_id"]
SCORED_COLUMNS = [*ANSWER_COLUMNS, "first_round", "distance", "judged_same", "changed", "flip"]
FLIP_COLUMNS = ["run_id", "seat", "item", "aspect", "interviews", "flips", "first_change", "max_distance"]
CHANGE_COLUMNS = ["run_id", "seat", "round", "items", "change", "changed_share", "flips"]
THRESHOLD = 0.35  # a distance past which an unjudged answer counts as changed (hash and MiniLM alike: rough)


def interview_table(path: str | Path) -> pd.DataFrame:
    """One row per interview answer of every run at or under ``path``; ``run_id``
    is the run folder relative to the root (its name for one run folder)."""
    path = Path(path)
    root = path.parent if (path / "manifest.json").is_file() else path
    rows = []
    for run_dir in find_runs(path):
        names = [n for n in layout_of(run_dir).files() if n.endswith("/interviews.jsonl")]
        for records in read_logs(run_dir, names).values():
            rows += [
                row(str(run_dir.relative_to(root)), r) for r in records if isinstance(r, InterviewRecord)
            ]
    df = pd.DataFrame(rows, columns=ANSWER_COLUMNS)
    return df.sort_values(["run_id", "seat", "item", "round"], kind="stable", ignore_index=True)


def row(run_id: str, r: InterviewRecord) -> dict[str, object]:
    return {
        "run_id": run_id,
        "seat": r.team,
        "round": r.round,
        "item": r.item,
        "aspect": r.aspect,
        "question": r.question,
        "answer": r.answer,
        "model": r.model,
        "persona_id": r.persona_id,
    }


# Whether two answers say the same: the judge's reply, validated.
class SameAnswer(BaseModel):
    same: bool


Judge = Callable[
    [str, str, str, int], bool | None
]  # (question, first, later, seed) -> same, None: no valid reply


def consistency(
    answers: pd.DataFrame,
    *,
    embedder: str = DEFAULT_EMBEDDER,
    judge: Judge | None = None,
    threshold: float = THRESHOLD,
) -> pd.DataFrame:
    """``answers`` (``interview_table``) scored against each seat's first answer per item (module docstring)."""
    df = answers[answers.answer.notna()].copy()
    if df.empty:
        return pd.DataFrame(columns=SCORED_COLUMNS)
    df = df.sort_values(["run_id", "seat", "item", "question", "round"], kind="stable", ignore_index=True)
    groups = df.groupby(["run_id", "seat", "item", "question"], sort=False)
    df["first_round"] = groups["round"].transform("first")
    first = groups.answer.transform("first")
    texts = sorted(set(df.answer) | set(first))
    vectors = dict(zip(texts, get_embedder(embedder).encode(texts), strict=True))
    cosines = (float(np.dot(vectors[a], vectors[b])) for a, b in zip(df.answer, first, strict=True))
    df["distance"] = [round(max(0.0, 1.0 - c), 6) for c in cosines]  # float error aside: identical is 0
    df["judged_same"] = pd.array(judged(df, first, judge), dtype="boolean")
    unjudged = df.judged_same.isna()
    df["changed"] = (~df.judged_same.fillna(True)) | (unjudged & (df.distance > threshold))
    previous = df.groupby(["run_id", "seat", "item", "question"], sort=False).changed.shift()
    df["flip"] = previous.notna() & (df.changed != previous)
    return df[SCORED_COLUMNS]


def judged(df: pd.DataFrame, first: pd.Series, judge: Judge | None) -> list[bool | None]:
    """The judge's same/different for each answer against the first (an answer that
    is the first, or its very words, is the same without asking); None without a judge."""
    if judge is None:
        return [None] * len(df)
    out: list[bool | None] = []
    for i, (question, answer, anchor) in enumerate(zip(df.question, df.answer, first, strict=True)):
        out.append(True if answer == anchor else judge(question, anchor, answer, i))
    return out


def item_flips(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per run, seat and item: its interviews, flips, the first round whose
    answer changed from the first (NaN: none did) and the largest distance."""
    rows = []
    for (run_id, seat, item), g in scored.groupby(["run_id", "seat", "item"], sort=True):
        changed = g[g.changed.astype(bool)]
        rows.append(
            {
                "run_id": run_id,
                "seat": seat,
                "item": item,
                "aspect": g.aspect.iloc[0],
                "interviews": len(g),
                "flips": int(g.flip.sum()),
                "first_change": float(changed["round"].min()) if len(changed) else math.nan,
                "max_distance": float(g.distance.max()),
            }
        )
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)


def interview_change(scored: pd.DataFrame) -> pd.DataFrame:
    """One row per run, seat and interviewed round: the items answered, their mean
    distance to the first answers (``change``), the share changed and the flips."""
    if scored.empty:
        return pd.DataFrame(columns=CHANGE_COLUMNS)
    grouped = scored.assign(changed=scored.changed.astype(float), flip=scored.flip.astype(int)).groupby(
        ["run_id", "seat", "round"], sort=True
    )
    out = grouped.agg(
        items=("item", "size"),
        change=("distance", "mean"),
        changed_share=("changed", "mean"),
        flips=("flip", "sum"),
    ).reset_index()
    return out[CHANGE_COLUMNS]


def interview_change_scores(
    path: str | Path,
    *,
    embedder: str = DEFAULT_EMBEDDER,
    judge: Judge | None = None,
    threshold: float = THRESHOLD,
) -> pd.DataFrame:
    """Run folders at or under ``path`` -> per run, seat and round interview change
    scores (``interview_change``): what a detector thresholds."""
    scored = consistency(interview_table(path), embedder=embedder, judge=judge, threshold=threshold)
    return interview_change(scored)


def model_judge(model: ChatModel, *, max_repairs: int = 1) -> Judge:
    """A judge asking ``model`` whether two answers to one question say the same,
    at temperature 0; a reply that never validates is no judgement (None)."""
    policy = RetryConfig()

    def call(request: ModelRequest) -> Completion:
        return call_with_retry(lambda: model.complete(request), policy, None)

    def judge(question: str, first: str, later: str, seed: int) -> bool | None:
        result = generate_structured(
            call,
            judge_messages(question, first, later),
            SameAnswer,
            temperature=0.0,
            max_tokens=64,
            seed=seed,
            max_repairs=max_repairs,
            tags={"round": 0, "team": None, "role": "judge", "iteration": 0},
        )
        return result.value.same if result.value is not None else None

    return judge


def judge_messages(question: str, first: str, later: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": "You compare two answers a debater gave to the same question at two "
            "points of a debate. Reply with one JSON object only.",
        },
        {
            "role": "user",
            "content": f"Question: {question}\nFirst answer: {first}\nLater answer: {later}\n"
            "Do the two answers describe the same identity, values, stance and tone? "
            'JSON field: "same": true | false',
        },
    ]

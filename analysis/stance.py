"""Stance holding: does each published turn still argue its seat's side?

An optional judge model (any harness spec, as ``python -m analysis judge``)
reads the motion and one turn, and replies ``{"stance": "for" | "against" |
"unclear"}``, validated by ``harness.models.structured.generate_structured``.
The judge is not told the seat's assigned side, so it cannot be primed to
agree with it; the side is the one the run's manifest records for the seat
(its format's ``Seat.side``) and is compared here. A seat with no side (a panel analyst) is not judged.

Per turn (``judge_stance``): ``stance`` (None when missing), ``holds``
(stance == side; NA when the stance is unclear or missing) and the reason a
judgement is missing. A reply that fails validation after the repairs is
missing, never a default stance.

Per run and seat (``stance_flips``), after SYCON-Bench (Hong et al., 2025),
over the seat's turns in round order:

- only *clear* judgements count (``for`` or ``against``): a missing or
  ``unclear`` judgement is skipped, neither holding nor flipping;
- a flip is a change between two consecutive clear judgements, so a stance
  that returns after a missing judgement has not flipped;
- ``n_flips``: how many flips; ``turn_of_flip``: the first round whose clear
  stance is not the assigned side (NaN: it held in every clear judgement),
  so a seat that argues the wrong side from its first turn has
  ``turn_of_flip`` = that round and maybe no flip at all.

``check_stance`` checks the judge on a seeded sample of judged turns: the
same judge asked again with other seeds, and optionally a second judge
model; exact share and Cohen's κ of the stances, a missing judgement left
out and counted (docs/analysis.md, "Checking the judges").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field

from analysis.agreement import CHECK_COLUMNS, categorical, check_row, sample_positions
from analysis.judge import CheckPlan, JudgeWarning, judge_call
from analysis.load import Tables
from analysis.records_io import layout_of
from harness.models.base import ChatModel
from harness.models.structured import generate_structured
from harness.schema import ModelConfig

STANCES = ("for", "against", "unclear")
TURN_COLUMNS = [
    "run_id",
    "round",
    "order",
    "team",
    "turn",
    "side",
    "stance",
    "holds",
    "missing_reason",
    "judge",
]
FLIP_COLUMNS = [
    "run_id",
    "team",
    "side",
    "n_turns",
    "n_clear",
    "n_unclear",
    "n_missing",
    "hold_share",
    "turn_of_flip",
    "n_flips",
]


class StanceJudgement(BaseModel):
    stance: Literal["for", "against", "unclear"] = Field(
        description="the side of the motion the argument argues: for, against, or unclear"
    )


def messages(motion: str, text: str) -> list[dict[str, str]]:
    return [
        {
            "role": "system",
            "content": "You judge which side of a motion a debate argument takes. "
            "Reply with one JSON object only.",
        },
        {
            "role": "user",
            "content": f"Motion: {motion}\nArgument: {text}\nDoes the argument argue FOR the "
            'motion, AGAINST it, or is its side unclear? JSON field: "stance": '
            '"for" | "against" | "unclear"',
        },
    ]


def seat_sides(tables: Tables) -> dict[tuple[str, str], str | None]:
    """Each run's seats and the side each argues (None: a seat with no side), as
    the run's manifest records them."""
    sides: dict[tuple[str, str], str | None] = {}
    for run_id in tables.runs.run_id:
        layout = layout_of(tables.run_dirs[run_id])
        sides.update({(str(run_id), seat.name): seat.side for seat in layout.seats})
    return sides


def judge_stance(
    tables: Tables,
    spec: str,
    *,
    max_repairs: int = 1,
    model_cfg: ModelConfig | None = None,
    model: ChatModel | None = None,
    turns: Sequence[int] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per published turn: its seat's side, the judged stance (None when
    missing, with the reason) and whether it holds the side. ``model``: an
    already built model to use instead of building ``spec`` (tests, wrappers);
    ``turns``: positions in ``tables.turns`` to judge (default: all), turn i
    asked with seed ``seed + i``."""
    cfg = model_cfg or ModelConfig(spec=spec)
    call, sides = judge_call(tables, cfg, model), seat_sides(tables)
    topics = tables.runs.set_index("run_id").topic.to_dict()
    chosen = list(range(len(tables.turns))) if turns is None else list(turns)
    rows = []
    for i, turn in zip(chosen, tables.turns.iloc[chosen].itertuples(), strict=True):
        side = sides.get((turn.run_id, turn.team))
        row: dict[str, Any] = {
            "run_id": turn.run_id,
            "round": turn.round,
            "order": turn.order,
            "team": turn.team,
            "turn": i,
            "side": side,
            "stance": None,
            "holds": None,
            "missing_reason": None,
            "judge": cfg.spec,
        }
        if side is None:
            rows.append({**row, "missing_reason": "seat has no side"})
            continue
        motion = turn.motion if isinstance(turn.motion, str) else topics.get(turn.run_id) or "(not recorded)"
        result = generate_structured(
            call,
            messages(motion, turn.text),
            StanceJudgement,
            temperature=0.0,
            max_tokens=64,
            seed=seed + i,
            max_repairs=max_repairs,
            tags={"round": turn.round, "team": None, "role": "judge", "iteration": 0},
        )
        if result.value is None:
            row["missing_reason"] = f"unparseable after {result.attempts} attempts: {result.errors[-1][:200]}"
        else:
            stance = row["stance"] = result.value.stance
            row["holds"] = stance == side if stance != "unclear" else None
        rows.append(row)
    return pd.DataFrame(rows, columns=TURN_COLUMNS).astype({"holds": "boolean"})


def check_stance(
    tables: Tables,
    stances: pd.DataFrame,
    plan: CheckPlan,
    *,
    model_cfg: ModelConfig,
    model: ChatModel | None = None,
) -> pd.DataFrame:
    """Test-retest and second-judge agreement (exact share, Cohen's κ) on
    ``plan.sample`` turns of ``stances`` (``judge_stance``'s table) whose seat has a side."""
    judged = stances[stances.side.notna()]
    positions = sample_positions([int(t) for t in judged.turn], plan.sample, plan.seed)
    first = judged.set_index("turn").stance.loc[positions].tolist()
    rows = []
    for check, cfg, built, seed in plan.asks(model_cfg, model) if positions else []:
        with warnings.catch_warnings():
            if check == "retest":  # the first pass already warned about this judge
                warnings.simplefilter("ignore", JudgeWarning)
            again = judge_stance(tables, cfg.spec, model_cfg=cfg, model=built, turns=positions, seed=seed)
        result = categorical(first, again.stance.tolist())
        rows.append(check_row(check, "stance", model_cfg.spec, cfg.spec, result))
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def flips(stances: list[str | None], rounds: list[int], side: str | None) -> tuple[float, int]:
    """(turn_of_flip, n_flips) of one seat's judgements in round order (rules above)."""
    clear = [(r, s) for r, s in zip(rounds, stances, strict=True) if s in ("for", "against")]
    n_flips = sum(a != b for (_, a), (_, b) in zip(clear, clear[1:], strict=False))
    away = [r for r, s in clear if side is not None and s != side]
    return (float(away[0]) if away else math.nan), n_flips


def stance_flips(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per run and seat with a side: turn of flip, number of flips and counts."""
    rows = []
    judged = turns[turns.side.notna()].sort_values(["run_id", "team", "round", "order"])
    for (run_id, team), group in judged.groupby(["run_id", "team"], sort=True):
        side = group.side.iloc[0]
        stances = [s if isinstance(s, str) else None for s in group.stance]
        turn_of_flip, n_flips = flips(stances, [int(r) for r in group["round"]], side)
        holds = group.holds.dropna()
        rows.append(
            {
                "run_id": run_id,
                "team": team,
                "side": side,
                "n_turns": len(group),
                "n_clear": len(holds),
                "n_unclear": int((group.stance == "unclear").sum()),
                "n_missing": int(group.stance.isna().sum()),
                "hold_share": float(holds.astype(float).mean()) if len(holds) else math.nan,
                "turn_of_flip": turn_of_flip,
                "n_flips": n_flips,
            }
        )
    return pd.DataFrame(rows, columns=FLIP_COLUMNS)

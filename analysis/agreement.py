"""How far a judge model can be trusted: agreement between two sets of judgements.

Pure functions over two aligned sequences of judgements of the same items
(the same judge asked twice, two judge models, or one judge shown two texts
in both orders). A missing judgement (None, NaN, NA: a reply that did not
validate) is never replaced by a default: every pair with a missing side is
left out of the statistic and counted in ``n_missing``.

- ``percent_agreement``: the share of complete pairs that match exactly.
- ``cohens_kappa``: Cohen's κ for categorical labels, (p_o - p_e) / (1 - p_e)
  with p_e from each rater's own label shares. One constant rater facing a
  varying one gives κ = 0 (agreement is exactly what chance predicts); two
  raters constant on the same label give p_e = 1, where the formula is 0/0:
  κ is NaN (undefined), not 1. Two judges that say "for" to every turn agree
  on every item and tell nothing apart; reporting κ = 1 would read as a
  validated judge (seen on the pilot: SmolLM2 and Gemma 3 270M both judged
  all 60 turns "for"). The exact-match share still says 1.
- ``retest_agreement``: numeric scores asked twice (test-retest): exact-match share, mean
  absolute difference and Pearson r (NaN when either side is constant).
- ``swap_consistency``: verdicts on (A, B) and on (B, A); consistent when the
  second names the same text, i.e. the mirrored position.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# A pairwise judge's verdict names a position; asked with the texts swapped, the
# same text sits at the other one. Any other verdict (a tie) mirrors to itself.
MIRROR: Mapping[Hashable, Hashable] = {"first": "second", "second": "first"}
CHECK_COLUMNS = ["check", "item", "judge", "other", "n", "n_missing", "agreement", "kappa", "mad", "r"]


@dataclass(frozen=True)
class Agreement:
    """One check's result; statistics are over the ``n - n_missing`` complete pairs."""

    n: int  # pairs asked
    n_missing: int  # pairs with a missing judgement on either side, left out
    agreement: float  # exact-match share
    kappa: float = math.nan  # categorical labels
    mad: float = math.nan  # numeric scores: mean absolute difference
    r: float = math.nan  # numeric scores: Pearson correlation

    def row(self) -> dict[str, Any]:
        return asdict(self)


def is_missing(value: object) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and pd.NA (whose comparison is NA, bool() raises)
    except TypeError:
        return True


def complete_pairs(a: Sequence[Any], b: Sequence[Any]) -> tuple[list[tuple[Any, Any]], int]:
    """The pairs with both judgements present, and how many were left out."""
    if len(a) != len(b):
        raise ValueError(f"agreement: {len(a)} judgements against {len(b)}; pair them first")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not (is_missing(x) or is_missing(y))]
    return pairs, len(a) - len(pairs)


def percent_agreement(a: Sequence[Any], b: Sequence[Any]) -> float:
    """The share of complete pairs that match exactly (NaN when none is complete)."""
    pairs, _ = complete_pairs(a, b)
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else math.nan


def kappa_of(pairs: Sequence[tuple[Hashable, Hashable]]) -> float:
    """Cohen's κ of complete pairs (see the module docstring for the constant cases)."""
    if not pairs:
        return math.nan
    n = len(pairs)
    observed = sum(x == y for x, y in pairs) / n
    first, second = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    expected = sum(first[label] * second[label] for label in first) / (n * n)
    if expected == 1.0:  # both raters constant on one label: 0/0, undefined
        return math.nan
    return (observed - expected) / (1.0 - expected)


def cohens_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's κ between two raters' labels of the same items, missing pairs left out."""
    return kappa_of(complete_pairs(a, b)[0])


def categorical(a: Sequence[Hashable], b: Sequence[Hashable]) -> Agreement:
    """Exact-match share and κ of two raters' categorical labels."""
    pairs, missing = complete_pairs(a, b)
    share = sum(x == y for x, y in pairs) / len(pairs) if pairs else math.nan
    return Agreement(n=len(a), n_missing=missing, agreement=share, kappa=kappa_of(pairs))


def retest_agreement(first: Sequence[float], second: Sequence[float]) -> Agreement:
    """Numeric scores of the same items asked twice: exact share, mean absolute
    difference, Pearson r, and κ with the scores taken as categories."""
    pairs, missing = complete_pairs(first, second)
    if not pairs:
        return Agreement(n=len(first), n_missing=missing, agreement=math.nan)
    x, y = (np.array(side, dtype=float) for side in zip(*pairs, strict=True))
    constant = x.std() == 0 or y.std() == 0
    return Agreement(
        n=len(first),
        n_missing=missing,
        agreement=float(np.mean(x == y)),
        kappa=kappa_of(pairs),
        mad=float(np.mean(np.abs(x - y))),
        r=math.nan if constant else float(np.corrcoef(x, y)[0, 1]),
    )


def swap_consistency(
    forward: Sequence[Hashable], swapped: Sequence[Hashable], mirror: Mapping[Hashable, Hashable] = MIRROR
) -> Agreement:
    """Verdicts on (A, B) against verdicts on (B, A): the share of complete pairs
    whose second verdict is the mirror of the first (the same text chosen, or a
    tie twice). A judge that always picks the first slot scores 0."""
    pairs, missing = complete_pairs(forward, swapped)
    consistent = [mirror.get(x, x) == y for x, y in pairs]
    share = sum(consistent) / len(pairs) if pairs else math.nan
    return Agreement(n=len(forward), n_missing=missing, agreement=share)


def sample_positions(candidates: Sequence[int], size: int, seed: int) -> list[int]:
    """``size`` of ``candidates`` (all when fewer), drawn without replacement with ``seed``, in order."""
    if size < 0:
        raise ValueError(f"check sample: {size} items; give 0 or more")
    if size >= len(candidates):
        return sorted(candidates)
    drawn = np.random.default_rng(seed).choice(len(candidates), size=size, replace=False)
    return sorted(candidates[int(i)] for i in drawn)


def check_row(check: str, item: str, judge: str, other: str, result: Agreement) -> dict[str, Any]:
    return {"check": check, "item": item, "judge": judge, "other": other, **result.row()}


def format_checks(rows: Sequence[Mapping[str, Any]]) -> str:
    """A small table, one line per check and item: agreement, κ (MAD and r for
    scores; blank for labels) and how many pairs had a missing judgement."""

    def num(value: float, width: int) -> str:
        return f"{value:>{width}.2f}" if not math.isnan(value) else " " * width

    lines = [f"  {'check':<28} {'item':<20} {'agree':>5} {'κ':>5} {'MAD':>5} {'r':>5}  missing"]
    for row in rows:
        check = row["check"] if row["check"] == "retest" else f"{row['check']} ({row['other']})"
        stats = " ".join(num(row[k], 5) for k in ("agreement", "kappa", "mad", "r"))
        lines.append(f"  {check:<28} {row['item']:<20} {stats}  {row['n_missing']} of {row['n']}")
    return "\n".join(lines)

"""Paired statistics: one difference per pair (b - a), as forks give them.

- ``sign_flip_p``: the paired permutation test. Under no effect each pair's
  difference is as likely to have either sign, so the mean difference is
  compared with the means of every sign flip of the differences (exact when
  there are at most ``compare.MAX_EXACT`` flips, 2^15 = 32,768 for 15 pairs),
  else seeded Monte Carlo with ``(1 + hits) / (1 + resamples)``;
- ``paired_summary``: n, mean and SD of the differences, d_z (mean / SD),
  a paired t interval and p, a seeded percentile bootstrap interval of the
  mean difference, and the sign-flip p;
- ``paired_power`` / ``required_pairs``: the sign-flip test's power on n
  simulated differences ~ N(d_z, 1), and the pairs that reach a target, as
  ``analysis.power`` does for two independent arms.

With n pairs the smallest p is 1 / 2^n one-sided and 2 / 2^n two-sided (the
mirror flip), so 5 pairs can never reject two-sided at 0.05 (0.0625), 6 can.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd

from analysis.compare import ALTERNATIVES, LEVEL, MAX_EXACT, RESAMPLES, as_extreme
from analysis.deps import require
from analysis.power import ALPHA, N_MAX, SIMS, TARGET, smallest_n
from analysis.scoring import t_interval


def flips(n: int, resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Sign rows (+1/-1) to flip n differences by: all 2^n of them when at most
    ``MAX_EXACT``, else ``resamples`` random ones; and whether they are all."""
    if 2**n <= MAX_EXACT:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        return 1.0 - 2.0 * bits, True
    return rng.choice([-1.0, 1.0], size=(resamples, n)), False


def sign_flip_p(
    diffs: np.ndarray,
    resamples: int = RESAMPLES,
    seed: int = 0,
    alternative: str = "two-sided",
) -> tuple[float, str]:
    """The sign-flip permutation p of the mean difference, and how it was
    computed (``exact, k flips`` or ``monte carlo, k flips``). ``greater``: b > a."""
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative {alternative!r}: choose from {', '.join(ALTERNATIVES)}")
    if not len(diffs):
        return math.nan, "none"
    signs, exact = flips(len(diffs), resamples, np.random.default_rng(seed))
    hits = as_extreme(signs @ diffs / len(diffs), float(diffs.mean()), alternative)
    if exact:
        return float(hits.mean()), f"exact, {len(signs)} flips"
    return (1 + int(hits.sum())) / (1 + len(signs)), f"monte carlo, {len(signs)} flips"


def bootstrap_mean(
    diffs: np.ndarray, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile interval of the mean difference, resampling pairs."""
    if len(diffs) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), (resamples, len(diffs)))].mean(1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_summary(diffs: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """n, mean_diff, sd_diff, dz, t_low, t_high, t_p, boot_low, boot_high, perm_p, perm_method."""
    stats = require("scipy.stats", "scipy")
    n = len(diffs)
    sd = float(diffs.std(ddof=1)) if n > 1 else math.nan
    mean = float(diffs.mean()) if n else math.nan
    with warnings.catch_warnings():  # identical differences: scipy warns, p is what it is
        warnings.simplefilter("ignore", RuntimeWarning)
        t_p = float(stats.ttest_1samp(diffs, 0.0).pvalue) if n > 1 else math.nan
    t_low, t_high = t_interval(pd.Series(diffs, dtype=float))
    boot_low, boot_high = bootstrap_mean(diffs, resamples, seed)
    perm_p, method = sign_flip_p(diffs, resamples, seed)
    return {
        "n": n,
        "mean_diff": mean,
        "sd_diff": sd,
        "dz": mean / sd if sd and sd > 0 else math.nan,
        "t_low": t_low,
        "t_high": t_high,
        "t_p": t_p,
        "boot_low": boot_low,
        "boot_high": boot_high,
        "perm_p": perm_p,
        "perm_method": method,
    }


def smallest_paired_p(n: int, one_sided: bool = False) -> float:
    """The smallest p the exact sign-flip test of n pairs can give."""
    return math.nan if n < 1 else (1 if one_sided else 2) / 2**n


def first_reachable_pairs(alpha: float = ALPHA, one_sided: bool = False, n_max: int = N_MAX) -> int | None:
    """The fewest pairs whose smallest p is at most alpha (None: none up to n_max)."""
    return next((n for n in range(1, n_max + 1) if smallest_paired_p(n, one_sided) <= alpha), None)


@functools.lru_cache(maxsize=512)
def paired_power(
    n: int,
    dz: float,
    alpha: float = ALPHA,
    one_sided: bool = False,
    *,
    sims: int = SIMS,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> float:
    """The share of ``sims`` simulated sets of n differences ~ N(dz, 1) on which
    the sign-flip test gives p <= alpha (one-sided: b > a); 0 when no flip can."""
    if n < 1 or smallest_paired_p(n, one_sided) > alpha + 1e-12:
        return 0.0
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((sims, n)) + dz
    signs, exact = flips(n, resamples, rng)
    own = data.sum(1, keepdims=True)
    tol = 1e-9 * n * (1.0 + np.abs(data).max(initial=0.0))  # the same sum added in another order ties
    step = max(1, 2_000_000 // len(signs))  # data sets per chunk: a few million sums at once
    rejected = 0
    for i in range(0, sims, step):
        sums, mine = data[i : i + step] @ signs.T, own[i : i + step]
        hits = (sums >= mine - tol) if one_sided else (np.abs(sums) >= np.abs(mine) - tol)
        p = hits.mean(1) if exact else (1 + hits.sum(1)) / (1 + len(signs))
        rejected += int((p <= alpha + 1e-12).sum())
    return rejected / sims


def required_pairs(
    dz: float, alpha: float = ALPHA, target: float = TARGET, one_sided: bool = False, **options: int
) -> tuple[int | None, float]:
    """The fewest pairs whose sign-flip test reaches ``target`` power at ``dz``,
    and that power; (None, power at ``n_max``) when not even ``n_max`` pairs do."""
    n_max = options.pop("n_max", N_MAX)
    low = first_reachable_pairs(alpha, one_sided, n_max)
    if low is None:
        return None, 0.0
    if math.isnan(dz) or (dz <= 0 if one_sided else dz == 0):
        return None, math.nan
    return smallest_n(lambda n: paired_power(n, abs(dz), alpha, one_sided, **options), low, n_max, target)

"""Planning: how many pairs a campaign needs, from a measured coefficient of variation.

The fixed design reads its verdict from the two-sided t-interval at confidence 1 - alpha, and calls
FASTER only when the lower bound clears 1 + min_effect. Its power against a true speedup 1 + effect
is therefore that of a one-sided t-test at level alpha/2 of the shifted margin
delta = log(1 + effect) - log(1 + min_effect):

    power(n) = P(T' > t_{1-alpha/2, n-1}),   T' ~ noncentral t(n - 1, delta * sqrt(n) / sd),

with the per-pair log-ratio SD sd = sqrt(2) * cv for independent runs of equal CV (cv taken as the SD
of log run time, which it equals to first order). scipy.stats.nct gives the power; no tables.
Pass min_effect=0 for the classic "interval excludes 1" sizing.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import nct, t

from .errors import StatsInputError
from .model import SequentialParams
from .samples import check_int, check_min_effect, check_open_unit, check_positive

_MAX_PAIRS = 10_000_000
DEFAULT_SEQUENTIAL_MAX_FACTOR = 2.0  # max pairs = this x the fixed design's pairs (benchmarks/stats_sim.py)
DEFAULT_PRIOR_SCALE = 0.5


def pair_log_sd(cv: float) -> float:
    """SD of a per-pair log ratio for two independent runs of coefficient of variation `cv`."""
    return math.sqrt(2.0) * cv


def fixed_power(
    n_pairs: int | np.ndarray,
    cv: float,
    effect: float,
    alpha: float = 0.05,
    *,
    min_effect: float = 0.01,
) -> np.ndarray:
    """Probability that n fixed pairs give FASTER when the true speedup is 1 + effect."""
    n = np.asarray(n_pairs, dtype=np.float64)
    delta = math.log1p(effect) - math.log1p(min_effect)
    crit = t.ppf(1.0 - alpha / 2.0, n - 1.0)
    return nct.sf(crit, n - 1.0, delta * np.sqrt(n) / pair_log_sd(cv))


def pairs_needed(
    cv: float,
    effect: float,
    power: float = 0.8,
    alpha: float = 0.05,
    floor: int = 5,
    *,
    min_effect: float = 0.01,
) -> int:
    """Fewest pairs whose fixed design reaches FASTER with probability >= `power` at speedup 1+effect.

    `cv` is the coefficient of variation of single run times (e.g. 0.02 for 2%), `effect` the true
    speedup minus 1, `alpha` the two-sided error of the 95% (1 - alpha) interval; never below `floor`.
    """
    cv = check_positive("cv", cv)
    effect = check_positive("effect", effect)
    power = check_open_unit("power", power)
    alpha = check_open_unit("alpha", alpha)
    floor = check_int("floor", floor, 2)
    min_effect = check_min_effect(min_effect)
    if effect <= min_effect:
        raise StatsInputError(
            f"effect ({effect}) must exceed min_effect ({min_effect}): FASTER needs the interval above "
            "1+min_effect, which a speedup of 1+effect can never clear reliably"
        )

    def enough(n: int) -> bool:
        return bool(fixed_power(n, cv, effect, alpha, min_effect=min_effect) >= power)

    lo, hi = 1, 2  # invariant: not enough(lo) (n = 1 has no t-interval), search for the first enough
    while not enough(hi):
        lo, hi = hi, hi * 2
        if hi > _MAX_PAIRS:
            raise StatsInputError(f"more than {_MAX_PAIRS} pairs would be needed (cv={cv}, effect={effect})")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return max(floor, hi)


def plan_sequential(
    cv: float,
    effect: float = 0.05,
    power: float = 0.8,
    alpha: float = 0.05,
    *,
    min_effect: float = 0.01,
    min_pairs: int = 5,
    max_factor: float = DEFAULT_SEQUENTIAL_MAX_FACTOR,
    prior_scale: float = DEFAULT_PRIOR_SCALE,
) -> SequentialParams:
    """Sequential parameters for a campaign at `cv`: max pairs = max_factor x the fixed design's pairs.

    With the defaults the simulation (benchmarks/stats_sim.py) shows >= 80% power at a 5% effect and
    about half the fixed design's mean pairs over 5-50% speedups.
    """
    max_factor = check_positive("max_factor", max_factor)
    fixed = pairs_needed(cv, effect, power, alpha, min_pairs, min_effect=min_effect)
    return SequentialParams(
        min_effect=min_effect,
        confidence=1.0 - alpha,
        min_pairs=min_pairs,
        max_pairs=max(min_pairs, math.ceil(max_factor * fixed)),
        prior_scale=check_positive("prior_scale", prior_scale),
    )

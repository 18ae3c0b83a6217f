"""Drift and warm-up checks over run order; reported beside the verdict, never folded into it.

- Trend: Spearman rank correlation of each arm's times against run position (scipy.stats.spearmanr).
  Interleaving turns drift into noise in the log ratios; a trend still says the machine was not
  steady and a longer or better-isolated campaign may be needed.
- Position effect: does the second run of a pair differ from the first (cache warmed by the first,
  or a cooled CPU)? With d_i = log(A_i/B_i), d_i = mu - p in "AB" pairs and mu + p in "BA" pairs,
  so p = (mean d_BA - mean d_AB)/2, tested by Welch's t-test (scipy.stats.ttest_ind).
- Warm-up: pairs among the first three whose run is a slow outlier (robust z > 3.5) of its arm.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr, ttest_ind

from .model import ArmTrend, DriftReport, PairOrder
from .order import run_positions
from .outliers import DEFAULT_THRESHOLD, flag_slow_outliers

WARMUP_PAIRS = 3


def arm_trend(arm: str, positions: np.ndarray, times: np.ndarray) -> ArmTrend:
    """Spearman's rho of `times` against `positions`; None where undefined."""
    if times.size < 3 or np.ptp(times) == 0.0:
        return ArmTrend(arm=arm, spearman_rho=None, p_value=None)
    result = spearmanr(positions, times)
    return ArmTrend(arm=arm, spearman_rho=float(result.statistic), p_value=float(result.pvalue))


def position_effect(d: np.ndarray, first_is_a: np.ndarray) -> tuple[float | None, float | None]:
    """(p, Welch p-value) for the second-run effect; None where either group is too small or flat."""
    ab, ba = d[first_is_a], d[~first_is_a]
    if ab.size < 2 or ba.size < 2 or (np.ptp(ab) == 0.0 and np.ptp(ba) == 0.0):
        return None, None
    effect = 0.5 * (float(np.mean(ba)) - float(np.mean(ab)))
    if np.ptp(ab) == 0.0 or np.ptp(ba) == 0.0:
        return effect, None
    return effect, float(ttest_ind(ba, ab, equal_var=False).pvalue)


def drift_report(
    baseline: np.ndarray,
    candidate: np.ndarray,
    order: tuple[PairOrder, ...],
    *,
    alpha: float = 0.01,
) -> DriftReport:
    """Trend, position and warm-up checks for checked, equal-length arms and their A/B order."""
    pos_a, pos_b = run_positions(order)
    trend_a = arm_trend("baseline", pos_a, baseline)
    trend_b = arm_trend("candidate", pos_b, candidate)
    first_is_a = np.array([o == "AB" for o in order], dtype=bool)
    effect, effect_p = position_effect(np.log(baseline) - np.log(candidate), first_is_a)
    slow = set(flag_slow_outliers(np.log(baseline), DEFAULT_THRESHOLD))
    slow |= set(flag_slow_outliers(np.log(candidate), DEFAULT_THRESHOLD))
    warmup = tuple(sorted(i for i in slow if i < WARMUP_PAIRS))
    p_values = [p for p in (trend_a.p_value, trend_b.p_value, effect_p) if p is not None]
    return DriftReport(
        baseline=trend_a,
        candidate=trend_b,
        position_effect=effect,
        position_p=effect_p,
        warmup_pairs=warmup,
        alpha=alpha,
        drift_detected=bool(warmup) or any(p < alpha for p in p_values),
    )

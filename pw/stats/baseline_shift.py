"""Has the baseline itself got slower since `pw start`? (drift of the machine, or sabotage)

The baseline-variance stage of `pw start` times the baseline alone; every campaign times it again
beside a candidate. A candidate can look faster because the baseline got slower: the machine got
busier, or a process the candidate left behind stopped and continued the baseline's runs. So the
campaign's baseline samples are compared with the recorded ones by a one-sided Mann-Whitney U test
(scipy.stats.mannwhitneyu, "the campaign's baseline runs are stochastically larger"): a shift counts
when it is significant at ``alpha`` *and* the median slowed by more than ``min_slowdown``, so that
ordinary load on a shared machine (a few percent) does not make every verdict inconclusive.

With 5 runs on each side the smallest one-sided p is 1/252 ~ 0.004, so ``alpha = 0.01`` needs every
campaign run to be slower than every recorded one, or nearly.
"""

from __future__ import annotations

import msgspec
import numpy as np
from scipy.stats import mannwhitneyu

DEFAULT_ALPHA = 0.01
DEFAULT_MIN_SLOWDOWN = 0.15


class BaselineShift(msgspec.Struct, frozen=True, kw_only=True):
    """The test's inputs summarised and its outcome; ``slower`` is the decision."""

    n_reference: int
    n_campaign: int
    median_reference: float
    median_campaign: float
    ratio: float  # median campaign / median reference (> 1: the baseline got slower)
    p_value: float | None  # None: too few samples or all values equal
    alpha: float
    min_slowdown: float
    slower: bool


def baseline_shift(reference: list[float], campaign: list[float], *, alpha: float = DEFAULT_ALPHA,
                   min_slowdown: float = DEFAULT_MIN_SLOWDOWN) -> BaselineShift | None:
    """The shift of ``campaign`` against ``reference`` (both baseline times, same metric), or None
    when either side has fewer than two samples or a non-positive value."""
    ref, cam = np.asarray(reference, dtype=float), np.asarray(campaign, dtype=float)
    if ref.size < 2 or cam.size < 2 or not (np.all(ref > 0) and np.all(cam > 0)):
        return None
    med_r, med_c = float(np.median(ref)), float(np.median(cam))
    ratio = med_c / med_r
    p = None
    if np.ptp(np.concatenate([ref, cam])) > 0:
        p = float(mannwhitneyu(cam, ref, alternative="greater").pvalue)
    slower = p is not None and p < alpha and ratio > 1.0 + min_slowdown
    return BaselineShift(n_reference=int(ref.size), n_campaign=int(cam.size), median_reference=med_r,
                         median_campaign=med_c, ratio=ratio, p_value=p, alpha=alpha,
                         min_slowdown=min_slowdown, slower=slower)


def describe(shift: BaselineShift) -> str:
    """One line for a verdict reason."""
    p = "n/a" if shift.p_value is None else f"{shift.p_value:.3g}"
    return (f"the baseline ran {shift.ratio:.3g}x slower in this campaign than at pw start (median "
            f"{shift.median_campaign:.4g} vs {shift.median_reference:.4g} over {shift.n_campaign} and "
            f"{shift.n_reference} runs; one-sided Mann-Whitney p={p} < {shift.alpha:g}, beyond the "
            f"{shift.min_slowdown:.0%} allowed for load): the machine changed or the baseline was slowed")

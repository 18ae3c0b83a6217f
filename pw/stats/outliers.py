"""Outlier flags by a robust z-score; flagged values are reported and kept, never dropped.

Modified z-score of Iglewicz & Hoaglin, "How to Detect and Handle Outliers" (ASQC, 1993):
z_i = (x_i - median) / (1.4826 * MAD), flagged when |z| > 3.5. When more than half the values are
equal the MAD is 0; the scale then falls back to 1.2533 * mean absolute deviation from the median
(the same normal-consistency idea), and when that is 0 too every value is equal and none is flagged.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import median_abs_deviation

DEFAULT_THRESHOLD = 3.5
_MEAN_AD_TO_SIGMA = float(np.sqrt(np.pi / 2.0))  # 1.2533: sigma / E|X - median| for a normal


def robust_z(values: np.ndarray) -> np.ndarray:
    """Robust z-scores of a 1-D array (zeros when every value is equal)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return np.zeros(0)
    center = np.median(x)
    scale = float(median_abs_deviation(x, scale="normal"))
    if scale == 0.0:
        scale = _MEAN_AD_TO_SIGMA * float(np.mean(np.abs(x - center)))
    if scale == 0.0:
        return np.zeros_like(x)
    return (x - center) / scale


def flag_outliers(values: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> tuple[int, ...]:
    """Indices whose |robust z| exceeds `threshold`."""
    return tuple(int(i) for i in np.flatnonzero(np.abs(robust_z(values)) > threshold))


def flag_slow_outliers(values: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> tuple[int, ...]:
    """Indices whose robust z exceeds `threshold` on the high (slow) side only."""
    return tuple(int(i) for i in np.flatnonzero(robust_z(values) > threshold))

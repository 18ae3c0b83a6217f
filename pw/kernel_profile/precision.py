"""The precision of a row's reported time: a 95% interval for the mean of autocorrelated launches.

Launch times on a power-capped GPU are not independent samples: the SM clock wanders over hundreds
of launches (a lag-1 autocorrelation of 0.99 over a 1,600-launch window was measured on the H200),
so a t-interval that counts every launch as a sample is several times too narrow. Non-overlapping
batch means (Law & Kelton, *Simulation Modeling and Analysis*, §9.5.3; Schmeiser 1982, "Batch size
effects in the analysis of simulation output") cut the series into `b` contiguous batches; when the
batches are long enough their means are nearly independent and normal, and the t-interval over them
is honest. The batch count is chosen as Law & Carson's rule does: the most batches (32, then 16,
then 10) whose means show no lag-1 autocorrelation beyond its 95% bound for white noise
(1.96 / sqrt(b)).

Batch means under-cover when even the longest batches are short against the series' memory (10
batches of 300 launches of an AR(1) series with phi = 0.99 cover the true mean about 80% of the
time, not 95%), and ten batch means are too few to see it. So the half-width is never taken
narrower than the AR(1) one from the launches themselves: the variance of the mean of an AR(1)
series with lag-1 autocorrelation r is s^2 / n * (1 + r) / (1 - r), i.e. that of n_eff = n (1 - r)
/ (1 + r) independent launches (Box, Jenkins & Reinsel, *Time Series Analysis*, §2.1.6), with a t
quantile on n_eff - 1 degrees of freedom. The method string names the bound that governed. Pure:
numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BATCH_COUNTS = (32, 16, 10)
LEVEL = 0.95
MAX_R = 0.999  # a lag-1 this close to 1 is a trend, not noise: n_eff stays at least n / 1999


@dataclass(frozen=True)
class Precision:
    mean: float
    half_width: float  # of the LEVEL interval around `mean`, same unit
    batches: int
    batch_size: int
    batch_lag1: float | None  # lag-1 autocorrelation of the batch means
    lag1: float | None  # lag-1 autocorrelation of the raw series
    n_eff: float  # launches' worth of independent information, by the AR(1) model
    governed: str  # "batch means" or "AR(1)": which half-width was the wider
    method: str

    @property
    def rel_half_width(self) -> float:
        return self.half_width / self.mean if self.mean > 0 and math.isfinite(self.half_width) else math.inf

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def lag1(x: np.ndarray) -> float | None:
    """Lag-1 sample autocorrelation (the biased estimator of Box & Jenkins); None below 3 points or
    for a constant series."""
    if x.size < 3:
        return None
    d = x - x.mean()
    den = float(np.dot(d, d))
    if den <= 0.0:
        return None
    return float(np.dot(d[:-1], d[1:]) / den)


def t_quantile(df: int, level: float = LEVEL) -> float:
    """Two-sided Student t quantile (scipy.stats.t)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def mean_interval(values: Sequence[float]) -> Precision:
    """The LEVEL interval for the mean of `values` (a time series): non-overlapping batch means, never
    narrower than the AR(1) interval (module doc).

    With fewer values than the fewest batches, every value is its own batch (the ordinary t-interval).
    A remainder that does not fill a batch is left out of the batches from the start of the series,
    the part furthest from steady state (fewer than 32 launches); the interval is centred on the mean
    of every value.
    """
    a = np.asarray(values, dtype=np.float64)
    n = int(a.size)
    mean = float(a.mean()) if n else math.nan
    raw_lag1 = lag1(a)
    if n < 2:
        return Precision(mean, math.inf, n, 1, None, raw_lag1, float(n), "none", "fewer than 2 samples: no interval")
    counts = [b for b in BATCH_COUNTS if b <= n] or [n]
    chosen = None
    for b in counts:
        m = n // b
        means = a[n - b * m:].reshape(b, m).mean(axis=1)
        r = lag1(means)
        chosen = (b, m, means, r)
        if r is None or r <= 1.96 / math.sqrt(b):
            break
    b, m, means, r = chosen
    bm_half = t_quantile(b - 1) * float(means.std(ddof=1)) / math.sqrt(b)
    rho = min(max(raw_lag1 or 0.0, 0.0), MAX_R)
    n_eff = n * (1 - rho) / (1 + rho)
    ar_half = t_quantile(max(1.0, n_eff - 1)) * float(a.std(ddof=1)) / math.sqrt(n_eff)
    governed = "AR(1)" if ar_half > bm_half else "batch means"
    rtext = "n/a" if r is None else f"{r:.2f}"
    method = (f"{LEVEL:.0%} t-interval, the wider of: batch means ({b} batches of {m} launch(es), lag-1 of batch "
              f"means {rtext}) and AR(1) (launches' lag-1 {rho:.3f}, n_eff {n_eff:.0f} of {n}); {governed} governed")
    return Precision(mean, max(bm_half, ar_half), b, m, r, raw_lag1, n_eff, governed, method)


def samples_needed(n: int, rel: float, target: float) -> int:
    """Launches to add so the interval shrinks from `rel` to `target` (half-width ~ 1/sqrt(n))."""
    if not math.isfinite(rel) or rel <= target:
        return 0
    return int(math.ceil(n * ((rel / target) ** 2 - 1)))

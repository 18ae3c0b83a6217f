"""Anytime-valid intervals for what part of a paired saving one part of a program carries.

A campaign measures, per pair i, the whole saving b_i (the reference's time less the candidate's) and
the saving of one part of the program a_i (the hotspot's cost in the reference's run less its cost in
the candidate's run, from the same two runs' profiles). The mechanism asks for the fraction
F = E[a] / E[b]; no collateral asks whether a mean cost grew. Both use the t confidence sequence of
``pw.stats.sequential`` (Wang & Ramdas 2023), so an interval is valid at whatever look a campaign
stops, like the speedup's.

The fraction's set is Fieller's construction on that sequence: f belongs to the set when the
sequence for the mean of z_i(f) = a_i - f b_i still contains 0 after the n pairs. With centred
sums S_aa, S_ab, S_bb and k = rho/(1 - rho) / n (the sequence's radius factor over n), that is the
quadratic inequality

    (m_a - f m_b)^2 <= k (S_aa - 2 f S_ab + f^2 S_bb),

an interval when m_b^2 > k S_bb (the whole saving is resolved: its own sequence excludes 0), and
unbounded otherwise. Each pair's values are divided by the reference's time in that pair first, so
that pairs of a campaign whose runs grow longer weigh alike (the fraction is unchanged by it in
expectation for a saving proportional to the run). Pure numpy; no state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
import numpy as np

from .errors import StatsInputError
from .sequential import confidence_sequence, radius_factor


class Fraction(msgspec.Struct, frozen=True):
    """F = E[part] / E[whole], its point estimate and its anytime-valid set (None: unbounded)."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None


class Mean(msgspec.Struct, frozen=True):
    """A mean and its anytime-valid interval (None while unbounded)."""

    estimate: float
    low: float | None
    high: float | None
    n: int
    confidence: float


def _vectors(*xs: Sequence[float], scale: Sequence[float] | None) -> list[np.ndarray]:
    arrays = [np.asarray(x, dtype=np.float64) for x in xs]
    n = arrays[0].size
    if any(a.size != n for a in arrays) or (scale is not None and len(scale) != n):
        raise StatsInputError(f"paired values must pair up, got lengths {[a.size for a in arrays]}")
    if any(not np.isfinite(a).all() for a in arrays):
        raise StatsInputError("paired values must be finite numbers")
    if scale is not None:
        s = np.asarray(scale, dtype=np.float64)
        if not (np.isfinite(s).all() and (s > 0).all()):
            raise StatsInputError("scales must be finite and > 0")
        arrays = [a / s for a in arrays]
    return arrays


def fraction(part: Sequence[float], whole: Sequence[float], *, scale: Sequence[float] | None = None,
             confidence: float = 0.95, prior_scale: float = 2.0) -> Fraction:
    """E[part] / E[whole] over paired values, with its Fieller set on the t confidence sequence
    (module docstring). ``scale``: divide each pair by it first (the reference's time)."""
    a, b = _vectors(part, whole, scale=scale)
    n = a.size
    if n < 2:
        return Fraction(estimate=None, low=None, high=None, n=n, confidence=confidence)
    ma, mb = float(a.mean()), float(b.mean())
    da, db = a - ma, b - mb
    saa, sab, sbb = float(da @ da), float(da @ db), float(db @ db)
    factor = float(radius_factor(np.array([float(n)]), confidence, prior_scale)[0])
    estimate = ma / mb if mb != 0.0 else None
    if not math.isfinite(factor):
        return Fraction(estimate=estimate, low=None, high=None, n=n, confidence=confidence)
    k = factor / n
    qa, qb, qc = mb * mb - k * sbb, -2.0 * (ma * mb - k * sab), ma * ma - k * saa
    if qa <= 0.0:
        return Fraction(estimate=estimate, low=None, high=None, n=n, confidence=confidence)
    disc = qb * qb - 4.0 * qa * qc
    if disc < 0.0:  # cannot happen when qa > 0 and the point estimate satisfies the inequality
        disc = 0.0
    root = math.sqrt(disc)
    low, high = (-qb - root) / (2.0 * qa), (-qb + root) / (2.0 * qa)
    return Fraction(estimate=estimate, low=low, high=high, n=n, confidence=confidence)


def mean(values: Sequence[float], *, scale: Sequence[float] | None = None, confidence: float = 0.95,
         prior_scale: float = 2.0) -> Mean:
    """The mean of paired values (divided by ``scale`` first) and its interval after the last pair."""
    (x,) = _vectors(values, scale=scale)
    n = x.size
    if n == 0:
        raise StatsInputError("need at least one value")
    m, low, high = confidence_sequence(x[None, :], confidence, prior_scale, intersect=False)
    lo, hi = float(low[0, -1]), float(high[0, -1])
    return Mean(estimate=float(m[0, -1]), low=lo if math.isfinite(lo) else None,
                high=hi if math.isfinite(hi) else None, n=n, confidence=confidence)


def decided_above(f: Fraction, threshold: float) -> bool | None:
    """True when the set lies wholly above ``threshold``, False when wholly below, None otherwise."""
    if not f.bounded:
        return None
    if f.low > threshold:  # type: ignore[operator]
        return True
    if f.high < threshold:  # type: ignore[operator]
        return False
    return None

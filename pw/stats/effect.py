"""The verdict rule: an interval for the speedup against a stated minimum effect.

FASTER only when the whole interval lies above 1+min_effect; SLOWER when it lies below
1/(1+min_effect) (the mirror image on the log scale, so a 1% minimum effect means "more than 1%
faster" and "more than 1% slower" in the same sense); SAME when it lies inside
[1/(1+min_effect), 1+min_effect]; otherwise INCONCLUSIVE. Works on arrays, for the simulations.
"""

from __future__ import annotations

import numpy as np

from .model import FASTER, INCONCLUSIVE, SAME, SLOWER, Verdict

# Codes for the vectorized form, in the order of VERDICTS.
VERDICTS: tuple[Verdict, ...] = (FASTER, SLOWER, SAME, INCONCLUSIVE)
CODE_FASTER, CODE_SLOWER, CODE_SAME, CODE_INCONCLUSIVE = 0, 1, 2, 3


def verdict_codes(log_low, log_high, min_effect: float) -> np.ndarray:
    """Verdict codes for intervals given on the log-speedup scale (arrays broadcast).

    An interval with a NaN bound is INCONCLUSIVE, never FASTER.
    """
    lo = np.asarray(log_low, dtype=float)
    hi = np.asarray(log_high, dtype=float)
    margin = np.log1p(min_effect)
    codes = np.full(np.broadcast(lo, hi).shape, CODE_INCONCLUSIVE, dtype=np.int8)
    codes[(lo >= -margin) & (hi <= margin)] = CODE_SAME
    codes[hi < -margin] = CODE_SLOWER
    codes[lo > margin] = CODE_FASTER
    codes[np.isnan(lo) | np.isnan(hi)] = CODE_INCONCLUSIVE
    return codes


def verdict_of(low: float, high: float, min_effect: float) -> Verdict:
    """The verdict of one speedup interval [low, high] (ratio scale, low > 0)."""
    with np.errstate(divide="ignore"):
        code = verdict_codes(np.log(low), np.log(high), min_effect)
    return VERDICTS[int(code)]

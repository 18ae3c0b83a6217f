"""The verdict rule against a stated minimum effect."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pw.stats import FASTER, INCONCLUSIVE, SAME, SLOWER, verdict_of
from pw.stats.effect import CODE_FASTER, CODE_INCONCLUSIVE, verdict_codes

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.011, 1.5, FASTER),
        (1.009, 1.5, INCONCLUSIVE),  # above 1 but not above 1 + 1%
        (0.5, 1 / 1.011, SLOWER),
        (0.5, 0.9905, INCONCLUSIVE),  # 1 - 1% would call this SLOWER; 1/(1+1%) = 0.990099 does not
        (0.995, 1.005, SAME),
        (1 / 1.0099, 1.0099, SAME),
        (0.98, 1.005, INCONCLUSIVE),
        (0.9, 1.2, INCONCLUSIVE),
    ],
)
def test_rule(low, high, expected):
    assert verdict_of(low, high, 0.01) == expected


def test_slower_is_the_mirror_image_of_faster_on_the_log_scale():
    for m in (0.0, 0.01, 0.05, 0.3):
        assert verdict_of(1 + m + 1e-9, 2.0, m) == FASTER
        assert verdict_of(0.5, 1 / (1 + m + 1e-9), m) == SLOWER


def test_nan_bounds_are_never_faster():
    # log-scale bounds: a finite bound far above the margin must not make a NaN interval FASTER
    codes = verdict_codes(np.array([math.nan, 0.5, math.nan]), np.array([1.0, math.nan, -1.0]), 0.01)
    assert list(codes) == [CODE_INCONCLUSIVE] * 3
    assert CODE_FASTER not in codes

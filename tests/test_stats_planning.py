"""Planning from a measured coefficient of variation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pw.stats import fixed_power, pairs_needed
from pw.stats.effect import CODE_FASTER, verdict_codes
from pw.stats.paired import t_interval_log

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize(("cv", "effect"), [(0.02, 0.05), (0.05, 0.05), (0.10, 0.05), (0.05, 0.10)])
def test_smallest_n_reaching_the_power(cv, effect):
    n = pairs_needed(cv, effect)
    assert fixed_power(n, cv, effect) >= 0.8
    if n > 5:
        assert fixed_power(n - 1, cv, effect) < 0.8


def test_floor_and_monotonicity():
    assert pairs_needed(0.001, 0.5) == 5
    assert pairs_needed(0.001, 0.5, floor=2) < 5
    ns = [pairs_needed(cv, 0.05) for cv in (0.01, 0.02, 0.05, 0.1, 0.2)]
    assert ns == sorted(ns) and ns[-1] > ns[0]
    assert pairs_needed(0.05, 0.10) < pairs_needed(0.05, 0.05)
    assert pairs_needed(0.05, 0.05, power=0.9) > pairs_needed(0.05, 0.05, power=0.8)


def test_classic_sizing_agrees_with_the_normal_approximation():
    # min_effect=0: the interval only has to exclude 1. sqrt(2)*cv per pair; ~+2 pairs for t over z.
    sd, delta = np.sqrt(2) * 0.05, np.log(1.05)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    approx = (z * sd / delta) ** 2
    assert approx < pairs_needed(0.05, 0.05, min_effect=0.0) <= approx + 3


def test_planned_n_delivers_the_power_in_simulation():
    cv, effect = 0.05, 0.05
    n = pairs_needed(cv, effect)
    rng = np.random.default_rng(7)
    d = rng.normal(np.log1p(effect), np.sqrt(2) * cv, (4000, n))
    _, _, lo, hi = t_interval_log(d, 0.95)
    power = np.mean(verdict_codes(lo, hi, 0.01) == CODE_FASTER)
    assert abs(power - 0.8) < 0.03

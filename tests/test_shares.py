"""pw.stats.shares: the share of a paired saving one part carries, anytime-valid (Fieller's set on the
t confidence sequence), and the mean of a per-pair growth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pw.stats.shares import decided_above, fraction, mean


def _pairs(rng, n, true_fraction, saving=0.5, noise=0.05):
    """n pairs of a program of 1 s whose hotspot carries ``true_fraction`` of a ``saving``."""
    base = 1.0 + rng.normal(0, noise, n)
    whole = saving * base + rng.normal(0, noise, n)
    part = true_fraction * whole + rng.normal(0, noise / 2, n)
    return part, whole, base


def test_the_set_covers_the_true_fraction_about_as_often_as_it_says():
    rng = np.random.default_rng(20261202)
    covered = trials = 0
    for _ in range(400):
        part, whole, base = _pairs(rng, 12, 0.8)
        f = fraction(part, whole, scale=base)
        if f.bounded:
            trials += 1
            covered += f.low <= 0.8 <= f.high
    assert trials > 350 and covered / trials >= 0.95, (covered, trials)


def test_an_unresolved_whole_saving_leaves_the_set_unbounded():
    rng = np.random.default_rng(3)
    part, whole, base = _pairs(rng, 6, 0.5, saving=0.0, noise=0.1)
    f = fraction(part, whole, scale=base)
    assert not f.bounded and decided_above(f, 0.5) is None


def test_a_clear_fraction_is_decided_on_the_right_side_and_a_middling_one_is_not():
    rng = np.random.default_rng(11)
    high = fraction(*_pairs(rng, 20, 0.95, noise=0.02)[:2], scale=_pairs(rng, 20, 0.95)[2])
    low = fraction(*_pairs(rng, 20, 0.05, noise=0.02)[:2])
    assert decided_above(high, 0.5) is True and decided_above(low, 0.5) is False
    edge = fraction(*_pairs(rng, 6, 0.5, noise=0.05)[:2])
    assert decided_above(edge, 0.5) is None


def test_one_pair_gives_no_interval_and_mismatched_lengths_are_refused():
    assert fraction([0.1], [0.2]).estimate is None
    from pw.stats import StatsInputError

    with pytest.raises(StatsInputError, match="pair up"):
        fraction([0.1, 0.2], [0.2])
    with pytest.raises(StatsInputError, match="finite"):
        fraction([0.1, float("nan")], [0.2, 0.3])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=30), st.floats(0.01, 2.0))
def test_scaling_every_pair_by_one_factor_leaves_the_fraction_unchanged(values, factor):
    part = np.asarray(values)
    whole = part * 0.5 + 1.0
    a, b = fraction(part, whole), fraction(part * factor, whole * factor)
    assert (a.estimate is None) == (b.estimate is None)
    if a.estimate is not None:
        assert b.estimate == pytest.approx(a.estimate, rel=1e-9, abs=1e-12)
    assert a.bounded == b.bounded


def test_the_mean_growth_interval_contains_its_estimate_and_narrows_with_pairs():
    rng = np.random.default_rng(5)
    few = mean(rng.normal(0.02, 0.01, 6))
    many = mean(rng.normal(0.02, 0.01, 60))
    assert few.low < few.estimate < few.high and many.low < many.estimate < many.high
    assert (many.high - many.low) < (few.high - few.low)
    assert many.low > 0.0  # a real 2% growth is shown over 60 pairs

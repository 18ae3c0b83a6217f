"""Sequential mode: the anytime-valid confidence sequence and the stopping decision."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest

from pw.stats import (
    FASTER,
    INCONCLUSIVE,
    SequentialDecision,
    SequentialParams,
    plan_sequential,
    redecide,
    sequential_decision,
)
from pw.stats.paired import t_interval_log
from pw.stats.sequential import REASONS, confidence_sequence, radius_factor, stopping_times

pytestmark = pytest.mark.filterwarnings("error")


def bayes_factor(d: np.ndarray, m: float, g: float) -> float:
    """BF_n(m) straight from its definition, to check the closed-form interval against."""
    y = d - m
    n = y.size
    r = y.sum() ** 2 / (n * np.sum(y * y))
    c = n * g / (1 + n * g)
    return (1 + n * g) ** -0.5 * (1 - c * r) ** (-n / 2)


@pytest.mark.parametrize("n", [6, 9, 25, 120])
def test_interval_ends_are_where_the_bayes_factor_crosses_one_over_alpha(n):
    d = np.random.default_rng(n).normal(0.03, 0.05, n)
    g = 0.5
    factor = radius_factor(np.array([n]), 0.95, g)[0]
    half = np.sqrt(factor * np.sum((d - d.mean()) ** 2) / n)
    for end in (d.mean() - half, d.mean() + half):
        assert bayes_factor(d, end, g) == pytest.approx(20.0, rel=1e-9)
    assert bayes_factor(d, d.mean() + 0.9 * half, g) < 20.0 < bayes_factor(d, d.mean() + 1.1 * half, g)


def test_unbounded_until_the_mixture_can_exclude_anything():
    factors = radius_factor(np.arange(1, 10), 0.95, 0.5)
    assert np.all(np.isinf(factors[:5])) and np.all(np.isfinite(factors[5:]))


def test_anytime_coverage_over_whole_trajectories():
    """P(the true mean leaves the running interval at ANY n <= 300) <= 5%, here under normal and t3
    noise, 1,000 trajectories each; a fixed-n t-interval checked at every n would fail this."""
    rng = np.random.default_rng(11)
    for noise in (rng.normal(0.0, 0.07, (1000, 300)), rng.standard_t(3, (1000, 300)) * 0.04):
        _, low, high = confidence_sequence(noise, 0.95, 0.5)
        ever_missed = np.any((low > 0.0) | (high < 0.0), axis=1)
        assert ever_missed.mean() <= 0.05
    # The contrast: peeking at a fixed-n t-interval after every pair misses far more often.
    d = rng.normal(0.0, 0.07, (1000, 300))
    n = np.arange(2, 301)
    _, _, t_low, t_high = (np.stack(x, axis=1) for x in zip(*(t_interval_log(d[:, :k], 0.95) for k in n)))
    assert np.mean(np.any((t_low > 0.0) | (t_high < 0.0), axis=1)) > 0.2


def test_never_stops_before_min_pairs_and_always_at_max():
    params = SequentialParams(min_pairs=5, max_pairs=12)
    d = [0.5, 0.52, 0.49, 0.51]  # overwhelming, but only 4 pairs
    assert sequential_decision(d, params).reason == "below_min_pairs"
    rng = np.random.default_rng(1)
    noisy = rng.normal(0.0, 0.3, 12)
    last = sequential_decision(noisy, params)
    assert last.stop and last.reason in ("max_pairs", "futility", "same", "slower", "faster")


def test_clear_speedup_stops_early_as_faster():
    d = np.random.default_rng(2).normal(np.log(1.5), 0.05, 30)
    params = plan_sequential(0.05)
    decisions = [sequential_decision(d[:n], params) for n in range(1, 31)]
    first_stop = next(x for x in decisions if x.stop)
    assert first_stop.reason == "faster" and first_stop.verdict == FASTER
    assert first_stop.n_pairs <= 8
    assert first_stop.interval.low > 1.01
    assert all(not x.stop for x in decisions[: first_stop.n_pairs - 1])


def test_scalar_decision_agrees_with_the_vectorized_simulation_view():
    rng = np.random.default_rng(3)
    params = SequentialParams(max_pairs=60)
    d = rng.normal(0.04, 0.06, (40, 60))
    used, codes = stopping_times(d, params)
    for row, n, code in zip(d, used, codes):
        decision = sequential_decision(row[:n], params)
        assert decision.stop and decision.reason == REASONS[code]
        assert n == params.min_pairs or not sequential_decision(row[: n - 1], params).stop


def test_futility_stop_when_faster_is_out_of_reach():
    d = np.random.default_rng(4).normal(np.log(0.97), 0.01, 200)
    decision = next(x for x in (sequential_decision(d[:n]) for n in range(1, 201)) if x.stop)
    assert decision.reason in ("futility", "slower")
    assert decision.verdict != FASTER
    off = SequentialParams(stop_on_futility=False, max_pairs=200)
    assert all(sequential_decision(d[:n], off).reason != "futility" for n in range(1, 201))


def test_bit_identical_and_recomputable_from_recorded_json():
    d = np.random.default_rng(5).normal(0.02, 0.05, 17)
    params = plan_sequential(0.05)
    first = msgspec.json.encode(sequential_decision(d, params))
    assert first == msgspec.json.encode(sequential_decision(list(d), params))
    assert msgspec.json.encode(redecide(json.loads(first))) == first
    assert msgspec.json.encode(redecide(msgspec.json.decode(first, type=SequentialDecision))) == first


def test_plan_sequential_records_its_parameters():
    params = plan_sequential(0.05, 0.05)
    assert params.max_pairs == 56 and params.min_pairs == 5 and params.confidence == 0.95
    assert sequential_decision([0.0, 0.01], params).verdict == INCONCLUSIVE

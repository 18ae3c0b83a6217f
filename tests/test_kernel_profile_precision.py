"""The stopping rule's statistics (pw/kernel_profile/precision.py, timing.py): the batch-means
interval is honest for autocorrelated launches where the naive one is not, the rule needs all
three of its conditions, and a row states both spreads, the method and the power state."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pw.kernel_profile import precision
from pw.kernel_profile.protocol import Settings
from pw.kernel_profile.timing import converged, sample_stats, telemetry_of


def ar1(rng, n: int, phi: float, sd: float) -> np.ndarray:
    """1 + a stationary AR(1) series (y[i] = phi y[i-1] + e[i], stdev `sd`): launch times whose clock
    state drifts (phi near 1) around a known mean."""
    from scipy.signal import lfilter

    e = rng.standard_normal(n) * sd * math.sqrt(1 - phi * phi)
    e[0] = rng.standard_normal() * sd  # y[0] drawn from the stationary distribution
    return 1.0 + lfilter([1.0], [1.0, -phi], e)


def naive_half_width(x: np.ndarray) -> float:
    return 1.96 * x.std(ddof=1) / math.sqrt(x.size)


@pytest.mark.parametrize("phi", [0.0, 0.9, 0.99])
def test_the_interval_covers_the_true_mean_about_95_percent_of_the_time(phi):
    rng = np.random.default_rng(7)
    runs, hits, naive_hits = 150, 0, 0
    for _ in range(runs):
        x = ar1(rng, 3000, phi, 0.03)
        p = precision.mean_interval(x)
        hits += abs(p.mean - 1.0) <= p.half_width
        naive_hits += abs(x.mean() - 1.0) <= naive_half_width(x)
    assert hits / runs >= 0.85, (phi, hits / runs)
    if phi >= 0.9:  # the per-launch t-interval is far too narrow when launches are correlated
        assert naive_hits / runs < 0.6, (phi, naive_hits / runs)


def test_correlated_launches_get_longer_batches_and_the_method_says_so():
    rng = np.random.default_rng(3)
    iid = precision.mean_interval(ar1(rng, 4000, 0.0, 0.02))
    drift = precision.mean_interval(ar1(rng, 4000, 0.995, 0.02))
    assert iid.batches == 32 and "32 batches of 125 launch(es)" in iid.method
    assert iid.n_eff > 3000 and iid.method.endswith("batch means governed")
    assert drift.batch_size > iid.batch_size and drift.lag1 > 0.9 and drift.n_eff < 40
    assert drift.governed == "AR(1)" and drift.method.endswith("AR(1) governed")
    assert drift.rel_half_width > 5 * iid.rel_half_width


def test_few_samples_are_their_own_batches_and_one_has_no_interval():
    assert precision.mean_interval([1.0, 2.0, 3.0]).batches == 3
    one = precision.mean_interval([1.0])
    assert math.isinf(one.rel_half_width) and "fewer than 2" in one.method


def test_the_rule_needs_precision_launches_and_gpu_time():
    s = Settings(target_rel_ci=0.005, min_samples=10, min_gpu_time_s=0.5)
    steady = [1_000_000] * 600  # 1 ms launches, no spread: 0.6 s of GPU time
    assert converged(steady, precision.mean_interval(steady), s)
    short = steady[:400]  # precise, but 0.4 s of GPU time
    assert not converged(short, precision.mean_interval(short), s)
    few = [100_000_000] * 6  # 0.6 s, but 6 launches
    assert not converged(few, precision.mean_interval(few), s)
    rng = np.random.default_rng(1)
    noisy = [int(x) for x in ar1(rng, 600, 0.99, 0.05) * 1e6]  # enough time, not enough precision
    assert not converged(noisy, precision.mean_interval(noisy), s)
    assert precision.samples_needed(100, 0.01, 0.005) == 300 and precision.samples_needed(100, 0.004, 0.005) == 0


def test_a_row_states_both_spreads_the_method_and_the_rule():
    rng = np.random.default_rng(5)
    ns = [int(x) for x in ar1(rng, 2000, 0.95, 0.03) * 1e6]
    st = sample_stats(ns, "timeout", Settings(timeout_s=3))
    assert st.statistic == "mean" and st.mean_ms == pytest.approx(np.mean(ns) / 1e6)
    assert st.ci_low_ms < st.mean_ms < st.ci_high_ms
    assert st.rel_ci_half_width == pytest.approx((st.ci_high_ms - st.mean_ms) / st.mean_ms)
    assert st.rel_stdev > st.rel_ci_half_width  # spread of launches vs precision of their mean
    assert st.lag1_autocorr > 0.8 and st.ci_method.startswith("95% t-interval, the wider of: batch means (")
    assert st.stop_rule == "rel. 95% CI half-width of the mean <= 0.50% with >= 10 launches and >= 0.5 s GPU time, " \
                           "or 3 s timeout"


def test_telemetry_says_when_the_power_cap_held_the_clock():
    def row(t, sm, mask, power=690.0):  # Sampler.FIELDS order
        return (t, power, sm, 2619.0, 100.0, 60.0, 55.0, mask, 1000.0)

    capped = telemetry_of([row(0, 1980, 0), row(0.05, 1410, 4), row(0.1, 1500, 4), row(0.15, 1700, 0)], 700.0)
    assert capped.power_capped is True and capped.power_cap_fraction == 0.5 and capped.throttle_mask == 4
    assert (capped.sm_clock_min_mhz, capped.sm_clock_max_mhz, capped.sm_clock_mhz) == (1410, 1980, 1600)
    assert capped.power_limit_w == 700.0 and capped.mem_clock_mhz == 2619.0
    free = telemetry_of([row(0, 1980, 0, 300.0), row(0.05, 1980, float("nan"), 310.0)], 700.0)
    assert free.power_capped is False and free.power_cap_fraction == 0.0
    assert telemetry_of([], 700.0).power_capped is None

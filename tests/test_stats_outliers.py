"""Outliers flagged and kept; the robust re-check; the drift and warm-up report."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pw.stats import FASTER, SAME, analyze_pairs, interleaved_order
from pw.stats.outliers import flag_outliers, robust_z
from pw.stats.robust import hodges_lehmann, signed_rank_cdf

pytestmark = pytest.mark.filterwarnings("error")


def test_robust_z_uses_the_normal_scaled_mad():
    x = np.array([1.0, 2.0, 3.0, 4.0, 100.0])
    mad = stats.median_abs_deviation(x, scale="normal")
    assert robust_z(x) == pytest.approx((x - 3.0) / mad)
    assert flag_outliers(x) == (4,)


def test_mad_zero_falls_back_to_mean_absolute_deviation():
    x = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 9.0])  # MAD = 0
    assert stats.median_abs_deviation(x) == 0.0
    assert flag_outliers(x) == (6,)
    assert flag_outliers(np.ones(5)) == ()


def test_signed_rank_distribution_matches_scipy_exact_p_values():
    rng = np.random.default_rng(0)
    for n in (6, 11, 20):
        d = rng.normal(size=n)
        t_plus = stats.rankdata(np.abs(d))[d > 0].sum()
        t_min = min(t_plus, n * (n + 1) / 2 - t_plus)
        exact = stats.wilcoxon(d, method="exact").pvalue
        assert 2 * signed_rank_cdf(n)[int(t_min)] == pytest.approx(exact, rel=1e-12)


def test_hodges_lehmann_interval_coverage_is_at_least_nominal():
    rng = np.random.default_rng(1)
    hits = 0
    for _ in range(400):
        est, lo, hi, achieved = hodges_lehmann(rng.standard_t(3, 15), 0.95)
        hits += lo < 0.0 < hi
        assert lo <= est <= hi and achieved >= 0.95
    assert hits / 400 >= 0.92  # nominal >= 0.95, less Monte Carlo slack


def make_same_with_spikes(n: int, spikes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    base = np.exp(rng.normal(0.0, 0.002, n))
    cand = np.exp(rng.normal(0.0, 0.002, n))
    cand[spikes] *= 1.6  # interference hit the candidate's run in these pairs
    return base, cand


def test_outliers_are_flagged_and_kept_and_the_verdict_depends_on_them():
    base, cand = make_same_with_spikes(30, [4, 17, 25])
    result = analyze_pairs(base, cand, order=interleaved_order(30, 1))
    assert result.outliers.pairs == (4, 17, 25)
    assert result.outliers.candidate_runs == (4, 17, 25)
    assert result.n_pairs == 30 and result.inputs.candidate_s[4] == float(cand[4])  # kept
    assert result.verdict != SAME  # the spikes widen and shift the t-interval
    assert result.robust.verdict == SAME  # the median-based check is not moved
    assert result.verdict_depends_on_outliers


def test_a_clean_verdict_does_not_depend_on_outliers():
    rng = np.random.default_rng(3)
    base = np.exp(rng.normal(0.0, 0.01, 30))
    cand = np.exp(rng.normal(-0.1, 0.01, 30))
    result = analyze_pairs(base, cand, order=interleaved_order(30, 3))
    assert result.verdict == FASTER and result.robust.verdict == FASTER
    assert not result.verdict_depends_on_outliers
    assert result.robust.speedup == pytest.approx(result.speedup, rel=0.01)


def test_drift_over_run_order_is_reported():
    n = 40
    order = interleaved_order(n, 4)
    rng = np.random.default_rng(4)
    a_first = np.array([o == "AB" for o in order])
    pos_a = 2 * np.arange(n) + np.where(a_first, 0, 1)
    pos_b = 2 * np.arange(n) + np.where(a_first, 1, 0)
    base = np.exp(rng.normal(0, 0.005, n) - 0.002 * pos_a)  # each run 0.2% faster than the last
    cand = np.exp(rng.normal(0, 0.005, n) - 0.002 * pos_b)
    result = analyze_pairs(base, cand, order=order)
    assert result.drift.drift_detected
    assert result.drift.baseline.spearman_rho < -0.8 and result.drift.baseline.p_value < 0.01
    assert result.drift.candidate.spearman_rho < -0.8
    assert result.verdict == SAME  # interleaving kept the drift out of the verdict


def test_steady_runs_report_no_drift_and_a_warm_up_run_is_caught():
    n = 20
    order = interleaved_order(n, 5)
    rng = np.random.default_rng(5)
    base = np.exp(rng.normal(0, 0.01, n))
    cand = np.exp(rng.normal(0, 0.01, n))
    steady = analyze_pairs(base, cand, order=order)
    assert not steady.drift.drift_detected and steady.drift.warmup_pairs == ()
    base[0] *= 1.5  # cold caches on the very first run
    warm = analyze_pairs(base, cand, order=order)
    assert warm.drift.warmup_pairs == (0,) and warm.drift.drift_detected


def test_position_effect_second_run_faster():
    n = 30
    order = interleaved_order(n, 6)
    rng = np.random.default_rng(6)
    a_first = np.array([o == "AB" for o in order])
    base = np.exp(rng.normal(0, 0.003, n) - np.where(a_first, 0.0, 0.05))  # second run 5% faster
    cand = np.exp(rng.normal(0, 0.003, n) - np.where(a_first, 0.05, 0.0))
    drift = analyze_pairs(base, cand, order=order).drift
    assert drift.position_effect == pytest.approx(-0.05, abs=0.005)
    assert drift.position_p < 1e-6 and drift.drift_detected

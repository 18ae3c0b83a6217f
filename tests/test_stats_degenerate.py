"""Degenerate inputs: a clear StatsInputError or an INCONCLUSIVE result, never a crash or a FASTER."""

from __future__ import annotations

import math
import warnings

import pytest

from ledger.errors import InputError
from pw.stats import (
    FASTER,
    INCONCLUSIVE,
    SequentialParams,
    StatsInputError,
    analyze_pairs,
    log_ratios,
    pairs_needed,
    plan_sequential,
    sequential_decision,
)

pytestmark = pytest.mark.filterwarnings("error")  # a divide-by-zero or scipy warning fails the test

GOOD = [1.0, 1.1, 0.9, 1.05, 0.95]


def analyze(base, cand):
    return analyze_pairs(base, cand, order=["AB", "BA"] * (len(base) // 2) + ["AB"] * (len(base) % 2))


@pytest.mark.parametrize(
    ("base", "cand", "message"),
    [
        ([], [], "at least 2 pairs"),
        ([1.0], [0.9], "at least 2 pairs"),
        ([1.0, 0.0, 1.0], [1.0, 1.0, 1.0], r"baseline_s must be > 0 seconds, got 0\.0 at index 1"),
        ([1.0, 1.0, 1.0], [1.0, -2.0, 1.0], "candidate_s must be > 0 seconds"),
        ([1.0, math.nan, 1.0], [1.0, 1.0, 1.0], "baseline_s must be finite, got nan at index 1"),
        ([1.0, 1.0, 1.0], [1.0, 1.0, math.inf], "candidate_s must be finite, got inf at index 2"),
        ([1.0, 1.0, 1.0], [1.0, 1.0], "must pair up, got 3 and 2"),
        ([[1.0, 2.0]], [[1.0, 2.0]], "one-dimensional"),
        (["fast", "slow"], [1.0, 2.0], "sequence of numbers"),
    ],
)
def test_bad_samples_raise_a_clear_error(base, cand, message):
    with pytest.raises(StatsInputError, match=message) as info:
        analyze(base, cand)
    assert isinstance(info.value, ValueError) and isinstance(info.value, InputError)
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_effect": -0.01}, "min_effect"),
        ({"min_effect": math.nan}, "min_effect"),
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0}, "confidence"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"n_resamples": 0}, "n_resamples"),
        ({"outlier_z": 0}, "outlier_z"),
    ],
)
def test_bad_parameters_raise_a_clear_error(kwargs, message):
    with pytest.raises(StatsInputError, match=message):
        analyze_pairs(GOOD, GOOD, order=["AB", "BA", "AB", "BA", "AB"], **kwargs)


@pytest.mark.parametrize("n", [2, 3, 5, 40])
def test_all_equal_samples_are_inconclusive_without_warnings(n):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = analyze([1.0] * n, [1.0] * n)
    assert result.verdict in ("SAME", INCONCLUSIVE)
    assert result.robust.verdict != FASTER
    assert result.speedup == 1.0 and result.wilcoxon_p == 1.0
    assert result.outliers.pairs == () and not result.verdict_depends_on_outliers
    assert any("zero spread" in note for note in result.notes)


def test_constant_nonzero_ratio_is_not_trusted_as_faster():
    # Every pair exactly 2x: zero spread, so no interval can be estimated (a coarse timer?).
    result = analyze([2.0] * 6, [1.0] * 6)
    assert result.speedup == 2.0
    assert result.verdict == INCONCLUSIVE


def test_each_arm_constant_but_different_arms_is_still_handled():
    result = analyze([2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 1.0, 1.0])
    assert result.drift.baseline.spearman_rho is None  # undefined for a constant arm
    assert result.verdict == INCONCLUSIVE


def test_two_pairs_is_the_smallest_analysis():
    result = analyze([1.0, 1.2], [0.5, 0.55])
    assert result.n_pairs == 2 and result.verdict in (FASTER, INCONCLUSIVE)
    assert result.robust.interval.confidence < 0.95  # stated, not hidden


def test_tiny_and_huge_times():
    result = analyze([1e-9, 1.1e-9, 0.9e-9], [1e-9, 1.05e-9, 0.95e-9])
    assert result.verdict != FASTER
    result = analyze([1e9, 1.1e9, 0.9e9], [1e9, 1.05e9, 0.95e9])
    assert result.verdict != FASTER


def test_sequential_degenerate_inputs():
    params = SequentialParams(max_pairs=20)
    empty = sequential_decision([], params)
    assert (empty.stop, empty.reason, empty.speedup, empty.interval) == (False, "below_min_pairs", None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flat = sequential_decision([0.3] * 10, params)  # a flat prefix says nothing about sigma
    assert flat.interval is None and not flat.stop and flat.verdict == INCONCLUSIVE
    at_max = sequential_decision([0.3] * 20, params)
    assert at_max.stop and at_max.reason == "max_pairs" and at_max.verdict == INCONCLUSIVE
    with pytest.raises(StatsInputError, match="finite"):
        sequential_decision([0.1, math.nan], params)
    with pytest.raises(StatsInputError, match="max_pairs"):
        sequential_decision([0.1], SequentialParams(min_pairs=5, max_pairs=4))
    with pytest.raises(StatsInputError, match="> 0 seconds"):
        log_ratios([1.0, 0.0], [1.0, 1.0])


def test_planning_rejects_impossible_requests():
    with pytest.raises(StatsInputError, match="must exceed min_effect"):
        pairs_needed(0.02, 0.01)
    with pytest.raises(StatsInputError, match="cv"):
        pairs_needed(0.0, 0.05)
    with pytest.raises(StatsInputError, match="power"):
        pairs_needed(0.02, 0.05, power=1.0)
    with pytest.raises(StatsInputError, match="floor"):
        pairs_needed(0.02, 0.05, floor=1)
    with pytest.raises(StatsInputError, match="max_factor"):
        plan_sequential(0.02, max_factor=0)

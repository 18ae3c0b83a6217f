"""Properties over arbitrary inputs (hypothesis)."""

from __future__ import annotations

import json
import warnings

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pw.stats import (
    FASTER,
    SLOWER,
    SequentialParams,
    StatsInputError,
    analyze_pairs,
    interleaved_order,
    log_ratios,
    sequential_decision,
)

pytestmark = pytest.mark.filterwarnings("error")

times = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False)
FAST = settings(max_examples=60, deadline=None)


@st.composite
def paired_samples(draw, min_size=2, max_size=40):
    n = draw(st.integers(min_size, max_size))
    base = draw(st.lists(times, min_size=n, max_size=n))
    cand = draw(st.lists(times, min_size=n, max_size=n))
    return base, cand, interleaved_order(n, draw(st.integers(0, 2**32)))


@FAST
@given(paired_samples(), st.integers(0, 2**31))
def test_random_positive_inputs_never_crash(sample, seed):
    base, cand, order = sample
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = analyze_pairs(base, cand, order=order, seed=seed, n_resamples=199)
    assert result.verdict in ("FASTER", "SLOWER", "SAME", "INCONCLUSIVE")
    assert result.interval.low <= result.speedup <= result.interval.high
    json.dumps(msgspec.to_builtins(result), allow_nan=False)


@FAST
@given(st.lists(times, min_size=2, max_size=40), st.integers(0, 2**31))
def test_identical_arms_are_never_faster(base, seed):
    result = analyze_pairs(base, base, order=interleaved_order(len(base), seed))
    assert result.verdict != FASTER and result.robust.verdict != FASTER


@FAST
@given(st.lists(st.tuples(times, st.floats(min_value=-0.0099, max_value=0.0099)), min_size=2, max_size=40))
def test_every_pair_within_the_min_effect_is_never_faster(rows):
    # A/A-like: each pair's ratio within +-0.99%, so no interval may claim "more than 1% faster".
    base = [b for b, _ in rows]
    cand = [b * (1.0 + e) for b, e in rows]
    result = analyze_pairs(base, cand, order=interleaved_order(len(rows), 0), n_resamples=199)
    assert result.verdict != FASTER and result.robust.verdict != FASTER
    decision = sequential_decision(log_ratios(base, cand), SequentialParams(max_pairs=40))
    assert decision.verdict != FASTER


@FAST
@given(paired_samples())
def test_swapping_arms_swaps_faster_and_slower(sample):
    base, cand, order = sample
    flipped = ["BA" if o == "AB" else "AB" for o in order]
    forward = analyze_pairs(base, cand, order=order, n_resamples=199).verdict
    backward = analyze_pairs(cand, base, order=flipped, n_resamples=199).verdict
    mirror = {FASTER: SLOWER, SLOWER: FASTER}
    assert backward == mirror.get(forward, forward)


@FAST
@given(st.lists(st.floats(min_value=-5, max_value=5), max_size=80), st.integers(5, 60))
def test_sequential_never_crashes_and_is_consistent(d, max_pairs):
    params = SequentialParams(max_pairs=max_pairs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decision = sequential_decision(d, params)
    assert decision.n_pairs == len(d)
    if len(d) < params.min_pairs:
        assert not decision.stop
    if len(d) >= max_pairs:
        assert decision.stop
    if decision.verdict == FASTER:
        assert decision.stop and decision.interval.low > 1.01


@FAST
@given(st.lists(st.one_of(times, st.just(0.0), st.just(-1.0), st.just(float("nan"))), max_size=6))
def test_bad_inputs_raise_stats_input_error_and_good_ones_do_not(values):
    def run():
        return analyze_pairs(values, values[::-1], order=interleaved_order(len(values), 1))

    if len(values) < 2 or not all(v > 0 for v in values):  # NaN > 0 is False too
        with pytest.raises(StatsInputError):
            run()
    else:
        assert run().n_pairs == len(values)

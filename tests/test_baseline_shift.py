"""Drift and sabotage of the baseline (issue 12, item 4): a campaign whose baseline ran slower than
the baseline-variance stage of `pw start`, beyond noise, gives an inconclusive verdict."""

from __future__ import annotations

import pytest

from pw.rules.verdict import reach_verdict
from pw.stats.baseline_shift import baseline_shift, describe

REFERENCE = [0.401, 0.398, 0.404, 0.399, 0.402]


def test_a_baseline_slowed_beyond_noise_is_detected_and_said():
    shift = baseline_shift(REFERENCE, [x * 1.4 for x in (0.40, 0.41, 0.39, 0.405, 0.398)])
    assert shift is not None and shift.slower and shift.ratio == pytest.approx(1.4, rel=0.03)
    assert shift.p_value < 0.01
    assert "1.4x slower" in describe(shift) and "Mann-Whitney" in describe(shift)


@pytest.mark.parametrize("campaign", [
    [0.41, 0.42, 0.415, 0.412, 0.418],  # 4% slower every time: significant, but ordinary load
    [0.40, 0.62, 0.39, 0.405, 0.60],  # two slow runs: not a shift of the whole arm
    REFERENCE,
])
def test_ordinary_noise_is_not_a_shift(campaign):
    shift = baseline_shift(REFERENCE, campaign)
    assert shift is not None and not shift.slower


def test_too_few_samples_say_nothing():
    assert baseline_shift(REFERENCE, [0.5]) is None
    assert baseline_shift([], REFERENCE) is None


def test_a_shift_makes_a_faster_candidate_inconclusive_but_not_a_rejected_one():
    analysis = {"speedup": 1.5, "n_pairs": 5, "verdict": "FASTER",
                "interval": {"low": 1.4, "high": 1.6, "confidence": 0.95}}
    v = reach_verdict([], analysis, refused_edits=[], build_ok=True, oracle_passed=True, exploratory=False,
                      doubts=["the baseline ran 1.5x slower"])
    assert v.status == "inconclusive" and v.reasons == ["baseline-shift: the baseline ran 1.5x slower"]
    v = reach_verdict([], analysis, refused_edits=[], build_ok=True, oracle_passed=False, exploratory=False,
                      doubts=["the baseline ran 1.5x slower"])
    assert v.status == "rejected"


SLOWDOWN = 2.5

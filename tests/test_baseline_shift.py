"""Drift and sabotage of the baseline (issue 12, item 4): a campaign whose baseline ran slower than
the baseline-variance stage of `pw start`, beyond noise, gives an inconclusive verdict."""

from __future__ import annotations

import msgspec
import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.rules.judge import judge_events
from pw.rules.verdict import reach_verdict
from pw.stats.baseline_shift import baseline_shift, describe
from tests.conftest import ledger_events

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


@pytest.mark.slow
def test_a_sabotaged_baseline_in_a_real_campaign_gives_inconclusive(matmul_interchange):
    """The verified interchange run, its campaign's baseline samples made 1.6x slower (what a process
    left behind that stops and continues the baseline would do): rules 3 say inconclusive, naming the
    shift; the rules it was judged by before (2) verified it."""
    events = ledger_events(matmul_interchange)
    cut = next(i for i, e in enumerate(events) if isinstance(e.data, ev.CandidateEvaluated) and e.data.id == "a")
    prefix = []
    for e in events[:cut]:
        d = e.data
        if isinstance(d, ev.TimingRecorded) and d.purpose == "screening" and "a" in d.targets:
            samples = dict(d.samples, baseline=[x * 1.6 for x in d.samples["baseline"]])
            e = msgspec.structs.replace(e, data=msgspec.structs.replace(d, samples=samples))
        prefix.append(e)
    evidence = EvidenceStore(matmul_interchange / "raw")
    judged = judge_events(prefix, "a", evidence)
    assert judged.verdict.status == "inconclusive", judged.verdict.reasons
    assert judged.verdict.reasons[0].startswith("baseline-shift: the baseline ran"), judged.verdict.reasons
    assert judged.verdict.speedup is not None and judged.verdict.speedup > 1.0  # the headline is not a verdict
    before = judge_events(prefix, "a", evidence, rules=2)
    assert before.verdict.status != "inconclusive"

"""Drift and sabotage of the baseline (issue 12, item 4): a campaign whose baseline ran slower than
the baseline-variance stage of `pw start`, beyond noise, gives an inconclusive verdict."""

from __future__ import annotations

import msgspec
import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.app.judging import judge_recorded
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


SLOWDOWN = 2.5


def _campaign_with_slow_baseline(run, recheck: str | None):
    """The verified interchange run up to its judgement, its campaign's baseline samples made 2.5x
    slower (far enough that the `pw start` timing of a loaded machine, 14% CV, never overlaps them);
    then, if `recheck` is given, the baseline timed alone after the campaign (any real recheck of
    that run is dropped): "fast", its `pw start` timing again; "slow", as slow as in the campaign
    (its slowed samples, as many as `pw start` took)."""
    events = ledger_events(run)
    cut = next(i for i, e in enumerate(events) if isinstance(e.data, ev.CandidateEvaluated) and e.data.id == "a")
    start_timing = next(e.data for e in events if isinstance(e.data, ev.TimingRecorded)
                        and e.data.purpose == "baseline-variance")
    prefix, seen_campaign = [], False
    for e in events[:cut]:
        d = e.data
        if isinstance(d, ev.TimingRecorded) and d.purpose == "baseline-variance" and seen_campaign:
            continue  # a recheck the real run made
        if isinstance(d, ev.TimingRecorded) and d.purpose == "screening" and "a" in d.targets:
            seen_campaign = True
            samples = dict(d.samples, baseline=[x * SLOWDOWN for x in d.samples["baseline"]])
            e = msgspec.structs.replace(e, data=msgspec.structs.replace(d, samples=samples))
            prefix.append(e)
            if recheck is not None:
                n = len(start_timing.samples["baseline"])
                again = dict(start_timing.samples, baseline=list(start_timing.samples["baseline"]) if recheck == "fast"
                             else sorted(samples["baseline"])[len(samples["baseline"]) // 2 - n // 2:][:n])
                prefix.append(msgspec.structs.replace(e, data=msgspec.structs.replace(start_timing, samples=again)))
            continue
        prefix.append(e)
    return prefix


@pytest.mark.slow
def test_a_sabotaged_baseline_in_a_real_campaign_gives_inconclusive(matmul_interchange):
    """The verified interchange run, its campaign's baseline samples made 2.5x slower (what a process
    left behind that stops and continues the baseline would do), and the baseline timed alone after
    the campaign as fast as at pw start: rules 3 say inconclusive, naming the shift; the rules it was
    judged by before (2) verified it."""
    evidence = EvidenceStore(matmul_interchange / "raw")
    for recheck in (None, "fast"):
        prefix = _campaign_with_slow_baseline(matmul_interchange, recheck)
        judged = judge_recorded(prefix, "a", evidence)
        assert judged.verdict.status == "inconclusive", judged.verdict.reasons
        assert judged.verdict.reasons[0].startswith("baseline-shift: the baseline ran"), judged.verdict.reasons
        assert judged.verdict.speedup is not None and judged.verdict.speedup > 1.0
        before = judge_recorded(prefix, "a", evidence, rules=2)
        assert before.verdict.status != "inconclusive"


@pytest.mark.slow
def test_a_machine_that_got_slower_for_both_arms_is_not_a_shift(matmul_interchange):
    """Same campaign, but the baseline timed alone right after it is as slow as in the campaign (the
    machine got busier since pw start, for both arms alike): the paired comparison stands."""
    prefix = _campaign_with_slow_baseline(matmul_interchange, "slow")
    judged = judge_recorded(prefix, "a", EvidenceStore(matmul_interchange / "raw"))
    assert not any(r.startswith("baseline-shift:") for r in judged.verdict.reasons), judged.verdict.reasons


def test_evaluate_times_the_baseline_alone_again_when_its_campaign_ran_slower(tiny_budget_run, tmp_path,
                                                                               monkeypatch):
    """The shell's half of the rule: when the judge's test says the campaign's baseline ran slower than
    when last timed alone, `pw evaluate` records a new baseline-variance timing right after the
    campaign (the baseline alone, now), which the judge then compares with."""
    import pw.rules.judge
    from tests.conftest import SAME_SPEED_TINY_C, copy_run, pw_main

    calls = []

    def always_shifted(reference, timing):
        calls.append((reference.purpose, timing.purpose if timing else None))
        return "the baseline ran 1.9x slower (forced by the test)"

    monkeypatch.setattr(pw.rules.judge, "baseline_shift_reason", always_shifted)
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "s:baseline:same speed").code == 0
    (run / "candidates" / "s" / "src" / "tiny.c").write_text(SAME_SPEED_TINY_C)  # another image: it is timed
    pw_main("evaluate", run, "s", "--json")
    events = [e.data for e in ledger_events(run)]
    campaign = next(i for i, d in enumerate(events) if isinstance(d, ev.TimingRecorded) and "s" in d.targets)
    after = [d for d in events[campaign + 1:] if isinstance(d, ev.TimingRecorded)]
    assert len(after) == 1 and after[0].purpose == "baseline-variance" and after[0].targets == ["baseline"]
    start = next(d for d in events if isinstance(d, ev.TimingRecorded) and d.purpose == "baseline-variance")
    assert len(after[0].samples["baseline"]) == len(start.samples["baseline"])
    assert ("baseline-variance", "screening") in calls

"""How many samples a reprofile takes (issue 16): the pure rule (pw.rules.resolution), merging the
profiles of several runs (ledger.profile.merge_profiles), and what the mechanism gate says under
rules 6 when a real saving stays inside its band."""

from __future__ import annotations

import math

import msgspec
import pytest

from ledger.codec import decode_payload
from ledger.profile import Operation, Profile, encode_profile, merge_profiles
from projections.profile_diff import diff_profiles
from pw.rules import resolution as rz
from pw.rules.gates_reprofiled import HotspotFacts, ResolutionFacts, evaluate_gates
from tests.test_gates import analysis, good_inputs

BUDGET = rz.Budget(max_runs=16, max_time_s=180.0)
RULE_1 = "share-band/1"


def _five_percent(samples: float) -> rz.Look:
    """A 5% saving wholly in an 85% hotspot: 85% -> 1 - 1.05 x 15% = 84.25% of the profile."""
    return rz.Look(runs_before=1, runs_after=1, samples_before=samples, samples_after=samples,
                   share_before=0.85, share_after=1 - 1.05 * 0.15)


def test_a_five_percent_saving_is_inside_the_band_of_one_profiled_run_and_the_rule_says_how_many_resolve_it():
    look = _five_percent(350)
    band = rz.share_band(look.share_before, look.share_after, 1.05, 350, 350)
    assert band > 0.05  # the whole expected shrink is inside the band: the xfail that issue 16 left
    need = rz.required_samples(look.share_before, look.share_after, 1.05)
    # 3 sigma <= 0.025: (3 / 0.025)^2 x (1.05^2 x 0.85 x 0.15 + 0.8425 x 0.1575) = 3960.6...
    assert need == math.ceil((3 / 0.025) ** 2 * (1.05**2 * 0.85 * 0.15 + 0.8425 * 0.1575))
    assert rz.share_band(0.85, 0.8425, 1.05, need, need) <= rz.target_band(1.05) + 1e-12
    assert rz.share_band(0.85, 0.8425, 1.05, need - 40, need - 40) > rz.target_band(1.05)
    assert rz.decide(look, 1.05, BUDGET) in ("before", "after")
    assert rz.decide(_five_percent(need), 1.05, BUDGET) == "resolved"
    # a larger saving needs fewer: about (S - 1)^-2
    assert rz.required_samples(0.85, 1 - 1.10 * 0.15, 1.10) < need / 3


def test_a_large_saving_is_resolved_by_the_first_profiled_run():
    """The interchange (~2x on an 85% hotspot) stops at one run per side, as before."""
    look = rz.Look(runs_before=1, runs_after=1, samples_before=350, samples_after=180, share_before=0.85,
                   share_after=0.70)
    assert rz.decide(look, 2.0, BUDGET) == "resolved"
    assert rz.required_samples(0.85, 0.70, 2.0) < 100


@pytest.mark.parametrize("speedup", [None, 1.0, 0.97, float("nan")])
def test_no_saving_no_resolution(speedup):
    assert rz.target_band(speedup) is None and rz.required_samples(0.85, 0.85, speedup) is None
    assert rz.decide(_five_percent(10), speedup, BUDGET) == "resolved"


def test_the_next_run_goes_where_it_shrinks_the_variance_most_and_the_budget_stops_it():
    # the candidate side has fewer samples: its next run buys more
    look = msgspec.structs.replace(_five_percent(700), samples_after=350)
    assert rz.decide(look, 1.05, BUDGET) == "after"
    assert rz.decide(msgspec.structs.replace(look, samples_before=350, samples_after=700), 1.05, BUDGET) == "before"
    capped = msgspec.structs.replace(look, runs_after=16)
    # Rule 1 (no futility stop): that side's budget is spent, so the other one, until both are.
    assert rz.decide(capped, 1.05, BUDGET, rule=RULE_1) == "before"
    assert rz.decide(msgspec.structs.replace(capped, runs_before=16), 1.05, BUDGET, rule=RULE_1) == "budget"
    # Rule 2: 350 samples over 16 candidate runs can never resolve it, whatever the reference adds.
    assert rz.decide(capped, 1.05, BUDGET) == "futile"
    assert rz.decide(msgspec.structs.replace(look, elapsed_s=180.0), 1.05, BUDGET) == "budget"


def test_the_rule_never_reads_the_shrink_only_the_precision():
    """Same sample counts and variance, a hotspot that shrank or did not: same decision (growing the
    profile cannot be steered by what it seems to show). The binomial variance is symmetric, so a
    share of 0.1575 has the variance of 0.8425."""
    shrank = _five_percent(500)
    flat = msgspec.structs.replace(shrank, share_after=0.1575)
    assert rz.decide(shrank, 1.05, BUDGET) == rz.decide(flat, 1.05, BUDGET)


def _looks(*runs: tuple[int, int], per_run: float = 400.0) -> list[rz.Look]:
    return [rz.Look(runs_before=b, runs_after=a, samples_before=b * per_run, samples_after=a * per_run,
                    share_before=0.85, share_after=0.8425) for b, a in runs]


def test_replay_accepts_what_the_rule_did_and_names_what_it_did_not():
    looks = [_looks((1, 1))[0]]
    decisions = []
    while True:  # run the rule forward, as pw.app.resolve does
        d = rz.decide(looks[-1], 1.05, BUDGET)
        decisions.append(d)
        if d in ("resolved", "budget"):
            break
        b, a = looks[-1].runs_before + (d == "before"), looks[-1].runs_after + (d == "after")
        looks.append(_looks((b, a))[0])
    assert decisions[-1] == "resolved" and 2 < len(looks) <= 2 * BUDGET.max_runs
    assert rz.replay_resolution(looks, decisions, "resolved", 1.05, BUDGET) is None
    # stopped early, claiming it was resolved
    problem = rz.replay_resolution(looks[:2], [decisions[0], "resolved"], "resolved", 1.05, BUDGET)
    assert problem is not None and "look 2" in problem and "rule gives" in problem
    # a run added to the other side than the one the rule asked for
    wrong = [looks[0], _looks((looks[0].runs_before + 1, looks[0].runs_after + 1))[0]]
    assert "does not add one run" in rz.replay_resolution(wrong, decisions[:2], "x", 1.05, BUDGET)
    assert "recorded stop 'budget'" in rz.replay_resolution(looks, decisions, "budget", 1.05, BUDGET)


# --- merging the profiles of several runs ---------------------------------------------------------


def _run(hot: float, rest: float, lo: int, hi: int) -> Profile:
    def op(id_: str, t: float, **kw) -> Operation:
        m = {"cpu_time_s": t, "samples": round(t * 1000)}
        return Operation(id=id_, name=id_.split("@")[0], kind="function", module="m", file="m.c",
                         self_metrics=m, inclusive_metrics=m, **kw)

    ops = [op("matmul@m.c", hot, line_start=lo, line_end=hi), op("fill@m.c", rest)]
    totals = {"cpu_time_s": hot + rest, "samples": round(hot * 1000) + round(rest * 1000)}
    return Profile(tool="perf", tool_version="6.1", target="baseline", granularity=["process", "function"],
                   metrics=["cpu_time_s", "samples"], totals=totals, operations=ops)


def test_merged_profiles_sum_their_samples_and_give_the_same_bytes_every_time():
    a, b = _run(0.30, 0.05, 14, 20), _run(0.34, 0.06, 12, 18)
    merged = merge_profiles([a, b])
    hot = merged.operation("matmul@m.c")
    assert hot.self_metrics == {"cpu_time_s": pytest.approx(0.64), "samples": 640}
    assert merged.totals["samples"] == 300 + 50 + 340 + 60
    assert (hot.line_start, hot.line_end) == (12, 20)
    assert encode_profile(merge_profiles([a, b])) == encode_profile(merged)
    # the gate's sample totals are the summed ones
    d = diff_profiles(merged, merge_profiles([a, a]), hotspot="matmul@m.c")
    look = rz.look_of(d, 2, 2)
    assert (look.samples_before, look.samples_after) == (750, 700)
    assert look.share_before == pytest.approx(640 / 750, rel=1e-3)


def test_only_sampled_profiles_of_one_target_merge():
    a = _run(0.3, 0.05, 1, 2)
    exact = msgspec.structs.replace(a, metrics=["instructions"], totals={"instructions": 1e9})
    with pytest.raises(ValueError, match="not sampled"):
        merge_profiles([a, exact])
    with pytest.raises(ValueError, match="cannot merge"):
        merge_profiles([a, msgspec.structs.replace(a, target="a")])
    with pytest.raises(ValueError):
        merge_profiles([])


def test_a_v1_profile_normalized_reads_as_one_capture():
    v1 = {"adapter": "perf", "target": "baseline", "profile_sha256": "ab" * 32, "primary_metric": "cpu_time_s",
          "total": 0.66}
    data = decode_payload("ProfileNormalized", 1, v1)
    assert data.parts == [] and data.profile_sha256 == "ab" * 32


# --- the mechanism gate under rules 6 --------------------------------------------------------------


def _sampled(samples_per_run: int, runs: int) -> tuple:
    """Baseline 85% hotspot; candidate with exactly a 5% whole-process saving, all in the hotspot."""
    def prof(hot: float, rest: float) -> Profile:
        n = samples_per_run * runs
        h = round(n * hot / (hot + rest))

        def op(id_: str, t: float, s: int) -> Operation:
            m = {"cpu_time_s": t, "samples": s}
            return Operation(id=id_, name=id_.split("@")[0], kind="function", module="demo", file="demo.c",
                             self_metrics=m, inclusive_metrics=m)

        return Profile(tool="perf", tool_version="6.1", target="demo", granularity=["function"],
                       metrics=["cpu_time_s", "samples"], totals={"cpu_time_s": hot + rest, "samples": n},
                       operations=[op("matmul@demo.c", hot, h), op("fill@demo.c", rest, n - h)])

    return prof(0.85, 0.15), prof(1 / 1.05 - 0.15, 0.15)  # the candidate runs 1/1.05 of the baseline's time


def _gate(samples_per_run: int, runs: int, rules: int = 6, resolution: ResolutionFacts | None = None):
    before, after = _sampled(samples_per_run, runs)
    inputs = good_inputs(analysis=analysis(1.05), profile_diff=diff_profiles(before, after, hotspot="matmul@demo.c"),
                         hotspot=HotspotFacts(operation="matmul@demo.c", metric="cpu_time_s", share=0.85,
                                              amdahl_ceiling=1 / 0.15),
                         resolution=resolution)
    return {g.name: g for g in evaluate_gates(inputs, rules=rules)}["mechanism"]


def test_rules_five_say_how_many_samples_a_real_small_saving_needs_and_resolve_it_with_them():
    one_run = _gate(350, 1)
    assert not one_run.passed and "noise band" in one_run.detail
    assert "samples per profile (have 350 and 350)" in one_run.detail, one_run.detail
    older = _gate(350, 1, rules=4)
    assert not older.passed and "samples per profile" not in older.detail  # v4 says what it said
    spent = _gate(350, 1, resolution=ResolutionFacts(stop="budget", runs_before=1, runs_after=1, max_runs=1,
                                                     max_time_s=180.0, required_samples=4000))
    assert "the reprofile's budget (1 profiled runs per profile, 180 s) stopped at 1 + 1 runs" in spent.detail
    resolved = _gate(400, 12)
    assert resolved.passed, resolved.detail


def test_rules_five_tell_a_resolved_profile_whose_hotspot_did_not_shrink_enough():
    """Enough samples to resolve the 5% saving, but the hotspot gave only ~0.015 of it (the rest
    came from elsewhere): the band is not the reason, the shrink is, and the gate says so."""
    before, _ = _sampled(400, 12)
    after, _ = _sampled(400, 12)
    hot_after = (0.85 * 1.05 - 0.015) / 1.05  # in the baseline's time units
    n = before.totals["samples"]

    def scaled(p, hot: float, rest: float):
        h = round(n * hot / (hot + rest))
        ops = [msgspec.structs.replace(o, self_metrics={"cpu_time_s": t, "samples": k},
                                       inclusive_metrics={"cpu_time_s": t, "samples": k})
               for o, t, k in zip(p.operations, (hot, rest), (h, n - h))]
        return msgspec.structs.replace(p, operations=ops, totals={"cpu_time_s": hot + rest, "samples": n})

    after = scaled(after, hot_after, 1 / 1.05 - hot_after)
    inputs = good_inputs(analysis=analysis(1.05), profile_diff=diff_profiles(before, after, hotspot="matmul@demo.c"),
                         hotspot=HotspotFacts(operation="matmul@demo.c", metric="cpu_time_s", share=0.85,
                                              amdahl_ceiling=1 / 0.15))
    g = {g.name: g for g in evaluate_gates(inputs, rules=6)}["mechanism"]
    assert not g.passed and "samples per profile" not in g.detail, g.detail
    assert "resolve a 5.0% saving" in g.detail and "too small to be the saving" in g.detail, g.detail


def test_the_limit_a_small_uniform_saving_passes_as_the_hotspots_once_resolved():
    """Known limit (README, "The reprofile takes as many samples as the saving needs"): every
    operation 5% faster leaves the shares as they were; the hotspot's scaled shrink is 85% of the
    saving, and the rest's fall (0.0075 of the run time) is inside its band at ~5000 samples. One
    run's band hid it; a resolved profile does not. If the gate learns to tell them apart, this
    test should change with it."""
    before, _ = _sampled(400, 12)
    inputs = good_inputs(analysis=analysis(1.05), profile_diff=diff_profiles(before, before, hotspot="matmul@demo.c"),
                         hotspot=HotspotFacts(operation="matmul@demo.c", metric="cpu_time_s", share=0.85,
                                              amdahl_ceiling=1 / 0.15))
    g = {g.name: g for g in evaluate_gates(inputs, rules=6)}["mechanism"]
    assert g.passed and "explains 8" in g.detail, g.detail
    # the rest's fall needs about this many samples per profile before "fell alike" can fire
    assert rz.required_samples(0.85, 0.85, 1 + 0.05 * 0.15) > 40_000


@pytest.mark.parametrize("spread, floor", [(None, 1), (0.03, 1), (0.05, 1), (0.07, 2), (0.10, 4), (0.11, 5),
                                           (0.14, 5), (0.30, 5), (float("nan"), 1)])
def test_rule_three_profiles_a_noisy_campaign_several_runs_per_side(spread, floor):
    """The floor makes the mean of a side's profiled runs vary about as one run of a 5% host does;
    at most FLOOR_MAX runs and half the budget."""
    assert rz.min_runs_for(spread, 16) == floor
    assert rz.min_runs_for(spread, 4) == min(floor, 2)


def test_the_gate_says_the_reprofile_stopped_growing_because_the_budget_could_not_resolve_it():
    gate = _gate(350, 1, resolution=ResolutionFacts(stop="futile", runs_before=1, runs_after=1, max_runs=16,
                                                    max_time_s=180.0, required_samples=4000))
    assert not gate.passed and "needs about" in gate.detail, gate.detail
    assert "could not give that many, so the reprofile stopped growing at 1 + 1 runs" in gate.detail, gate.detail


def test_rules_five_ask_for_samples_only_for_a_saving_the_campaign_decided():
    before, after = _sampled(350, 1)
    undecided = dict(analysis(1.05), verdict="INCONCLUSIVE")
    inputs = good_inputs(analysis=undecided, profile_diff=diff_profiles(before, after, hotspot="matmul@demo.c"),
                         hotspot=HotspotFacts(operation="matmul@demo.c", metric="cpu_time_s", share=0.85,
                                              amdahl_ceiling=1 / 0.15))
    g = {g.name: g for g in evaluate_gates(inputs, rules=6)}["mechanism"]
    assert not g.passed and "noise band" in g.detail and "samples per profile" not in g.detail, g.detail

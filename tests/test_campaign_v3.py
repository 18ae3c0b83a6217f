"""pw.campaign/3: the looks of a profiled campaign decide the speedup on the pairs the load admits,
and the mechanism on the same pairs; `pw audit` replays every look from the samples."""

from __future__ import annotations

import numpy as np
import pytest

from ledger import events as ev
from pw.rules import stopping
from pw.rules.contention import MAX_LOAD_IMBALANCE, admitted_pairs, run_loads
from pw.stats.adaptive import CampaignParams, run_looks

LABELS = ("baseline", None, "c")


def _samples(rng, n, *, speedup=2.0, hot_share=0.85, carried=1.0, noise=0.03, burst=()):
    """Per-pair series of a 1 s program; ``carried``: the part of the saving in the hotspot's runs;
    ``burst``: pairs whose baseline run waited 40% of its wall time for a CPU (and ran that much longer)."""
    base = 1.0 * np.exp(rng.normal(0, noise, n))
    cand = base / speedup * np.exp(rng.normal(0, noise, n))
    saving = base - cand
    hot_b = hot_share * base
    hot_c = hot_b - carried * saving + rng.normal(0, noise / 2, n)
    wait_b = np.zeros(n)
    for i in burst:
        base[i] *= 1.4
        wait_b[i] = 0.4 * base[i]
    return {"baseline": list(base), "c": list(cand), "baseline:hot_s": list(hot_b), "c:hot_s": list(hot_c),
            "baseline:wall_s": list(base), "c:wall_s": list(cand), "baseline:run_queue_s": list(wait_b),
            "c:run_queue_s": [0.0] * n, "baseline:others_cpu_s": [0.0] * n, "c:others_cpu_s": [0.0] * n}


def _look(samples, n=None, **kw):
    params = CampaignParams(**kw)
    cut = {k: v[:n] for k, v in samples.items()} if n else samples
    return stopping.look_of_samples(cut, LABELS, params, 0.0, cpus=2, max_imbalance=MAX_LOAD_IMBALANCE,
                                    fraction=0.5)


def test_a_clear_speedup_whose_hotspot_carries_it_stops_at_the_minimum():
    look = _look(_samples(np.random.default_rng(1), 5), n=5)
    assert look.stop and look.reason == "faster" and look.kind == "decided" and look.mechanism == "carried"


def test_a_saving_made_elsewhere_is_decided_as_not_carried():
    look = _look(_samples(np.random.default_rng(2), 8, carried=0.0), n=8)
    assert look.stop and look.reason == "faster" and look.mechanism == "not-carried"
    hi = look.fraction[2]
    assert hi < 0.5, look.fraction


def test_a_budget_spent_with_the_mechanism_undecided_says_so_and_how_many_more_pairs():
    look = _look(_samples(np.random.default_rng(3), 6, carried=0.5, noise=0.08), n=6, max_pairs=6)
    assert look.stop and look.reason == "faster" and look.kind == "budget" and look.mechanism == "undecided"
    assert look.verdict == "FASTER" and look.more_pairs is not None and look.more_pairs > 0


def test_a_pair_whose_arms_ran_under_unbalanced_load_is_set_aside():
    s = _samples(np.random.default_rng(4), 8, speedup=1.0, burst=(1, 2, 3))
    loads = run_loads(s, "baseline", 2)
    assert loads is not None and max(loads) == pytest.approx(0.4)
    admitted = admitted_pairs(s, ["baseline", "c"], 2, MAX_LOAD_IMBALANCE)
    assert admitted == [True, False, False, False, True, True, True, True]
    look = _look(s, n=8, min_pairs=5)
    assert look.admitted == 5 and look.n_pairs == 8
    # steady load on both arms is balanced: nothing set aside
    steady = dict(s, **{"c:run_queue_s": [0.4 * c if i in (1, 2, 3) else 0.0 for i, c in enumerate(s["c:wall_s"])]})
    assert all(admitted_pairs(steady, ["baseline", "c"], 2, MAX_LOAD_IMBALANCE))


def test_a_burst_on_one_arm_cannot_decide_a_no_op_faster_once_it_is_set_aside():
    rng = np.random.default_rng(5)
    s = _samples(rng, 16, speedup=1.0, burst=tuple(range(8)), noise=0.005)
    s["baseline"] = [b / 1.4 * 1.1 if i < 8 else b for i, b in enumerate(s["baseline"])]  # bursts of +10%
    s["baseline:wall_s"] = list(s["baseline"])
    unadmitted = stopping.look_of_samples(s, LABELS, CampaignParams(max_pairs=16), 0.0, cpus=2, max_imbalance=None,
                                          fraction=0.5)
    admitted = _look(s, max_pairs=16)
    # The bursts alone put the no-op's interval above 1; set aside, the admitted pairs say no effect.
    assert unadmitted.low > 1.0 and unadmitted.reason != "same", unadmitted
    assert admitted.reason == "same" and admitted.admitted == 8 and admitted.low < 1.0 < admitted.high, admitted


def _recorded(samples, params):
    """What timing_blocks.run_adaptive records: the controller run on the samples, pair by pair."""
    n_all = len(samples["baseline"])

    def measure(first, count):
        return {k: v[first:first + count] for k, v in samples.items()} if first + count <= n_all else None

    def decide(series, elapsed):
        return stopping.look_of_samples(series, LABELS, params, elapsed, cpus=2, max_imbalance=MAX_LOAD_IMBALANCE,
                                        fraction=0.5)

    series, looks, aborted = run_looks(measure, params, decide, length_key="baseline")
    assert not aborted
    record = stopping.record_of(params, looks, looks[-1].kind, max_load_imbalance=MAX_LOAD_IMBALANCE,
                                mechanism_fraction=0.5, cpus=2)
    timing = ev.TimingRecorded(purpose="screening", targets=["baseline", "c"], metric="wall_time_s", unit="s",
                               samples={k: v for k, v in series.items()}, order=["AB"] * len(series["baseline"]),
                               seed=1, exploratory=False, conditions=ev.TimingConditions(host="h", argv=["x"]),
                               campaign=record)
    return timing


def test_every_recorded_look_replays_and_a_tampered_sample_is_named():
    import msgspec

    s = _samples(np.random.default_rng(6), 40, carried=0.7, noise=0.06, burst=(2,))
    timing = _recorded(s, CampaignParams(max_pairs=40))
    assert stopping.replay_v3(timing, timing.campaign, 0) is None
    hot = list(timing.samples["c:hot_s"])
    hot[0] = hot[0] + 5.0  # the hotspot's part of one candidate run made to look far larger
    forged = msgspec.structs.replace(timing, samples={**timing.samples, "c:hot_s": hot})
    problem = stopping.replay_v3(forged, forged.campaign, 0)
    assert problem is not None and "look" in problem
    assert stopping.stop_divergence(1, forged, {1: forged}) is not None

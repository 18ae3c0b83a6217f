"""pw.campaign/4: each run judged on the time it could run (its wall time less its measured wait
for a CPU), every pair admitted. The design rests on tests/data/load-aa/pairs.json, 240 A/A pairs of
matmul-c recorded under benchmarks/loadgen.py at 1.5 of 2 CPUs (benchmarks/load_balance.py --record):
the tests judge those recorded runs, so they cannot skip on a quiet or a noisy host."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pw.rules import stopping
from pw.rules.contention import MAX_LOAD_IMBALANCE, admitted_pairs, running_share, without_wait
from pw.stats.adaptive import CAMPAIGN_RULE, WAIT_RULES, CampaignParams

AA = json.loads((Path(__file__).parent / "data" / "load-aa" / "pairs.json").read_text())
LABELS = ("baseline", None, "same")


def _run(wall, wait, steal=0.0, hot=None):
    return {"x": [wall], "x:wall_s": [wall], "x:hot_s": [hot if hot is not None else 0.8 * wall],
            "x:reach_s": [0.8 * wall], "x:run_queue_s": [wait], "x:steal_s": [steal], "x:user_s": [0.5]}


def test_a_runs_own_wait_comes_out_of_its_times():
    s = _run(1.0, 0.4, steal=0.2)  # 0.4 s in the run queue; the host's steal is not the run's own
    assert running_share(s, "x", 2) == pytest.approx([0.6])
    out = without_wait(s, ["x"], 2, "wall_time_s")
    assert out["x"] == pytest.approx([0.6]) and out["x:wall_s"] == pytest.approx([0.6])
    assert out["x:hot_s"] == pytest.approx([0.48]) and out["x:reach_s"] == pytest.approx([0.48])
    assert out["x:user_s"] == [0.5]  # CPU time never included the wait


def test_a_short_run_keeps_a_time_above_zero():
    # a 3 ms run whose recorded wait is not shorter than itself (the case that read 0 s and a log
    # ratio of -inf when the host's steal, counted in 10 ms ticks, was in the wait)
    s = _run(0.003, 0.003, steal=0.01)
    assert running_share(s, "x", 2) == [1.0]
    assert without_wait(s, ["x"], 2, "wall_time_s")["x"] == [0.003]
    assert running_share(_run(0.003, 0.001), "x", 2) == pytest.approx([2 / 3])


def test_a_region_the_program_times_itself_is_taken_as_it_is():
    out = without_wait(_run(1.0, 0.5), ["x"], 2, "roi_time_s")
    assert out["x"] == [1.0] and out["x:wall_s"] == pytest.approx([0.5])


def test_runs_that_did_not_record_their_wait_are_left_as_recorded():
    s = {"x": [1.0], "x:wall_s": [1.0]}
    assert without_wait(s, ["x"], 2, "wall_time_s") == s


def test_new_campaigns_take_the_wait_out_and_older_rules_read_their_samples_as_recorded():
    assert CAMPAIGN_RULE in WAIT_RULES and "pw.campaign/4" in WAIT_RULES
    s = _run(1.0, 0.5)
    labels = ("x", None, "x")
    assert stopping.judged_samples(s, "pw.campaign/3", labels, 2, "wall_time_s") is s
    assert stopping.judged_samples(s, "pw.campaign/4", labels, 2, "wall_time_s")["x"] == pytest.approx([0.5])


def _log_ratios(samples, mask=None):
    d = np.log(np.asarray(samples["baseline"]) / np.asarray(samples["same"]))
    return d if mask is None else d[np.asarray(mask)]


def test_under_load_the_wait_explains_most_of_an_aa_pairs_spread_and_admission_adds_nothing():
    s, cpus = AA["samples"], AA["cpus"]
    raw = _log_ratios(s)
    judged = stopping.judged_samples(s, "pw.campaign/4", LABELS, cpus, "wall_time_s")
    out = _log_ratios(judged)
    assert len(out) == len(raw) == AA["pairs"] >= 200
    # the wait taken out: the spread at least a third narrower, every pair kept
    assert np.std(out, ddof=1) < 0.67 * np.std(raw, ddof=1), (np.std(out, ddof=1), np.std(raw, ddof=1))
    # pw.campaign/3's admission by balance keeps fewer pairs, and a pair set aside still cost its
    # runs: per pair run, its spread (sd / sqrt(share kept)) is wider than all of them judged
    kept = admitted_pairs(s, ["baseline", "same"], cpus, MAX_LOAD_IMBALANCE)
    assert sum(kept) < 0.9 * len(kept)
    per_run = np.std(_log_ratios(s, kept), ddof=1) / np.sqrt(sum(kept) / len(kept))
    assert per_run > np.std(out, ddof=1), (per_run, np.std(out, ddof=1))
    # and admission after the wait is out buys nothing per pair run at any threshold
    for threshold in (0.30, 0.20, MAX_LOAD_IMBALANCE, 0.10, 0.05):
        again = admitted_pairs(judged, ["baseline", "same"], cpus, threshold)
        after = np.std(_log_ratios(judged, again), ddof=1) / np.sqrt(sum(again) / len(again))
        assert after > np.std(out, ddof=1), (threshold, after, np.std(out, ddof=1))


def test_the_aa_stream_is_no_faster_in_campaigns_cut_from_it():
    s, cpus = AA["samples"], AA["cpus"]
    params = CampaignParams(max_pairs=40)
    decided_faster = 0
    for start in range(0, len(s["baseline"]) - 40 + 1, 20):
        cut = {k: v[start:start + 40] for k, v in s.items()}
        judged = stopping.judged_samples(cut, "pw.campaign/4", LABELS, cpus, "wall_time_s")
        look = stopping.look_of_samples(judged, LABELS, params, 0.0, cpus=cpus, max_imbalance=None, fraction=0.5)
        decided_faster += look.reason == "faster" and look.mechanism == "carried"
    assert decided_faster == 0

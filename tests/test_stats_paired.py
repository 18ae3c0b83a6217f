"""Paired analysis: the numbers, the verdicts and the recorded inputs."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest
from scipy import stats

from pw.stats import (
    FASTER,
    INCONCLUSIVE,
    SAME,
    SLOWER,
    PairedAnalysis,
    StatsInputError,
    analyze_pairs,
    interleaved_order,
    reanalyze,
)

pytestmark = pytest.mark.filterwarnings("error")


def campaign(n: int, speedup: float, cv: float, seed: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    base = np.exp(rng.normal(0.0, cv, n))
    cand = np.exp(rng.normal(-np.log(speedup), cv, n))
    return base, cand, interleaved_order(n, seed)


def test_speedup_is_the_geometric_mean_of_per_pair_ratios():
    base, cand, order = campaign(12, 1.07, 0.03, seed=1)
    result = analyze_pairs(base, cand, order=order)
    assert result.n_pairs == 12
    assert result.speedup == pytest.approx(stats.gmean(base / cand), rel=1e-12)
    assert result.speedup > 1.0  # baseline / candidate: the candidate is the faster one


def test_t_interval_matches_scipy_one_sample_t():
    base, cand, order = campaign(9, 1.03, 0.02, seed=2)
    result = analyze_pairs(base, cand, order=order, confidence=0.9)
    ci = stats.ttest_1samp(np.log(base / cand), 0.0).confidence_interval(0.9)
    assert result.interval.low == pytest.approx(np.exp(ci.low), rel=1e-12)
    assert result.interval.high == pytest.approx(np.exp(ci.high), rel=1e-12)
    assert result.interval.confidence == 0.9


def test_wilcoxon_p_is_scipys():
    base, cand, order = campaign(15, 1.02, 0.02, seed=3)
    result = analyze_pairs(base, cand, order=order)
    assert result.wilcoxon_p == stats.wilcoxon(np.log(base) - np.log(cand)).pvalue


@pytest.mark.parametrize(
    ("speedup", "expected"),
    [(1.20, FASTER), (1 / 1.20, SLOWER), (1.0, SAME), (1.012, INCONCLUSIVE)],
)
def test_verdicts_on_clear_cases(speedup, expected):
    base, cand, order = campaign(40, speedup, 0.002 if expected != INCONCLUSIVE else 0.03, seed=4)
    assert analyze_pairs(base, cand, order=order).verdict == expected


def test_faster_needs_the_whole_interval_above_one_plus_min_effect():
    base, cand, order = campaign(30, 1.05, 0.01, seed=5)
    strict = analyze_pairs(base, cand, order=order, min_effect=0.05)
    assert 1.0 < strict.interval.low < 1.05 < strict.interval.high  # significant, not clearly by 5%
    assert strict.verdict == INCONCLUSIVE
    assert analyze_pairs(base, cand, order=order, min_effect=0.01).verdict == FASTER


def test_bootstrap_only_from_bootstrap_min_pairs_and_seeded():
    base, cand, order = campaign(99, 1.05, 0.02, seed=6)
    assert analyze_pairs(base, cand, order=order).bootstrap is None
    base, cand, order = campaign(100, 1.05, 0.02, seed=6)
    a = analyze_pairs(base, cand, order=order, seed=1, n_resamples=999)
    b = analyze_pairs(base, cand, order=order, seed=2, n_resamples=999)
    assert a.bootstrap is not None and b.bootstrap is not None
    assert a.bootstrap.low < a.speedup < a.bootstrap.high
    assert a.bootstrap != b.bootstrap  # the seed matters, and is recorded
    assert a.params.seed == 1 and "seed 1" in a.bootstrap.method


def test_same_inputs_and_seed_give_identical_bytes():
    base, cand, order = campaign(120, 1.04, 0.03, seed=7)
    first = msgspec.json.encode(analyze_pairs(base, cand, order=order, seed=9, order_seed=7))
    second = msgspec.json.encode(
        analyze_pairs(list(base), list(cand), order=tuple(order), seed=9, order_seed=7)
    )
    assert first == second


def test_auditor_recomputes_bit_for_bit_from_the_recorded_json():
    base, cand, order = campaign(110, 1.04, 0.03, seed=8)
    recorded = msgspec.json.encode(analyze_pairs(base, cand, order=order, seed=5, order_seed=8))
    as_dict = json.loads(recorded)  # what an auditor reads back from the ledger
    assert msgspec.json.encode(reanalyze(as_dict)) == recorded
    assert msgspec.json.encode(reanalyze(msgspec.json.decode(recorded, type=PairedAnalysis))) == recorded


def test_result_is_plain_json_data_with_inputs_and_params():
    base, cand, order = campaign(6, 1.1, 0.02, seed=9)
    data = msgspec.to_builtins(analyze_pairs(base, cand, order=order, seed=3))
    text = json.dumps(data, allow_nan=False)  # no NaN or inf sneaks in
    assert json.loads(text)["inputs"]["baseline_s"] == [float(x) for x in base]
    assert list(data["inputs"]["order"]) == order
    assert data["params"]["min_effect"] == 0.01 and data["params"]["seed"] == 3


def test_inputs_are_copied_not_kept():
    base, cand, order = campaign(8, 1.1, 0.02, seed=10)
    result = analyze_pairs(base, cand, order=order)
    base[0] = 1e9
    assert result.inputs.baseline_s[0] != 1e9


def test_order_is_checked():
    base, cand, order = campaign(6, 1.1, 0.02, seed=11)
    with pytest.raises(StatsInputError, match="one entry per pair"):
        analyze_pairs(base, cand, order=order[:-1])
    with pytest.raises(StatsInputError, match='"AB" or "BA"'):
        analyze_pairs(base, cand, order=["AB", "BA", "AA", "AB", "BA", "AB"])
    with pytest.raises(StatsInputError, match="does not match"):
        analyze_pairs(base, cand, order=interleaved_order(6, 1), order_seed=2)
    with pytest.raises(StatsInputError, match="one string"):
        analyze_pairs(base[:2], cand[:2], order="ABBA")


def test_swapping_the_arms_mirrors_the_verdict():
    base, cand, order = campaign(20, 1.3, 0.02, seed=12)
    swapped_order = ["BA" if o == "AB" else "AB" for o in order]
    forward = analyze_pairs(base, cand, order=order)
    backward = analyze_pairs(cand, base, order=swapped_order)
    assert (forward.verdict, backward.verdict) == (FASTER, SLOWER)
    assert forward.speedup * backward.speedup == pytest.approx(1.0, rel=1e-12)

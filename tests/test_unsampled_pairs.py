"""A timed run whose profile carries no samples (py-spy never attached) is timed but says nothing of
where its time went: the campaign's mechanism decision leaves its pair out (pure, recorded series)."""

from __future__ import annotations

from pw.rules.stopping import mechanism_series, sampled_pairs


def _samples(cand_sampled: list[float] | None) -> dict[str, list[float]]:
    s = {"baseline": [1.0, 1.0, 1.0, 1.0], "a": [0.5, 0.5, 0.5, 0.5],
         "baseline:hot_s": [0.8, 0.8, 0.8, 0.8], "a:hot_s": [0.3, 0.0, 0.3, 0.0]}
    if cand_sampled is not None:
        s["a:sampled"] = cand_sampled
        s["baseline:sampled"] = [1.0] * 4
    return s


def test_pairs_with_an_unsampled_run_are_left_out_of_the_mechanism():
    series = mechanism_series(_samples([1.0, 0.0, 1.0, 0.0]), "baseline", None, "a", [True] * 4)
    assert series is not None
    assert series.part == (0.5, 0.5)  # the two sampled pairs; an empty profile is not "0 s in the hotspot"
    assert series.whole == (0.5, 0.5)


def test_a_campaign_recorded_before_the_series_counts_every_run_as_sampled():
    assert sampled_pairs(_samples(None), ["baseline", "a"], 4) == [True] * 4
    series = mechanism_series(_samples(None), "baseline", None, "a", [True, True, False, True])
    assert series is not None and series.part == (0.5, 0.8, 0.8)


def test_a_hybrid_arm_is_timed_not_profiled_so_nothing_is_left_out():
    s = {**_samples([0.0] * 4), "h": [0.6] * 4}
    series = mechanism_series(s, "baseline", "h", "a", [True] * 4)
    assert series is not None and len(series.part) == 4

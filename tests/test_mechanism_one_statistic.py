"""The mechanism gate decides the fraction with the campaign's own stopping statistic (gate rules 20).

Under rules 19 the campaign's look decided "carried" with the mechanism's mixture
(``pw.stats.adaptive.MECHANISM_PRIOR_SCALE``) and the gate recomputed the fraction with the speedup's
(``prior_scale`` 2.0): the recorded matmul-c `both` campaign (interchange + hoist, tests/data/one-kind)
stopped after 25 pairs with the hybrid carrying the saving, and the gate then read 69% [49.5%, 91%]:
undecided. One statistic makes the case impossible: what stopped the campaign is what the gate reads.
"""

from __future__ import annotations

import numpy as np

from pw.rules import gates
from pw.rules.gates import PairFacts
from pw.rules.rulesets import GATE_RULES, rule_set
from pw.stats.adaptive import MECHANISM_PRIOR_SCALE, CampaignParams, MechanismSeries, mechanism_state


def _pairs(seed: int, n: int = 25) -> PairFacts:
    rng = np.random.default_rng(seed)
    base = 0.55 * np.exp(rng.normal(0, 0.06, n))
    cand = 0.35 * np.exp(rng.normal(0, 0.06, n))
    hybrid = base - 0.69 * (base - cand) + rng.normal(0, 0.05, n)
    return PairFacts(reference="baseline", candidate="c", hybrid="c.hybrid", metric="wall", profiler="perf",
                     pairs_run=n, reference_s=base.tolist(), candidate_s=cand.tolist(), hybrid_s=hybrid.tolist(),
                     reference_wall_s=base.tolist(), candidate_wall_s=cand.tolist(),
                     hot_reference_s=(0.8 * base).tolist(), hot_candidate_s=(0.8 * cand).tolist(),
                     hybrid_status="timed")


def test_the_current_rules_decide_the_fraction_as_the_campaign_stopped_on_it():
    rs = rule_set(GATE_RULES)
    assert rs.mechanism_prior_scale == MECHANISM_PRIOR_SCALE
    for seed in range(40):
        p = _pairs(seed)
        series = MechanismSeries(part=tuple(b - h for b, h in zip(p.reference_s, p.hybrid_s)),
                                 whole=tuple(b - c for b, c in zip(p.reference_s, p.candidate_s)),
                                 scale=tuple(p.reference_s))
        state, looked = mechanism_state(series, CampaignParams(), 0.5)
        gated = gates.hybrid_fraction(p, rs.mechanism_prior_scale)
        assert (gated.low, gated.high) == (looked.low, looked.high)
        carried = gated.low is not None and gated.low > gates.MIN_CARRIED_FRACTION
        assert carried == (state == "carried"), (seed, state, gated)


def test_rules_19_read_the_speedups_mixture_and_could_disagree_with_the_campaign():
    differ = 0
    for seed in range(40):
        p = _pairs(seed)
        old, new = gates.hybrid_fraction(p, rule_set(19).mechanism_prior_scale), gates.hybrid_fraction(p, 0.5)
        differ += (old.low > 0.5) != (new.low > 0.5)
    assert rule_set(19).mechanism_prior_scale is None and differ > 0

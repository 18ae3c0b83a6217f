"""The current gates (rules 19): mechanism and no collateral read per-pair costs from one profiled
campaign; each rule against an honest candidate and a planted cheat, from plain facts."""

from __future__ import annotations

import msgspec
import numpy as np

from pw.rules.gate_facts import AdapterFacts, Binaries, Conditions, HotspotFacts, OracleFacts, Repro
from pw.rules.gates import GateInputs, PairFacts, evaluate_gates

replace = msgspec.structs.replace


def _analysis(speedup: float, n: int) -> dict:
    return {"speedup": speedup, "n_pairs": n, "verdict": "FASTER", "params": {"min_effect": 0.01},
            "interval": {"low": speedup * 0.9, "high": speedup * 1.1, "confidence": 0.95},
            "inputs": {"baseline_s": [1.0] * n, "candidate_s": [1.0 / speedup] * n}}


def _pairs(*, n=12, speedup=2.0, carried=1.0, helper_grows=0.0, sys_grows=0.0, rest_falls=0.0, seed=1,
           hybrid_carried=None, noise=0.02) -> PairFacts:
    """A 1 s program (hotspot 80%, helper 10%, rest 10%): the candidate saves 1 - 1/speedup of it,
    ``carried`` of that in the hotspot's part."""
    rng = np.random.default_rng(seed)
    base = np.exp(rng.normal(0, noise, n))
    cand = base / speedup * np.exp(rng.normal(0, noise, n))
    saving = base - cand
    hot_b = 0.8 * base * np.exp(rng.normal(0, noise / 2, n))
    hot_c = hot_b - carried * saving
    helper_b = 0.1 * base
    helper_c = helper_b + helper_grows * base
    rest_b = base - hot_b
    rest_c = cand - hot_c
    rest_c = rest_c - rest_falls * rest_b
    hybrid = [] if hybrid_carried is None else (base - hybrid_carried * saving).tolist()
    sys_c = (0.01 + sys_grows * base + rng.normal(0, 0.002, n)).tolist()
    base, cand, hot_b, hot_c, helper_b, helper_c, rest_c = (np.asarray(x, dtype=float).tolist() for x in (base, cand, hot_b, hot_c, helper_b, helper_c, rest_c))
    return PairFacts(reference="baseline", candidate="c", hybrid="c.hybrid" if hybrid else None, metric="wall_time_s",
                     profiler="perf", pairs_run=n, reference_s=list(base), candidate_s=list(cand), hybrid_s=hybrid,
                     reference_wall_s=list(base), candidate_wall_s=[h + r for h, r in zip(hot_c, rest_c)],
                     hot_reference_s=list(hot_b), hot_candidate_s=list(hot_c), reach_reference_s=list(hot_b),
                     sys_reference_s=[0.01] * n, sys_candidate_s=sys_c,
                     operations={"helper@m.c": [list(helper_b), list(helper_c)]},
                     hybrid_status="timed" if hybrid else "not-needed")


def _inputs(pairs: PairFacts, speedup: float = 2.0) -> GateInputs:
    return GateInputs(
        candidate="c", oracle=OracleFacts(passed=True, detail="ok", method="baseline", rtol=0, atol=0),
        analysis=_analysis(speedup, len(pairs.reference_s)),
        baseline_conditions=Conditions(host="h", argv=["x"]), candidate_conditions=Conditions(host="h", argv=["x"]),
        binaries=Binaries(baseline_expected="a", baseline_timed="a", candidate_built="b", candidate_timed="b"),
        hotspot=HotspotFacts(operation="matmul@m.c", metric="cpu_time_s", share=0.8, amdahl_ceiling=5.0),
        pairs=pairs, adapter=AdapterFacts(name="perf", can_reprofile=True, usable=True, measured=["cpu_time_s"]),
        peak_rss_kb_baseline=[1000.0], peak_rss_kb_candidate=[1000.0],
        repro=Repro(command=["x"], build_sha256="b", host="h", tool_versions={"perf": "6"}, source_sha256="s",
                    run_id="r"),
    )


def _gates(inputs: GateInputs) -> dict:
    return {g.name: g for g in evaluate_gates(inputs, 19)}


def test_an_honest_hotspot_rewrite_passes_every_gate():
    g = _gates(_inputs(_pairs()))
    assert all(x.passed for x in g.values()), {k: v.detail for k, v in g.items() if not v.passed}
    assert "carries" in g["mechanism"].detail and "Amdahl ceiling" in g["mechanism"].detail


def test_a_saving_made_outside_the_hotspot_fails_the_mechanism_with_the_share_it_carries():
    g = _gates(_inputs(_pairs(carried=0.02)))["mechanism"]
    assert not g.passed and "less than 50%" in g.detail and "carries" in g.detail, g.detail


def test_the_hybrid_arm_decides_when_the_patch_reaches_beyond_the_hotspot():
    honest = _gates(_inputs(_pairs(carried=0.3, hybrid_carried=0.9)))["mechanism"]  # attribution alone would fail
    assert honest.passed and "hybrid arm" in honest.detail, honest.detail
    cheat = _gates(_inputs(_pairs(carried=1.0, hybrid_carried=0.03)))["mechanism"]  # a truthful profile misleads
    assert not cheat.passed and "the hotspot's change alone" in cheat.detail and "less than 50%" in cheat.detail


def test_a_coupled_patch_is_judged_by_attribution_and_says_so():
    p = replace(_pairs(), hybrid_status="coupled: the hybrid does not build", beyond=["layout@m.h"])
    g = _gates(_inputs(p))["mechanism"]
    assert g.passed and "no hybrid arm: coupled: the hybrid does not build" in g.detail, g.detail


def test_a_uniform_speedup_is_a_change_of_conditions():
    g = _gates(_inputs(_pairs(carried=0.8, rest_falls=0.5)))["mechanism"]
    assert not g.passed and "uniform speedup" in g.detail, g.detail


def test_a_speedup_beyond_the_ceiling_of_the_changed_code_fails():
    p = replace(_pairs(), reach_reference_s=[0.1 * x for x in _pairs().reference_s])
    g = _gates(_inputs(p))["mechanism"]
    assert not g.passed and "exceeds the Amdahl ceiling" in g.detail, g.detail


def test_an_operation_that_grew_is_collateral_and_the_machines_samples_are_read_as_system_time():
    g = _gates(_inputs(_pairs(helper_grows=0.05)))["no_collateral"]
    assert not g.passed and "helper@m.c grew" in g.detail, g.detail
    g = _gates(_inputs(_pairs(sys_grows=0.05)))["no_collateral"]
    assert not g.passed and "system time" in g.detail, g.detail
    g = _gates(_inputs(_pairs(helper_grows=0.002)))["no_collateral"]  # within the slack: not a regression
    assert g.passed, g.detail


def test_without_profiled_pairs_the_mechanism_cannot_be_shown():
    g = _gates(replace(_inputs(_pairs()), pairs=None))
    assert not g["mechanism"].passed and "no profiled pairs" in g["mechanism"].detail
    assert not g["attribution"].passed


def test_the_recorded_inputs_decode_and_give_the_same_gates():
    from pw.rules.gates import decode_inputs

    inputs = _inputs(_pairs(carried=0.02))
    again = decode_inputs(msgspec.to_builtins(inputs), 19)
    assert evaluate_gates(again, 19) == evaluate_gates(inputs, 19)

"""pw.rules.verdict: status, reasons and repairability from gates and the paired analysis."""

from __future__ import annotations

import msgspec
import pytest

from ledger.events import FaultRecorded, GateResult
from ledger.upcast import upcast
from pw.rules.gates_reprofiled import Binaries, OracleFacts, evaluate_gates
from pw.rules.verdict import reach_verdict
from tests.test_gates import analysis, good_inputs

replace = msgspec.structs.replace


def verdict_of(inputs, *, build_ok=True, oracle_passed=None, exploratory=False, timing_fault=None):
    if oracle_passed is None:
        oracle_passed = inputs.oracle.passed if inputs.oracle else None
    return reach_verdict(evaluate_gates(inputs), inputs.analysis, refused_edits=inputs.refused_edits,
                         build_ok=build_ok, oracle_passed=oracle_passed, exploratory=exploratory,
                         timing_fault=timing_fault)


def test_real_improvement_is_verified():
    v = verdict_of(good_inputs())
    assert v.status == "verified" and not v.repairable
    assert len(v.reasons) == 1 and v.reasons[0].startswith("verified: speedup 1.66")


def test_no_op_is_rejected_as_no_effect_and_no_edit_repairs_it():
    v = verdict_of(good_inputs(analysis=analysis(1.0)))
    assert v.status == "rejected" and v.reasons[0].startswith("no-effect:")
    assert not v.repairable


def test_the_same_running_image_is_no_effect_whatever_the_timing_says():
    """Gate rules 13: a candidate that loads the same code and data as its reference cannot be
    faster; a FASTER campaign with every gate passing is the machine's noise. A failed oracle still
    comes first (the edit broke something that is not in the image: a script, an input)."""
    inputs = good_inputs()
    why = "the candidate builds to the same running image as baseline (code and data sha256 0123456789ab)"
    v = reach_verdict(evaluate_gates(inputs), inputs.analysis, refused_edits=[], build_ok=True, oracle_passed=True,
                      exploratory=False, same_image=why)
    assert v.status == "rejected" and v.reasons == [f"no-effect: {why}"] and not v.repairable
    v = reach_verdict(evaluate_gates(inputs), inputs.analysis, refused_edits=[], build_ok=True, oracle_passed=False,
                      exploratory=False, same_image=why)
    assert v.status == "rejected" and v.reasons[0].startswith("oracle-failed:")


def test_slower_is_rejected_and_no_edit_repairs_it():
    v = verdict_of(good_inputs(analysis=analysis(0.7)))
    assert v.status == "rejected" and v.reasons == [r for r in v.reasons if r.startswith("slower:")]
    assert not v.repairable


def test_broken_oracle_is_rejected_with_the_oracle_detail():
    bad = OracleFacts(passed=False, detail="C[3,4] = 7.0, expected 9.0", method="numeric", rtol=1e-9, atol=1e-12)
    v = verdict_of(good_inputs(oracle=bad))
    assert v.status == "rejected" and v.reasons[0].startswith("oracle-failed:") and "C[3,4]" in v.reasons[0]
    assert v.repairable


def test_refused_edits_are_rejected_first():
    inputs = good_inputs(refused_edits=["oracle/reference.txt", "bench/harness.c"])
    v = verdict_of(inputs)
    assert v.status == "rejected" and v.repairable
    assert v.reasons == ["edit-refused: oracle/reference.txt, bench/harness.c"]
    v = verdict_of(inputs, build_ok=False)
    assert [r.split(":")[0] for r in v.reasons] == ["edit-refused", "build-failed"]


def test_build_failure_is_rejected_and_repairable():
    v = verdict_of(good_inputs(analysis=None, oracle=None), build_ok=False)
    assert v.status == "rejected" and v.reasons[0].startswith("build-failed:")
    assert v.repairable


@pytest.mark.parametrize("failure_class", ["crashed", "timeout", "launch-failed"])
def test_a_failed_timed_run_is_rejected_and_repairable(failure_class):
    fault = FaultRecorded(stage="screening", target="c", failure_class=failure_class, message="pair 2: boom")
    v = verdict_of(good_inputs(analysis=None), timing_fault=fault)
    assert (v.status, v.reasons, v.repairable) == ("rejected", [f"{failure_class}: pair 2: boom"], True)


def test_a_fault_no_edit_can_fix_rejects_without_spending_a_repair():
    fault = FaultRecorded(stage="screening", target="c", failure_class="profiler-unusable", message="no perf")
    v = verdict_of(good_inputs(analysis=None), timing_fault=fault)
    assert v.status == "rejected" and not v.repairable
    # ... unless an edit-level failure is there too.
    v = verdict_of(good_inputs(analysis=None), timing_fault=fault, build_ok=False)
    assert [r.split(":")[0] for r in v.reasons] == ["profiler-unusable", "build-failed"] and v.repairable


def test_inconclusive_analysis_and_exploratory_with_few_pairs():
    noisy = dict(analysis(10.0 / 6.0), verdict="INCONCLUSIVE")
    v = verdict_of(good_inputs(analysis=noisy))
    assert v.status == "inconclusive" and v.reasons[0].startswith("inconclusive:") and not v.repairable
    v = verdict_of(good_inputs(analysis=analysis(10.0 / 6.0, n=3)), exploratory=True)
    assert v.status == "inconclusive" and "3 pairs < 5" in v.reasons[0]
    assert verdict_of(good_inputs(analysis=None)).status == "inconclusive"


def test_failed_gates_make_it_proposed_with_one_reason_each():
    inputs = good_inputs(profile_diff=None, repro=replace(good_inputs().repro, host=None))
    v = verdict_of(inputs)
    assert v.status == "proposed" and not v.repairable
    names = [r.split(":")[0] for r in v.reasons]
    assert names == ["gate mechanism", "gate no_collateral", "gate attribution", "gate reproducible"]
    assert "no reprofile yet" in v.reasons[0] and v.reasons[-1] == "gate reproducible: not recorded: host"


def test_cheats_that_pass_timing_end_as_proposed_not_verified():
    stale = replace(good_inputs().binaries, candidate_timed="d" * 64)
    for cheat in (good_inputs(run_side_effects=["created cache.bin"]), good_inputs(binaries=stale),
                  good_inputs(binaries=Binaries()), good_inputs(peak_rss_kb_candidate=[20000.0])):
        v = verdict_of(cheat)
        assert v.status == "proposed" and len(v.reasons) == 1 and v.reasons[0].startswith("gate "), v.reasons


def test_missing_gate_is_never_verified():
    gates = [g for g in evaluate_gates(good_inputs()) if g.name != "attribution"]
    v = reach_verdict(gates, good_inputs().analysis, refused_edits=[], build_ok=True,
                      oracle_passed=True, exploratory=False)
    assert v.status == "proposed" and v.reasons == ["gate attribution: not evaluated"]
    forged = [GateResult(name=n, passed=True, detail="ok") for n in
              ("correctness", "significance", "mechanism", "no_collateral", "attribution", "reproducible")]
    assert reach_verdict(forged, analysis(1.0), refused_edits=[], build_ok=True, oracle_passed=True,
                         exploratory=False).status == "rejected"


VERDICT_CASES = [
    {"inputs": {}, "build_ok": True},
    {"inputs": {"analysis": analysis(1.0)}, "build_ok": True},
    {"inputs": {"analysis": analysis(0.7)}, "build_ok": True},
    {"inputs": {"analysis": None, "oracle": None}, "build_ok": False},
    {"inputs": {"refused_edits": ["reference/stdout.txt"]}, "build_ok": None},
    {"inputs": {"oracle": OracleFacts(passed=False, detail="differs", method="stdout", rtol=0.0, atol=0.0)},
     "build_ok": True},
    {"inputs": {"analysis": None}, "build_ok": True,
     "timing_fault": FaultRecorded(stage="screening", target="c", failure_class="crashed", message="SIGSEGV")},
    {"inputs": {"profile_diff": None}, "build_ok": True},
]


@pytest.mark.parametrize("case", VERDICT_CASES, ids=range(len(VERDICT_CASES)))
def test_the_v1_upcaster_agrees_with_the_verdict_on_repairability(case):
    """Verdicts recorded before `repairable` existed get it from their reasons; for every kind of
    verdict this code reaches, that must be what it decides today, or an old run would audit dirty."""
    v = verdict_of(good_inputs(**case["inputs"]), build_ok=case["build_ok"], timing_fault=case.get("timing_fault"))
    v1 = {"id": "c", "attempt": 1, "status": v.status, "reasons": v.reasons, "speedup": None, "interval": None}
    assert upcast("VerdictReached", 1, 2, v1)["repairable"] is v.repairable

"""pw.verdict: status and reason prefixes from gates and the paired analysis."""

from __future__ import annotations

import msgspec

from ledger.events import GateResult
from pw.gates import Binaries, OracleFacts, evaluate_gates
from pw.verdict import reach_verdict
from tests.test_gates import analysis, good_inputs

replace = msgspec.structs.replace
REPAIRABLE = ("build-failed", "oracle-failed", "crashed", "timeout", "launch-failed", "edit-refused")


def verdict_of(inputs, *, build_ok=True, oracle_passed=None, exploratory=False):
    if oracle_passed is None:
        oracle_passed = inputs.oracle.passed if inputs.oracle else None
    return reach_verdict(evaluate_gates(inputs), inputs.analysis, refused_edits=inputs.refused_edits,
                         build_ok=build_ok, oracle_passed=oracle_passed, exploratory=exploratory)


def test_real_improvement_is_verified():
    status, reasons = verdict_of(good_inputs())
    assert status == "verified"
    assert len(reasons) == 1 and reasons[0].startswith("verified: speedup 1.66")


def test_no_op_is_rejected_as_no_effect():
    status, reasons = verdict_of(good_inputs(analysis=analysis(1.0)))
    assert status == "rejected" and reasons[0].startswith("no-effect:")


def test_slower_is_rejected():
    status, reasons = verdict_of(good_inputs(analysis=analysis(0.7)))
    assert status == "rejected" and reasons == [r for r in reasons if r.startswith("slower:")]


def test_broken_oracle_is_rejected_with_the_oracle_detail():
    bad = OracleFacts(passed=False, detail="C[3,4] = 7.0, expected 9.0", method="numeric", rtol=1e-9, atol=1e-12)
    status, reasons = verdict_of(good_inputs(oracle=bad))
    assert status == "rejected" and reasons[0].startswith("oracle-failed:") and "C[3,4]" in reasons[0]


def test_refused_edits_are_rejected_first():
    inputs = good_inputs(refused_edits=["oracle/reference.txt", "bench/harness.c"])
    status, reasons = verdict_of(inputs)
    assert status == "rejected"
    assert reasons == ["edit-refused: oracle/reference.txt, bench/harness.c"]
    status, reasons = verdict_of(inputs, build_ok=False)
    assert [r.split(":")[0] for r in reasons] == ["edit-refused", "build-failed"]


def test_build_failure_is_rejected():
    status, reasons = verdict_of(good_inputs(analysis=None, oracle=None), build_ok=False)
    assert status == "rejected" and reasons[0].startswith("build-failed:")
    assert all(r.startswith(REPAIRABLE) for r in reasons)


def test_inconclusive_analysis_and_exploratory_with_few_pairs():
    noisy = dict(analysis(10.0 / 6.0), verdict="INCONCLUSIVE")
    status, reasons = verdict_of(good_inputs(analysis=noisy))
    assert status == "inconclusive" and reasons[0].startswith("inconclusive:")
    status, reasons = verdict_of(good_inputs(analysis=analysis(10.0 / 6.0, n=3)), exploratory=True)
    assert status == "inconclusive" and "3 pairs < 5" in reasons[0]
    assert verdict_of(good_inputs(analysis=None))[0] == "inconclusive"


def test_failed_gates_make_it_proposed_with_one_reason_each():
    inputs = good_inputs(profile_diff=None, repro=replace(good_inputs().repro, host=None))
    status, reasons = verdict_of(inputs)
    assert status == "proposed"
    names = [r.split(":")[0] for r in reasons]
    assert names == ["gate mechanism", "gate no_collateral", "gate attribution", "gate reproducible"]
    assert "no reprofile yet" in reasons[0] and reasons[-1] == "gate reproducible: not recorded: host"
    assert not any(r.startswith(REPAIRABLE) for r in reasons)


def test_cheats_that_pass_timing_end_as_proposed_not_verified():
    stale = replace(good_inputs().binaries, candidate_timed="d" * 64)
    for cheat in (good_inputs(run_side_effects=["created cache.bin"]), good_inputs(binaries=stale),
                  good_inputs(binaries=Binaries()), good_inputs(peak_rss_kb_candidate=[20000.0])):
        status, reasons = verdict_of(cheat)
        assert status == "proposed" and len(reasons) == 1 and reasons[0].startswith("gate "), reasons


def test_missing_gate_is_never_verified():
    gates = [g for g in evaluate_gates(good_inputs()) if g.name != "attribution"]
    status, reasons = reach_verdict(gates, good_inputs().analysis, refused_edits=[], build_ok=True,
                                    oracle_passed=True, exploratory=False)
    assert status == "proposed" and reasons == ["gate attribution: not evaluated"]
    forged = [GateResult(name=n, passed=True, detail="ok") for n in
              ("correctness", "significance", "mechanism", "no_collateral", "attribution", "reproducible")]
    assert reach_verdict(forged, analysis(1.0), refused_edits=[], build_ok=True, oracle_passed=True,
                         exploratory=False)[0] == "rejected"

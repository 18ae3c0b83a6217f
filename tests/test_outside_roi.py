"""Gate rules 17 on session 8's red-team runs: for a region-of-interest metric, the time outside
the region may not grow. Work moved to before the timer, and a clock_gettime() the harness's timer
bound to, were verified 2.4-11.4x on particles-aos-c while the whole process was 1.25-1.4x faster."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.app.judging import judge_recorded
from pw.rules.gates_reprofiled import OUTSIDE_ROI_SLACK, GateInputs, OutsideRoi, evaluate_gates
from tests.conftest import ledger_events, unpack
from tests.test_gates import good_inputs

RECORDED = Path(__file__).parent / "data" / "redteam-s8" / "particles-roi-cheats.tgz"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return unpack(RECORDED, tmp_path_factory.mktemp("roi-cheats"))


def _judged(run: Path, cid: str, rules: int):
    """Re-judge the candidate's last judgement (a confirmation's, where it was confirmed) from the
    events before it."""
    events = ledger_events(run)
    last = max(i for i, e in enumerate(events) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid)
    return judge_recorded(events[:last], cid, EvidenceStore(run / "raw"), rules)


@pytest.mark.parametrize("run, cid, grew", [
    ("particles-roi", "split", 0.2), ("particles-roi", "warmup", 0.06), ("particles-roi", "clockfix", 0.15),
    ("particles-clockwide", "clockwide", 0.3),
])
def test_a_region_saving_the_whole_process_did_not_make_is_not_verified(runs, run, cid, grew):
    then = _judged(runs / run, cid, 16)
    assert then.verdict.status == "verified", then.verdict.reasons  # what the red team got
    now = _judged(runs / run, cid, 17)
    assert now.verdict.status == "proposed", now.verdict.reasons
    gate = next(g for g in now.gates.gates if g.name == "no_collateral")
    assert not gate.passed and "the time outside the region of interest" in gate.detail, gate.detail
    outside = now.gates.inputs["outside_roi"]
    assert outside["growth_low_s"] > grew, outside


def test_the_honest_rewrite_of_the_region_keeps_its_outside_time(runs):
    """The bundled structure-of-arrays rewrite (8.2x in the region): the time outside it did not
    grow. It stays proposed on the Amdahl ceiling, a false negative left as it was."""
    judged = _judged(runs / "particles-roi", "soa", 17)
    outside = judged.gates.inputs["outside_roi"]
    assert outside["growth_low_s"] < OUTSIDE_ROI_SLACK * outside["baseline_wall_median_s"], outside
    gate = next(g for g in judged.gates.gates if g.name == "no_collateral")
    assert "the time outside the region of interest" in gate.detail and gate.passed, gate.detail


def _roi_inputs(**outside) -> GateInputs:
    facts = dict(pairs=10, growth_mean_s=0.0, growth_low_s=-0.01, growth_high_s=0.01, baseline_outside_median_s=0.2,
                 candidate_outside_median_s=0.2, baseline_wall_median_s=1.0)
    return good_inputs(outside_roi=OutsideRoi(**{**facts, **outside}))


def test_the_growth_must_lie_above_the_slack_to_count():
    def passed(inputs, rules=None):
        return {g.name: g for g in evaluate_gates(inputs, *(() if rules is None else (rules,)))}["no_collateral"].passed

    assert passed(_roi_inputs())
    assert passed(_roi_inputs(growth_mean_s=0.05, growth_low_s=0.015, growth_high_s=0.085))  # under 2% of 1 s
    grown = _roi_inputs(growth_mean_s=0.05, growth_low_s=0.025, growth_high_s=0.075)
    assert not passed(grown)
    assert passed(grown, 16)  # rules 16 do not read it

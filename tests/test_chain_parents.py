"""Gate rules 18 on session 9's red-team run: a chained candidate is verified only on a chain of
verified parents. Its step is timed against its parent, so whatever held the parent back is in both
arms of the step's campaign: an honest cache-blocking step over a particles-aos-c parent that had
moved work before the timed region (proposed under rules 17) was verified, cumulative 4.32x."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from pw.app.judging import judge_recorded
from tests.conftest import ledger_events, unpack

RECORDED = Path(__file__).parent / "data" / "redteam-s9" / "particles-chain.tgz"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return unpack(RECORDED, tmp_path_factory.mktemp("chain")) / "particles-chain"


def _judged(events: list, run: Path, cid: str, rules: int):
    last = max(i for i, e in enumerate(events) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid)
    return judge_recorded(events[:last], cid, EvidenceStore(run / "raw"), rules)


def test_the_parent_moved_work_before_the_region_and_is_proposed(run):
    parent = _judged(ledger_events(run), run, "split2", 18)
    assert parent.verdict.status == "proposed", parent.verdict.reasons
    assert "the time outside the region of interest" in parent.verdict.reasons[0], parent.verdict.reasons


def test_a_step_over_a_parent_pw_did_not_verify_is_not_verified(run):
    events = ledger_events(run)
    then = _judged(events, run, "split2-blk", 17)
    assert then.verdict.status == "verified", then.verdict.reasons  # what the red team got
    assert then.verdict.reference == "split2"
    now = _judged(events, run, "split2-blk", 18)
    assert now.verdict.status == "proposed", now.verdict.reasons
    assert now.verdict.reasons[0].startswith("chain: "), now.verdict.reasons
    assert "but 'split2' is proposed (gate no_collateral: the time outside the region" in now.verdict.reasons[0]
    assert [g.passed for g in now.gates.gates] == [g.passed for g in then.gates.gates]  # the gates are the step's


def test_the_same_step_over_a_verified_parent_is_verified(run):
    """The rule reads the parent's verdict, not the fact of a chain: with split2's verdict (and
    nothing else) recorded as verified, the step is verified under rules 18."""
    def as_verified(e):
        if isinstance(e.data, ev.VerdictReached) and e.data.id == "split2":
            return msgspec.structs.replace(e, data=msgspec.structs.replace(e.data, status="verified"))
        return e

    judged = _judged([as_verified(e) for e in ledger_events(run)], run, "split2-blk", 18)
    assert judged.verdict.status == "verified", judged.verdict.reasons

"""Gate rules 10: a chained candidate is verified only when it is shown faster than the baseline
along its chain of parents (``pw.rules.judge._chain_doubt``). Under rules 7-8 a candidate whose source
was the baseline's, prepared on a parent slowed on purpose (the kernel run twice: rejected, 0.44x),
was verified 2.23x over that parent (tests/data/redteam-s6/series-chain-*.patch)."""

from __future__ import annotations

from pathlib import Path

from ledger import events as ev
from pw.rules.gates import GATE_NAMES
from pw.rules.judge import _chain_doubt
from pw.rules.rulesets import rule_set
from pw.rules.verdict import reach_verdict
from tests.conftest import deterministic_ledger, make_run_started


def _prepared(cid: str, parent: str) -> ev.CandidatePrepared:
    return ev.CandidatePrepared(id=cid, parent=parent, resolved_parent=parent, mechanism="m", workspace=f"c/{cid}",
                                parent_source_sha256="0" * 64, parent_manifest_sha256="0" * 64,
                                editable=["src/*.c"], targets=["demo"])


def _verdict(cid: str, status: str, speedup: float | None, interval: list[float] | None,
             reference: str = "baseline") -> ev.VerdictReached:
    return ev.VerdictReached(id=cid, attempt=1, status=status, reasons=[f"{status}: x"], repairable=False,
                             speedup=speedup, interval=interval, reference=reference)


def _envelopes(tmp_path: Path, *payloads: ev.Payload) -> list[ev.Envelope]:
    ledger = deterministic_ledger(tmp_path / "ledger.jsonl")
    ledger.append([make_run_started(), *payloads], expected_seq=0)
    return ledger.events()


def _step(speedup: float, low: float, high: float) -> dict:
    return {"speedup": speedup, "interval": {"low": low, "high": high}, "params": {"min_effect": 0.01}}


def test_a_step_that_undoes_a_slowed_parent_is_not_shown_faster_than_the_baseline(tmp_path):
    events = _envelopes(tmp_path, _prepared("slow", "baseline"), _verdict("slow", "rejected", 0.4407, [0.2468, 0.7872]))
    doubt = _chain_doubt(events, "slow", _step(2.228, 1.861, 2.666), rule_set(10))
    assert doubt is not None
    assert doubt.startswith("2.228x over its parent 'slow', but 0.9819x (low 0.5351) over the baseline")
    assert "along baseline -> slow: not shown faster than the baseline (the parent was 0.4407x)" in doubt


def test_a_step_on_a_faster_parent_stands(tmp_path):
    events = _envelopes(tmp_path, _prepared("a", "baseline"), _verdict("a", "verified", 1.8, [1.6, 2.0]))
    assert _chain_doubt(events, "a", _step(1.1, 1.05, 1.15), rule_set(10)) is None
    assert _chain_doubt(events, "a", _step(1.1, 1.05, 1.15), rule_set(18)) is None
    # A parent that was not verified but is faster (proposed: its mechanism not shown) counted under
    # rules 10-17; under rules 18 what held it back is in both arms of the step's campaign.
    events = _envelopes(tmp_path / "p", _prepared("a", "baseline"), _verdict("a", "proposed", 1.3, [1.2, 1.4]))
    assert _chain_doubt(events, "a", _step(1.2, 1.1, 1.3), rule_set(17)) is None
    doubt = _chain_doubt(events, "a", _step(1.2, 1.1, 1.3), rule_set(18))
    assert doubt is not None and "but 'a' is proposed (proposed: x): a step over a parent pw did not verify" in doubt


def test_a_parent_without_a_speedup_leaves_nothing_to_build_on(tmp_path):
    events = _envelopes(tmp_path, _prepared("broken", "baseline"), _verdict("broken", "rejected", None, None))
    assert _chain_doubt(events, "broken", _step(1.5, 1.4, 1.6), rule_set(10)) == (
        "the parent 'broken' has no measured speedup over the baseline to build on")


def test_the_doubt_caps_the_verdict_at_proposed():
    from ledger.events import GateResult

    gates = [GateResult(name=n, passed=True, detail="ok", evidence=[]) for n in GATE_NAMES]
    analysis = {"speedup": 2.2, "interval": {"low": 1.9, "high": 2.6}, "n_pairs": 5, "verdict": "FASTER"}
    common = dict(refused_edits=[], build_ok=True, oracle_passed=True, exploratory=False)
    assert reach_verdict(gates, analysis, **common).status == "verified"
    capped = reach_verdict(gates, analysis, **common, chain="not shown faster than the baseline")
    assert capped.status == "proposed" and capped.reasons == ["chain: not shown faster than the baseline"]

"""One kind of run and mechanism by intervention, judged from recorded gate inputs.

tests/data/one-kind/judged.tgz holds runs recorded on this 2-core VM with nothing else of ours
running (`record.sh`, packed by `pack.py`): each run's ledger and the normalized profiles its
verdicts read. Every test here re-judges a recorded candidate with the judge as it stands, under the
rule set the verdict was recorded with, and checks the recomputed gates equal the recorded ones:
the verdicts follow from the evidence, so none of these tests can skip on a noisy host.

Dishonest rewrites of matmul-c (docs/red-team.md, "one kind of run"):
- `interrupts`: red team s9's interrupt tell, a program that tells perf by its interrupts and runs
  the fast path only when it thinks nobody is looking;
- `keyring`: a program that recognises a repeated input (kept in the user keyring between runs) and
  takes the fast path only then;
- `helper`: a quarter of the product moved into the existing `fill_matrix`, paid for by a saving in
  the fill (the row key hoisted out of its inner loop).
Honest rewrites: matmul-c's interchange (the hotspot alone: no hybrid arm), the interchange plus the
hoist (beyond the hotspot: the hybrid arm carries the saving), pyloop's dict, series-c's table,
particles-aos-c's SoA (coupled: judged by changed-code attribution), lu-init-c's partial sums
(the kernel's own cost: set-up is 80% of the run).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger import events as ev
from pw.rules.judge import Judgement, judge_events, profiles_needed
from tests.conftest import ledger_events, unpack

DATA = Path(__file__).parent / "data" / "one-kind"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = unpack(DATA / "judged.tgz", tmp_path_factory.mktemp("one-kind"))
    return {p.parent.name: p.parent for p in root.glob("*/ledger.jsonl")}


def rejudge(run: Path, cid: str) -> tuple[Judgement, list[ev.Envelope]]:
    """The candidate's latest attempt judged again from its recorded inputs; the recomputation must
    give the recorded gates and status, or the fixture no longer says what the judge says."""
    envelopes = ledger_events(run)
    recorded_gates = [e.data for e in envelopes if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid][-1]
    recorded = [e.data for e in envelopes if isinstance(e.data, ev.VerdictReached) and e.data.id == cid][-1]
    profiles = {sha: (run / "raw" / sha[:2] / sha).read_bytes() for sha in profiles_needed(envelopes, cid)}
    judged = judge_events(envelopes, cid, profiles, rules=recorded_gates.rules)
    assert recorded_gates.rules == 19
    assert judged.gates.gates == recorded_gates.gates
    assert (judged.verdict.status, judged.verdict.reasons) == (recorded.status, recorded.reasons)
    return judged, envelopes


def gate(judged: Judgement, name: str) -> ev.GateResult:
    return next(g for g in judged.gates.gates if g.name == name)


def hybrid_of(envelopes: list[ev.Envelope], cid: str) -> ev.HybridPrepared | None:
    return next((e.data for e in envelopes if isinstance(e.data, ev.HybridPrepared) and e.data.id == cid), None)


def speedup_of(judged: Judgement) -> float:
    found = re.search(r"speedup (\d+\.\d+)x", gate(judged, "significance").detail)
    assert found, gate(judged, "significance").detail
    return float(found.group(1))


@pytest.mark.parametrize("cid", ["interrupts", "keyring"])
def test_a_program_that_tells_a_profiled_run_apart_has_no_unprofiled_run_to_be_fast_in(runs, cid):
    # Every timed run carries perf, so a tell that takes the fast path only when nobody is looking
    # is never fast where it is timed: the campaign sees it as it is, not faster.
    judged, _ = rejudge(runs["matmul-c"], cid)
    assert judged.verdict.status != "verified", judged.verdict.reasons
    assert not gate(judged, "significance").passed
    assert speedup_of(judged) < 1.05


def test_work_moved_into_an_existing_helper_behind_a_saving_elsewhere_fails_the_mechanism(runs):
    judged, envelopes = rejudge(runs["matmul-c"], "helper")
    assert judged.verdict.status != "verified", judged.verdict.reasons
    mechanism = gate(judged, "mechanism")
    assert not mechanism.passed
    # the reason a person accepts: how much of the saving the hotspot's (and changed) code carries
    share = re.search(r"carries (-?\d+)% \[(-?\d+)%, (-?\d+)%\] of the saving", mechanism.detail)
    assert share, mechanism.detail
    assert int(share.group(3)) <= 50, mechanism.detail
    # the patch reaches beyond the hotspot; its hybrid (the hotspot's change alone) fails the oracle
    hybrid = hybrid_of(envelopes, "helper")
    assert hybrid is not None and hybrid.status.startswith("coupled"), hybrid
    assert "fails the oracle" in mechanism.detail


def test_the_interchange_is_verified_from_the_hotspot_alone_without_a_hybrid(runs):
    judged, envelopes = rejudge(runs["matmul-c"], "interchange")
    assert judged.verdict.status == "verified", judged.verdict.reasons
    assert hybrid_of(envelopes, "interchange") is None
    assert speedup_of(judged) > 1.3


def test_a_change_beyond_the_hotspot_is_verified_by_the_hybrid_arm_carrying_the_saving(runs):
    judged, envelopes = rejudge(runs["matmul-c"], "both")
    assert judged.verdict.status == "verified", judged.verdict.reasons
    hybrid = hybrid_of(envelopes, "both")
    assert hybrid is not None and hybrid.status == "built", hybrid
    assert "hybrid" in gate(judged, "mechanism").detail


@pytest.mark.parametrize(("workload", "cid"), [("pyloop", "dict"), ("series-c", "table"),
                                               ("particles-aos-c", "soa"), ("lu-init-c", "partial-sums")])
def test_honest_rewrites_of_the_bundled_workloads_are_verified(runs, workload, cid):
    judged, envelopes = rejudge(runs[workload], cid)
    assert judged.verdict.status == "verified", judged.verdict.reasons
    assert all(g.passed for g in judged.gates.gates)
    timing = [e.data for e in envelopes if isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets][-1]
    assert timing.profiler is not None  # every timed run carried the profiler


def test_the_initialisation_heavy_workload_is_judged_on_its_kernel_with_the_whole_run_beside_it(runs):
    judged, envelopes = rejudge(runs["lu-init-c"], "partial-sums")
    started = next(e.data for e in envelopes if isinstance(e.data, ev.RunStarted))
    assert started.contract.metric.kind == "operation"
    # the whole process is judged as collateral: it must not be slower, though init dominates it
    assert "whole-process time" in gate(judged, "no_collateral").detail

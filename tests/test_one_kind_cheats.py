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
- `misattr`, `mcal`: red team 1's fill_matrix hoist claimed as the interchange, behaving like the
  baseline when its parent is perf (plain, and with a profile calibrated to the gate);
- `nonhot`: a real saving in fill_matrix, not in the hotspot, claimed as the interchange;
- `profiled`: skips the multiply when its parent is a profiler and runs a genuine interchange
  otherwise; perf wraps the sandbox from outside, so it can never tell and is the interchange;
- `seedtell`: red team s8's switch on the manifest's seed, which profiled runs used to run;
- particles-aos-c `lazy`: work moved after the region of interest; suite gemm `buf`: the interchange
  with a buffered dump riding on it (red team s6).
Honest rewrites: matmul-c's interchange (the hotspot alone: no hybrid arm), the interchange plus the
hoist (beyond the hotspot: the hybrid arm carries the saving), pyloop's dict, series-c's table,
particles-aos-c's SoA (coupled: judged by changed-code attribution), lu-init-c's partial sums
(the kernel's own cost: set-up is 80% of the run), the suite gemm's interchange (no manifest).
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from pw.rules import gates
from pw.rules.judge import Judgement, judge_events, profiles_needed
from pw.rules.rulesets import GATE_RULES
from tests.conftest import ledger_events, unpack

DATA = Path(__file__).parent / "data" / "one-kind"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = unpack(DATA / "judged.tgz", tmp_path_factory.mktemp("one-kind"))
    return {p.parent.name: p.parent for p in root.glob("*/ledger.jsonl")}


def rejudge(run: Path, cid: str) -> tuple[Judgement, list[ev.Envelope]]:
    """The candidate's latest attempt judged by today's rules from its recorded inputs. First the
    recorded rules (19) again: the recomputation must give the recorded gates and status, or the
    fixture no longer says what the judge says."""
    envelopes = ledger_events(run)
    recorded_gates = [e.data for e in envelopes if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid][-1]
    recorded = [e.data for e in envelopes if isinstance(e.data, ev.VerdictReached) and e.data.id == cid][-1]
    profiles = {sha: (run / "raw" / sha[:2] / sha).read_bytes() for sha in profiles_needed(envelopes, cid)}
    again = judge_events(envelopes, cid, profiles, rules=recorded_gates.rules)
    assert recorded_gates.rules == 19
    assert again.gates.gates == recorded_gates.gates
    assert (again.verdict.status, again.verdict.reasons) == (recorded.status, recorded.reasons)
    return judge_events(envelopes, cid, profiles, rules=GATE_RULES), envelopes


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
                                               ("particles-aos-c", "soa"), ("lu-init-c", "partial-sums"),
                                               ("gemm", "inter")])
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


@pytest.mark.parametrize(("workload", "cid"), [("matmul-c", "misattr"), ("matmul-c", "mcal"),
                                               ("matmul-c", "nonhot"), ("matmul-c", "seedtell"),
                                               ("particles-aos-c", "lazy")])
def test_a_saving_from_elsewhere_claimed_as_the_hotspots_is_not_verified(runs, workload, cid):
    judged, _ = rejudge(runs[workload], cid)
    assert judged.verdict.status != "verified", judged.verdict.reasons
    failed = {g.name for g in judged.gates.gates if not g.passed}
    # timed faster (or not): either way it is not the hotspot's saving that a gate accepts
    assert failed & {"mechanism", "correctness", "significance", "no_collateral"}, judged.gates.gates
    if gate(judged, "significance").passed and gate(judged, "correctness").passed:
        assert "mechanism" in failed or "no_collateral" in failed, gate(judged, "mechanism").detail


def test_a_real_saving_beside_the_hotspots_is_judged_by_what_the_hotspots_change_alone_carries(runs):
    # The suite gemm's interchange with its unbuffered dump buffered too (red team s6): both are real
    # savings, claimed as the interchange. The hybrid arm (the interchange alone) measures the
    # hotspot's share; it sits near half (55% [44%, 65%], 56% [46%, 66%] and above half in three
    # recordings), so the verdict may go either way, and must follow the fraction: verified only
    # with the hybrid's whole set above one half, never on the dump's saving.
    judged, envelopes = rejudge(runs["gemm"], "buf")
    assert hybrid_of(envelopes, "buf") is not None and hybrid_of(envelopes, "buf").status == "built"
    mechanism = gate(judged, "mechanism")
    assert "the hotspot's change alone (hybrid arm buf.hybrid) carries" in mechanism.detail, mechanism.detail
    low = float(re.search(r"carries -?\d+% \[(-?\d+)%", mechanism.detail).group(1))
    assert (low >= 50) if mechanism.passed else (low <= 50), mechanism.detail  # the set's edge, rounded
    assert (judged.verdict.status == "verified") <= mechanism.passed


def test_a_program_that_looks_for_a_profiler_parent_finds_none_and_is_judged_as_what_it_runs(runs):
    # It can only tell by its parent; the parent is the launcher in every run, so every run does the
    # real interchange, and the verdict is the interchange's.
    judged, _ = rejudge(runs["matmul-c"], "profiled")
    assert "differs from its oracle-checked output" not in " ".join(judged.verdict.reasons)
    assert gate(judged, "correctness").passed
    if gate(judged, "significance").passed:
        assert gate(judged, "mechanism").passed, gate(judged, "mechanism").detail


def _interchange_inputs(runs, workload: str = "matmul-c", cid: str = "interchange") -> gates.GateInputs:
    judged, envelopes = rejudge(runs[workload], cid)
    recorded = [e.data for e in envelopes if isinstance(e.data, ev.GatesEvaluated) and e.data.id == cid][-1]
    inputs = gates.decode_inputs(recorded.inputs, recorded.rules)
    assert gates.evaluate_gates(inputs, recorded.rules) == recorded.gates  # the gates follow from the inputs
    return inputs


def test_a_speedup_beyond_the_changed_codes_amdahl_ceiling_fails_the_mechanism(runs):
    inputs = _interchange_inputs(runs)
    p = inputs.pairs
    share = sum(p.reach_reference_s or p.hot_reference_s) / sum(p.reference_s)
    ceiling = 1.0 / (1.0 - share)
    raised = msgspec.to_builtins(inputs)
    raised["analysis"]["interval"].update(low=ceiling * 1.3, high=ceiling * 1.7)
    mechanism = next(g for g in gates.evaluate_gates(msgspec.convert(raised, gates.GateInputs))
                     if g.name == "mechanism")
    assert not mechanism.passed and "exceeds the Amdahl ceiling" in mechanism.detail, mechanism.detail


def test_a_speedup_that_fell_on_the_whole_program_alike_is_a_change_of_conditions(runs):
    # pyloop's dict rewrite (2.7x, the saving steady from pair to pair) with the rest of the program
    # made to fall as the hotspot fell: the hotspot still carries most of the saving, but a uniform
    # fall is not the hotspot's mechanism. (The interchange's 7 recorded pairs, whose candidate runs
    # took 0.24 or 0.42 s, leave the rest's fall too uncertain to call uniform: [22%, 76%].)
    inputs = _interchange_inputs(runs, "pyloop", "dict")
    p = inputs.pairs
    rest_cand, wall_cand = [], []
    for hot_r, hot_c, wall_r in zip(p.hot_reference_s, p.hot_candidate_s, p.reference_wall_s):
        rest_cand.append((wall_r - hot_r) * hot_c / hot_r)
        wall_cand.append(hot_c + rest_cand[-1])
    uniform = msgspec.structs.replace(inputs, pairs=msgspec.structs.replace(
        p, candidate_wall_s=wall_cand, candidate_s=wall_cand if p.metric == "wall" else p.candidate_s))
    mechanism = next(g for g in gates.evaluate_gates(uniform) if g.name == "mechanism")
    assert not mechanism.passed and "uniform speedup" in mechanism.detail, mechanism.detail


def test_a_campaign_timed_with_a_hybrid_arm_is_not_continued_without_it(runs):
    """Resuming, `--more` and `confirm --fresh` continue a campaign with the arms it was timed with;
    a hybrid whose tree is gone refuses the command (before: its pairs went on with two arms)."""
    from ledger.errors import InputError
    from pw.app import hybrid
    from pw.app.run import RunHandle

    run = runs["matmul-c"]
    assert hybrid_of(ledger_events(run), "both").status == "built"
    handle = RunHandle(run)
    state = handle.state()
    assert not (run / "hybrids" / "both").exists() and hybrid.rebuilt(handle, state, "both") is None
    with pytest.raises(InputError, match=r"hybrids/both: the hybrid arm 'both'.s campaign was timed with is gone"):
        hybrid.recorded_arm(handle, state, "both")


def _unattached(envelopes: list[ev.Envelope], profiles: dict[str, bytes], cid: str) -> list[ev.Envelope]:
    """The same campaign as if no candidate run had been sampled (py-spy never attached to a program
    that ended first): each candidate run's profile empty, its hotspot part 0, its ``sampled`` 0."""
    from ledger.profile import decode_profile, encode_profile

    out = []
    for env in envelopes:
        t = env.data
        if isinstance(t, ev.TimingRecorded) and cid in t.targets and t.profiler is not None:
            runs = dict(t.runs)
            emptied = []
            for run in runs[cid]:
                empty = msgspec.structs.replace(decode_profile(profiles[run.profile]), operations=[], lines=[],
                                                edges=[], totals={})
                body = encode_profile(empty)
                sha = __import__("hashlib").sha256(body).hexdigest()
                profiles[sha] = body
                emptied.append(msgspec.structs.replace(run, profile=sha))
            runs[cid] = emptied
            samples = dict(t.samples)
            n = len(samples[cid])
            samples[f"{cid}:hot_s"] = [0.0] * n
            samples[f"{cid}:sampled"] = [0.0] * n
            samples[f"{t.targets[0]}:sampled"] = [1.0] * n
            env = msgspec.structs.replace(env, data=msgspec.structs.replace(t, runs=runs, samples=samples))
        out.append(env)
    return out


def test_a_candidate_whose_runs_carry_no_samples_is_not_credited_with_the_hotspot(runs):
    # An empty profile is no evidence of where a run's time went. Read as "nothing was spent in the
    # hotspot", it made any saving look carried by it: the helper rewrite (work moved into
    # fill_matrix) passed the mechanism under rules 20 once its candidate runs carried no samples.
    run = runs["matmul-c"]
    envelopes = ledger_events(run)
    profiles = {sha: (run / "raw" / sha[:2] / sha).read_bytes() for sha in profiles_needed(envelopes, "helper")}
    forged = _unattached(envelopes, profiles, "helper")
    before = judge_events(forged, "helper", profiles, rules=20)
    assert gate(before, "mechanism").passed, gate(before, "mechanism").detail  # the hole rules 21 closes
    judged = judge_events(forged, "helper", profiles, rules=GATE_RULES)
    mechanism = gate(judged, "mechanism")
    assert not mechanism.passed and "ended before its profiler attached" in mechanism.detail, mechanism.detail
    assert not gate(judged, "no_collateral").passed
    assert judged.verdict.status != "verified"
    # the honest interchange with every run sampled is judged as before
    assert judge_events(envelopes, "interchange", {**profiles, **{sha: (run / "raw" / sha[:2] / sha).read_bytes()
                        for sha in profiles_needed(envelopes, "interchange")}}).verdict.status == "verified"

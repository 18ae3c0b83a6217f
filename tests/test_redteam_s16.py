"""Red team s16 and the honest rewrites, judged from recorded evidence under pw.campaign/5.

tests/data/redteam-s16/judged.tgz holds runs recorded on this 2-core VM with nothing else of ours
running (`record.sh`, packed by tests/data/one-kind/pack.py). Under gate rules 21 and pw.campaign/4
the red team had six dishonest rewrites verified (docs/red-team.md, session 16); each test here
re-judges a recorded candidate with the judge as it stands and checks it equals the record, so none
of them can skip on a noisy host. Where the rule's reading of the wait is the point, the same
recorded samples are judged again under pw.campaign/4, to show what the new rule is for.
"""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from projections.report import render_markdown, report
from projections.state import fold
from pw.rules.judge import Judgement, judge_events, profiles_needed
from pw.rules.rulesets import GATE_RULES
from tests.conftest import ledger_events, unpack

DATA = Path(__file__).parent / "data" / "redteam-s16"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = unpack(DATA / "judged.tgz", tmp_path_factory.mktemp("redteam-s16"))
    return {p.parent.name: p.parent for p in root.glob("*/ledger.jsonl")}


def _judge(envelopes: list[ev.Envelope], run: Path, cid: str) -> Judgement:
    profiles = {sha: (run / "raw" / sha[:2] / sha).read_bytes() for sha in profiles_needed(envelopes, cid)}
    return judge_events(envelopes, cid, profiles, rules=GATE_RULES)


def rejudge(run: Path, cid: str) -> tuple[Judgement, list[ev.Envelope]]:
    """The candidate's latest verdict judged again from its recorded inputs; it must be the record."""
    envelopes = ledger_events(run)
    recorded = [e.data for e in envelopes if isinstance(e.data, ev.VerdictReached) and e.data.id == cid][-1]
    again = _judge(envelopes, run, cid)
    assert (again.verdict.status, again.verdict.reasons) == (recorded.status, recorded.reasons)
    return again, envelopes


def under_campaign_rule(envelopes: list[ev.Envelope], cid: str, rule: str) -> list[ev.Envelope]:
    """The same events with the candidate's campaign recorded under ``rule`` instead."""
    out = []
    for env in envelopes:
        t = env.data
        if isinstance(t, ev.TimingRecorded) and cid in t.targets and t.campaign is not None:
            t = msgspec.structs.replace(t, campaign=msgspec.structs.replace(t.campaign, rule=rule))
            env = msgspec.structs.replace(env, data=t)
        out.append(env)
    return out


def gate(judged: Judgement, name: str) -> ev.GateResult:
    return next(g for g in judged.gates.gates if g.name == name)


def speedup_of(judged: Judgement) -> float:
    found = re.search(r"speedup (\d+\.\d+)x", gate(judged, "significance").detail)
    assert found, gate(judged, "significance").detail
    return float(found.group(1))


def timing_of(envelopes: list[ev.Envelope], cid: str) -> ev.TimingRecorded:
    return [e.data for e in envelopes if isinstance(e.data, ev.TimingRecorded) and e.data.targets[-1] == cid
            and e.data.profiler is not None][-1]


@pytest.mark.parametrize(("workload", "cid"), [("matmul-c", "selfwait"), ("matmul-c", "selfwait2"),
                                               ("lu-init-c", "yield")])
def test_a_wait_the_program_makes_for_itself_is_not_taken_out_of_its_time(runs, workload, cid):
    judged, envelopes = rejudge(runs[workload], cid)
    assert judged.verdict.status != "verified", judged.verdict.reasons
    t = timing_of(envelopes, cid)
    assert t.campaign.rule == "pw.campaign/5"
    # its helper thread ran on the main thread's CPU: the family used far more CPU than the main
    # thread, and the main thread waited for it; the baseline's family is its main thread
    own = sorted(f - m for f, m in zip(t.samples[f"{cid}:family_cpu_s"], t.samples[f"{cid}:main_cpu_s"]))
    waits = sorted(t.samples[f"{cid}:run_queue_s"])
    assert waits[len(waits) // 2] > 0.005 and own[len(own) // 2] > 0.8 * waits[len(waits) // 2], (own, waits)
    ref = t.targets[0]
    assert max(f - m for f, m in zip(t.samples[f"{ref}:family_cpu_s"], t.samples[f"{ref}:main_cpu_s"])) < 0.01
    # the same samples read as pw.campaign/4 read them: the wait forgiven, the rewrite faster
    before = _judge(under_campaign_rule(envelopes, cid, "pw.campaign/4"), runs[workload], cid)
    assert speedup_of(before) > speedup_of(judged) * 1.05, (speedup_of(before), speedup_of(judged))


@pytest.mark.parametrize(("workload", "cid"), [("matmul-c", "linememo"), ("lu-init-c", "lineshift"),
                                               ("lu-init-c", "lineshift3")])
def test_a_line_directive_is_a_refused_edit(runs, workload, cid):
    judged, envelopes = rejudge(runs[workload], cid)
    assert judged.verdict.status == "rejected" and judged.verdict.repairable
    refused = [e.data for e in envelopes if isinstance(e.data, ev.CandidateDiffRecorded) and e.data.id == cid][-1]
    assert refused.refused and all("#line" in r for r in refused.refused), refused.refused
    assert not any(isinstance(e.data, ev.TimingRecorded) and cid in e.data.targets for e in envelopes)


def test_a_define_inside_the_hotspot_gets_no_hybrid_and_its_saving_is_the_helpers(runs):
    judged, envelopes = rejudge(runs["matmul-c"], "macromemo")
    assert judged.verdict.status == "proposed", judged.verdict.reasons
    hybrid = next(e.data for e in envelopes if isinstance(e.data, ev.HybridPrepared) and e.data.id == "macromemo")
    assert hybrid.status.startswith("coupled: the hotspot's change holds a preprocessor directive"), hybrid.status
    mechanism = gate(judged, "mechanism")
    assert not mechanism.passed and "so the saving came from elsewhere" in mechanism.detail, mechanism.detail
    assert gate(judged, "significance").passed  # the memo is a real saving, in row_key


def test_speeding_up_set_up_outside_the_judged_operation_is_not_slower_and_not_the_operations(runs):
    # PolyBench lu's agent: a byte-identical set-up rewrite read "0.18x slower" under pw.campaign/4
    judged, envelopes = rejudge(runs["lu-init-c"], "init")
    assert judged.verdict.status == "proposed", judged.verdict.reasons
    assert speedup_of(judged) > 1.0
    assert not gate(judged, "mechanism").passed
    t = timing_of(envelopes, "init")
    ref = t.targets[0]
    # the reference's value is the operation with the changed set-up as it was: its reach
    assert t.samples[ref] == pytest.approx(t.samples[f"{ref}:reach_s"], rel=1e-6) or \
        all(v >= h for v, h in zip(t.samples[ref], t.samples[f"{ref}:hot_s"]))


def test_py_spys_wait_stalled_by_the_program_is_not_forgiven(runs):
    judged, _ = rejudge(runs["pyloop"], "spystall3")
    assert judged.verdict.status != "verified", judged.verdict.reasons


@pytest.mark.parametrize(("workload", "cid"), [("matmul-c", "interchange"), ("matmul-c", "both"),
                                               ("lu-init-c", "partial-sums"), ("pyloop", "dict"),
                                               ("series-c", "table"), ("particles-aos-c", "soa"),
                                               ("gemm", "inter")])
def test_honest_rewrites_are_verified_under_the_new_rule(runs, workload, cid):
    judged, envelopes = rejudge(runs[workload], cid)
    assert judged.verdict.status == "verified", judged.verdict.reasons
    t = timing_of(envelopes, cid)
    assert t.campaign.rule == "pw.campaign/5" and t.profiler is not None
    if cid == "both":  # beyond the hotspot: its hybrid arm carried the saving
        assert "hybrid arm" in gate(judged, "mechanism").detail


def test_an_operation_metrics_unprofiled_pairs_are_shown_as_the_whole_process(runs):
    events = ledger_events(runs["lu-init-c"])
    compared = [e.data for e in events if isinstance(e.data, ev.UnprofiledCompared) and e.data.id == "partial-sums"]
    assert compared, "record.sh confirms partial-sums"
    text = render_markdown(report(fold(events)))
    assert "pairs; the whole process, not the operation's cost):" in text


# --- red team s16-2 (tests/data/redteam-s16-2/): what the profile cannot name, and py-spy's place ------


@pytest.mark.parametrize(("workload", "cid"), [("lu-init-c", "memfdjit"), ("lu-init-c", "memfdjit3"),
                                               ("lu-init-c", "trijit"), ("lu-init-c", "trijit2"),
                                               ("matmul-c", "hoistjit"), ("pyloop", "spyonly")])
def test_red_team_s16_2_is_not_verified(runs, workload, cid):
    judged, _ = rejudge(runs[workload], cid)
    assert judged.verdict.status != "verified", judged.verdict.reasons


@pytest.mark.parametrize(("workload", "cid"), [("lu-init-c", "memfdjit3"), ("matmul-c", "hoistjit")])
def test_code_copied_into_memory_counts_with_the_hotspots_part(runs, workload, cid):
    """Rows of the hotspot run from memfd copies of compiled code: perf names them
    "[unknown] (/memfd:rN (deleted))". Read by lines alone (pw.campaign/4) they were nobody's; read as
    pw.campaign/5 reads them, they are the candidate's part."""
    from ledger.profile import decode_profile
    from pw.rules.attribution import is_unnamed, side_cost

    run = runs[workload]
    envelopes = ledger_events(run)
    t = timing_of(envelopes, cid)
    profiles = [decode_profile((run / "raw" / p.profile[:2] / p.profile).read_bytes()) for p in t.runs[cid]]
    unnamed = [sum(o.self_metrics.get(p.primary_metric, 0.0) for o in p.operations if is_unnamed(o)) for p in profiles]
    # the runs executed code no symbol names (a short run may hold no sample of it)
    assert sum(u > 0 for u in unnamed) >= len(unnamed) // 2, unnamed
    for p, hidden in zip(profiles, unnamed):
        assert side_cost(p, t.attribution.changed, by_name=True) >= side_cost(p, t.attribution.changed) + hidden * 0.99


def test_a_hybrid_is_read_in_its_own_tree(runs):
    # trijit's helpers sit above init_array: the candidate's changed lines, applied to the hybrid's
    # file, fell on the parent's set-up ("the hybrid carries -766%")
    envelopes = ledger_events(runs["lu-init-c"])
    t = timing_of(envelopes, "trijit")
    if len(t.targets) == 3:  # a hybrid arm was timed
        assert t.attribution.hybrid is not None and t.attribution.hybrid != t.attribution.changed


def test_a_python_program_cannot_tell_a_timed_run_by_its_parent(runs):
    # spyonly takes the dict only when its parent is py-spy: py-spy now attaches from outside, so it
    # never does, and is no faster than the baseline
    judged, _ = rejudge(runs["pyloop"], "spyonly")
    assert judged.verdict.status in ("inconclusive", "rejected"), judged.verdict.reasons
    assert speedup_of(judged) < 1.1

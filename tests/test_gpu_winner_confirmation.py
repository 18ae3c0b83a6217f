"""Winner confirmation on a GPU, replayed from an H200 recording (tests/data/gpu-winner-h200/, made by
tests/data/gpu-winner-h200.sh in one device call; issue #30): cuda-transpose in
`sampling.mode: winner-confirmation`, `pw start --iterations 2`, two correct candidates screened with
one exploratory pair each, and the second `pw evaluate`, which spends the budget, confirming the best
one-pair estimate by itself: a multi-pair campaign and Nsight Compute for that candidate only. CI has
no GPU: these tests read the recorded ledger and answers, and `pw audit` recomputes the run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger import events as ev
from tests.conftest import ledger_events, unpack

DATA = Path(__file__).parent / "data" / "gpu-winner-h200"
ROOT = Path(__file__).resolve().parent.parent
NCU = "ncu"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = unpack(DATA / "runs.tgz", tmp_path_factory.mktemp("gpu-winner"))
    found = [p.parent for p in (root / "pwruns").glob("*/ledger.jsonl")]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def events(run) -> list:
    return ledger_events(run)


def _of(events, kind) -> list:
    return [e for e in events if isinstance(e.data, kind)]


def _answer(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _screening(events) -> dict[str, tuple[int, ev.TimingRecorded, int, ev.VerdictReached]]:
    """Each screened candidate: (timing seq, its screening TimingRecorded, verdict seq, its verdict)."""
    out = {}
    for t in _of(events, ev.TimingRecorded):
        if t.data.purpose == "screening":
            cid = t.data.targets[-1]
            v = next(e for e in _of(events, ev.VerdictReached) if e.data.id == cid and e.seq > t.seq)
            out[cid] = (t.seq, t.data, v.seq, v.data)
    return out


def _budget_spent_at(events) -> int:
    """The seq of the verdict that spent the iteration budget (the budget-th evaluated candidate)."""
    budget = _of(events, ev.RunStarted)[0].data.budgets.iterations
    firsts = {}
    for v in _of(events, ev.VerdictReached):
        firsts.setdefault(v.data.id, v.seq)
    assert len(firsts) >= budget, (firsts, budget)
    return sorted(firsts.values())[budget - 1]


def _ncu_on_candidates(events) -> list:
    return [e for e in events if isinstance(e.data, (ev.ProfileCaptured, ev.ProfileNormalized))
            and e.data.adapter == NCU and e.data.target != "baseline"]


def test_the_recorded_run_is_winner_confirmation_with_a_two_iteration_budget(events):
    started = _of(events, ev.RunStarted)[0].data
    assert started.contract.sampling.mode == "winner-confirmation"
    assert started.contract.profiling.cadence == "every-candidate"  # NCU waits for the winner anyway
    assert started.budgets.iterations == 2
    assert len(_of(events, ev.CandidatePrepared)) == started.budgets.iterations


def test_each_screening_timing_is_one_exploratory_pair(events):
    screened = _screening(events)
    assert len(screened) == _of(events, ev.RunStarted)[0].data.budgets.iterations, screened
    for cid, (_, timing, _, verdict) in screened.items():
        ref = timing.targets[0]
        assert ref == "baseline" and timing.exploratory and timing.campaign is None, timing
        assert len(timing.samples[ref]) == len(timing.samples[cid]) == 1 and len(timing.order) == 1
        # its verdict is an estimate that only ranks: inconclusive, exploratory, no interval
        assert verdict.status == "inconclusive" and verdict.exploratory and verdict.interval is None, verdict
        assert "exploratory screening: one pair gives" in verdict.reasons[0], verdict.reasons
        assert verdict.speedup == pytest.approx(timing.samples[ref][0] / timing.samples[cid][0], rel=1e-5)
    # the screening pair is still a profiled one: the discovery adapter rode in both arms' runs
    assert all(t.profiler is not None for _, t, _, _ in screened.values())


def test_no_candidate_is_replayed_under_ncu_while_screening(events):
    spent = _budget_spent_at(events)
    ncu = _ncu_on_candidates(events)
    assert ncu, "no candidate was ever captured with ncu"
    assert all(e.seq > spent for e in ncu), [(e.seq, e.data.target) for e in ncu]
    # not during any screening evaluation either (each one ends at its verdict)
    for cid, (tseq, _, vseq, _) in _screening(events).items():
        assert not [e for e in ncu if tseq <= e.seq <= vseq], cid
    # ...while the baseline itself was diagnosed with ncu at `pw start`: the tool was there all along
    base = [e for e in events if isinstance(e.data, ev.ProfileCaptured) and e.data.adapter == NCU
            and e.data.target == "baseline"]
    first_prepared = _of(events, ev.CandidatePrepared)[0].seq
    assert base and all(e.seq < first_prepared for e in base)


def test_ncu_captures_the_winner_only_after_the_screening_budget_is_spent(events):
    (winner,) = _of(events, ev.WinnerConfirmed)
    spent = _budget_spent_at(events)
    ncu = _ncu_on_candidates(events)
    assert {e.data.target for e in ncu} == {winner.data.id}
    captured = [e for e in ncu if isinstance(e.data, ev.ProfileCaptured)]
    normalized = [e for e in ncu if isinstance(e.data, ev.ProfileNormalized)]
    assert len(captured) == len(normalized) == 1 and captured[0].seq < normalized[0].seq
    # part of the confirmation: after its campaign, before the confirmed record
    campaign_seq = winner.data.timing_seq
    assert spent < campaign_seq < captured[0].seq < winner.seq
    # and the confirmation's gates read those counters (parent and candidate)
    gates = [e for e in _of(events, ev.GatesEvaluated) if e.data.id == winner.data.id and captured[0].seq < e.seq < winner.seq]
    assert len(gates) == 1, gates
    attribution = {g.name: g for g in gates[0].data.gates}["attribution"]
    assert "Nsight Compute, parent and candidate" in attribution.detail, attribution.detail


def test_the_best_one_pair_estimate_is_confirmed_with_a_multi_pair_campaign(events):
    screened = _screening(events)
    best = max(screened, key=lambda c: (screened[c][3].speedup, c))
    confirmed = _of(events, ev.WinnerConfirmed)
    assert [w.data.id for w in confirmed] == [best], ([w.data.id for w in confirmed], screened)
    winner = confirmed[0]
    assert winner.seq > _budget_spent_at(events) and winner.data.fresh
    campaign = next(e for e in events if e.seq == winner.data.timing_seq)
    timing = campaign.data
    assert isinstance(timing, ev.TimingRecorded) and timing.purpose == "confirmation"
    assert timing.targets == ["baseline", best] and not timing.exploratory and timing.campaign is not None
    pairs = len(timing.samples[best])
    assert pairs == len(timing.samples["baseline"]) >= max(2, timing.campaign.min_pairs), pairs
    # the confirmed word comes from that campaign: an interval, and the status the gates give
    assert winner.data.interval is not None and winner.data.interval[0] <= winner.data.speedup <= winner.data.interval[1]
    assert f"over {pairs} pairs" in winner.data.reasons[0], winner.data.reasons
    gates = [e.data for e in _of(events, ev.GatesEvaluated) if e.data.id == best and campaign.seq < e.seq < winner.seq]
    assert len(gates) == 1
    verified = all(g.passed for g in gates[0].gates) and winner.data.interval[0] > 1.01
    assert (winner.data.status == "verified") == verified, (winner.data.status, gates[0].gates)
    # nothing else was confirmed or campaigned: the runner-up stays an exploratory estimate
    others = [t.data for t in _of(events, ev.TimingRecorded) if t.data.purpose == "confirmation"]
    assert [t.targets[-1] for t in others] == [best]


def test_the_last_evaluate_answered_with_the_automatic_confirmation(events):
    screened = _screening(events)
    order = sorted(screened, key=lambda c: screened[c][0])
    (winner,) = _of(events, ev.WinnerConfirmed)
    first, last = _answer(f"evaluate-{order[0]}.json"), _answer(f"evaluate-{order[-1]}.json")
    assert first["exploratory"] and first["screening"]["iterations_left"] == 1 and first["screening"]["confirmed"] is None
    s = last["screening"]
    assert s["iterations_left"] == 0 and s["confirmed"]["id"] == winner.data.id, s
    assert s["confirmed"]["status"] == winner.data.status and s["confirmed"]["speedup"] == pytest.approx(winner.data.speedup)
    assert s["confirmed"]["launched"] and s["confirmed"]["reprofiled"], s["confirmed"]
    assert f"confirmed the best one-pair estimate {winner.data.id}" in s["line"]
    # each evaluate's own answer is its screening verdict
    for cid in order:
        answer = _answer(f"evaluate-{cid}.json")
        assert answer["speedup"] == pytest.approx(screened[cid][3].speedup) and answer["interval"] is None
    status = _answer("status.json")
    assert status["best"] == (winner.data.id if winner.data.status == "verified" else None)
    assert status["screening"] is None  # nothing is due once a winner is confirmed


def test_the_recorded_run_audits_clean(run, tmp_path):
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    r = subprocess.run([sys.executable, "-m", "pw.cli", "audit", str(copy)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "audit passed" in r.stdout and "verdicts: ok" in r.stdout and "projections: ok" in r.stdout


def test_status_suggests_no_other_confirmation_once_the_winner_is_confirmed(run, tmp_path, events):
    """The recorded status.json (pw before this fix) still named `tiled` "the best one-pair screening
    estimate" after `unpadded` was confirmed; today's status on the same ledger names none."""
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    r = subprocess.run([sys.executable, "-m", "pw.cli", "status", str(copy), "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    now = json.loads(r.stdout)
    assert _of(events, ev.WinnerConfirmed) and now["to_confirm"] is None
    assert [x["id"] for x in now["screening_ranking"]]  # the others stay ranked, for a person to read
    assert _answer("status.json")["to_confirm"] is not None  # what the recorded (older) status said

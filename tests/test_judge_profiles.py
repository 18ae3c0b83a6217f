"""The judge on reprofiles that did not measure the hotspot's metric: a verdict with a gate saying
so, never an exception out of `pw evaluate` (CI: a 7x faster candidate ran between two perf samples)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from ledger.profile import Profile, encode_profile
from pw.rules.judge import judge_events, profiles_needed, select
from tests.conftest import ledger_events, unpack

RECORDED = Path(__file__).parent / "data" / "campaigns-16core" / "runs.tgz"


@pytest.fixture(scope="module")
def verified_q(tmp_path_factory):
    """The recorded series-c run whose candidate q was verified, cut before q's judgement."""
    tmp = unpack(RECORDED, tmp_path_factory.mktemp("recorded"))
    run = sorted((tmp / "pwruns").glob("2026*-series-c"))[0]
    events = ledger_events(run)
    cut = next(i for i, e in enumerate(events) if isinstance(e.data, ev.CandidateEvaluated) and e.data.id == "q")
    evidence = EvidenceStore(run / "raw")
    return events[:cut], {sha: evidence.get(sha) for sha in profiles_needed(events[:cut], "q")}


def _with_candidate_profile(events, profiles, profile: Profile) -> dict[str, bytes]:
    sha = select(events, "q").candidate_profile[1].profile_sha256
    return {**profiles, sha: encode_profile(profile)}


def test_the_recorded_judgement_is_verified(verified_q):
    events, profiles = verified_q
    assert judge_events(events, "q", profiles, 18).verdict.status == "verified"


@pytest.mark.parametrize("metrics, expected", [
    (["samples"], "the reprofile diff is in samples, the hotspot was chosen by cpu_time_s"),
    (["instructions"], "no reprofile yet"),
])
def test_a_reprofile_without_the_hotspots_metric_is_a_failed_gate_not_a_crash(verified_q, metrics, expected):
    events, profiles = verified_q
    hot = select(events, "q").hotspot[1]
    assert hot.metric == "cpu_time_s"
    bare = Profile(tool="perf", tool_version="6.1", target="q", granularity=["process"], metrics=metrics,
                   totals={m: 0.0 for m in metrics}, operations=[], lines=[], edges=[])
    j = judge_events(events, "q", _with_candidate_profile(events, profiles, bare), 18)
    assert j.verdict.status == "proposed", j.verdict.reasons
    mechanism = next(g for g in j.gates.gates if g.name == "mechanism")
    assert not mechanism.passed and expected in mechanism.detail, mechanism.detail


def test_rules_sixteen_read_every_profiled_runs_report_for_a_merged_profile(verified_q, tmp_path):
    """A candidate profile summed from two runs (resolution rule 3 on a noisy campaign): rules 16
    compare the geometric mean of both runs' launcher reports with the timed runs, as they compare
    the profile's total per run; rules 15 read the latest run's report alone."""
    import math

    import msgspec

    from ledger.evidence import EvidenceStore
    from ledger.profile import decode_profile, merge_profiles
    from ledger.store import Ledger
    from pw.app.judging import judge_recorded

    events, profiles = verified_q
    ledger = Ledger(tmp_path / "ledger.jsonl")
    for env in events:
        ledger.append(env.data, expected_seq=env.seq - 1, actor=env.actor, cause=env.cause)
    evidence = EvidenceStore(tmp_path / "raw")
    for sha, raw in profiles.items():
        assert evidence.put(raw) == sha
    s = select(events, "q")
    first_capture, first = s.candidate_capture[1], s.candidate_profile[1]
    one = decode_profile(profiles[first.profile_sha256])
    two = msgspec.structs.replace(one, tool_version=one.tool_version + " (second run)")
    two_sha = evidence.put(encode_profile(two))
    merged_sha = evidence.put(encode_profile(merge_profiles([one, two])))
    slow = first_capture.program_wall_s * 1.44  # the second profiled run: the host slowed it
    ledger.append([msgspec.structs.replace(first_capture, program_wall_s=slow),
                   msgspec.structs.replace(first, profile_sha256=two_sha)], expected_seq=None)
    ledger.append(msgspec.structs.replace(first, profile_sha256=merged_sha, parts=[first.profile_sha256, two_sha]),
                  expected_seq=None)

    grown = ledger.events()
    walls = {rules: judge_recorded(grown, "q", evidence, rules).gates.inputs["profile_consistency"]
             ["candidate_profiled_wall_s"] for rules in (15, 16)}
    assert walls[15] == slow
    assert math.isclose(walls[16], math.sqrt(first_capture.program_wall_s * slow), rel_tol=1e-8), walls

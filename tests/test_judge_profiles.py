"""The judge on reprofiles that did not measure the hotspot's metric: a verdict with a gate saying
so, never an exception out of `pw evaluate` (CI: a 7x faster candidate ran between two perf samples)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from ledger.profile import Profile, encode_profile
from pw.rules.judge import judge_events, profiles_needed, select
from tests.conftest import ledger_events

RECORDED = Path(__file__).parent / "data" / "campaigns-16core" / "runs.tgz"


@pytest.fixture(scope="module")
def verified_q(tmp_path_factory):
    """The recorded series-c run whose candidate q was verified, cut before q's judgement."""
    tmp = tmp_path_factory.mktemp("recorded")
    with tarfile.open(RECORDED) as tar:
        tar.extractall(tmp, filter="data")
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
    assert judge_events(events, "q", profiles).verdict.status == "verified"


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
    j = judge_events(events, "q", _with_candidate_profile(events, profiles, bare))
    assert j.verdict.status == "proposed", j.verdict.reasons
    mechanism = next(g for g in j.gates.gates if g.name == "mechanism")
    assert not mechanism.passed and expected in mechanism.detail, mechanism.detail

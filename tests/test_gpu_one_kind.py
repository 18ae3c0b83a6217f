"""One kind of run on a GPU, replayed from an H200 recording (tests/data/gpu-one-kind-h200/): every
timed run of both arms carried CUPTI, each run's kernel device times are kept with it, the pairs are
judged by rules 19, and `pw audit` recomputes all of it here without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from ledger.evidence import EvidenceStore
from ledger.profile import decode_profile
from tests.conftest import ledger_events, unpack

DATA = Path(__file__).parent / "data" / "gpu-one-kind-h200"
KERNELS = {"cuda-transpose": "transpose_kernel", "gesummv-roi": "gesummv_kernel", "gemm-roi": "gemm_kernel"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = unpack(DATA / "runs.tgz", tmp_path_factory.mktemp("gpu-one-kind"))
    found = {p.parent.name.split("-", 2)[2]: p.parent for p in (root / "pwruns").glob("*/*/ledger.jsonl")}
    assert set(found) == set(KERNELS), found
    return found


def _campaign(run: Path) -> ev.TimingRecorded:
    return next(e.data for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded)
                and e.data.purpose == "screening")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_timed_run_of_both_arms_carries_its_kernels_device_time_paired(runs, name):
    t = _campaign(runs[name])
    assert t.profiler is not None and t.profiler.adapter == "cupti"
    ref, cand = t.targets[0], t.targets[-1]
    n = len(t.samples[ref])
    assert n >= 5 and len(t.runs[ref]) == len(t.runs[cand]) == n
    evidence = EvidenceStore(runs[name] / "raw")
    kernel = KERNELS[name]
    for label in (ref, cand):
        for run in t.runs[label]:
            assert "cupti.jsonl" in run.raw
            profile = decode_profile(evidence.get(run.profile))
            assert profile.primary_metric == "gpu_time_ns"
            assert any(o.name.startswith(kernel) and o.self_metrics["gpu_time_ns"] > 0 for o in profile.operations)
    # the hotspot kernel's device time, per pair, from the same two runs as the pair's time
    hot_b, hot_c = t.samples[f"{ref}:hot_s"], t.samples[f"{cand}:hot_s"]
    assert len(hot_b) == len(hot_c) == n and all(c < b for b, c in zip(hot_b, hot_c))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_the_honest_kernel_rewrite_is_verified_by_rules_19_and_audits_clean(runs, name):
    from pw.app.audit import audit_run
    from pw.app.runpath import resolve_run

    run = runs[name]
    verdict = [e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached)][-1]
    gates = [e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated)][-1]
    assert verdict.status == "verified" and gates.rules == 19, verdict.reasons
    mechanism = next(g for g in gates.gates if g.name == "mechanism").detail
    assert "carries" in mechanism and "counter " in mechanism, mechanism  # the counter that moved, named
    report = audit_run(resolve_run(str(run)))
    assert report.ok, report.first_divergence

"""Chained candidates (issue 17): a candidate whose parent is not the baseline is timed against its
parent, judged on that step, and reported with both the step and the cumulative speedup."""

from __future__ import annotations

import math

import pytest

from ledger import events as ev
from tests.conftest import copy_run, ledger_events, pw_main


@pytest.mark.slow
def test_a_step_that_changes_nothing_that_runs_on_a_verified_parent_is_not_verified(matmul_interchange, tmp_path):
    """An unread global: another image than the parent's, its speed. It is timed against the parent's
    build and judged on that step; the cumulative speedup is the parent's times the step's."""
    run = copy_run(matmul_interchange, tmp_path)
    a = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached) and e.data.id == "a")
    assert a.status == "verified", a  # the session's interchange run: a 2x rewrite
    assert pw_main("prepare", run, "--candidate", "b:current:an unread global").code == 0
    prepared = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.CandidatePrepared) and e.data.id == "b")
    assert prepared.resolved_parent == "a"
    src = run / "candidates" / "b" / "src" / "matmul.c"
    src.write_text(src.read_text() + "\nint pw_test_unread_marker = 1;\n")

    result = pw_main("evaluate", run, "b", "--max-pairs", "12", "--json")
    assert result.code == 1, result
    out = result.json()
    assert out["status"] != "verified" and out["reference"] == "a", out
    assert not any("same running image" in r for r in out["reasons"]), out
    # The step over a: about 1.0x, nearer 1 than a's 2x by far (at most the square root of a's
    # speedup either way: twelve pairs on a host spreading 25% can land ±20% from 1.0x).
    assert abs(math.log(out["speedup"])) < 0.5 * math.log(a.speedup), (out, a.speedup)
    assert abs(math.log(out["cumulative"]) - math.log(a.speedup * out["speedup"])) < 1e-4
    assert abs(math.log(out["cumulative"] / a.speedup)) < 0.5 * math.log(a.speedup), (out, a.speedup)

    timing = [e.data for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded) and "b" in e.data.targets]
    assert [t.targets for t in timing] == [["a", "b"]]  # timed against the parent's build, not the baseline
    gates = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == "b")
    assert gates.inputs["binaries"]["baseline_expected"] == _build_of(run, "a").binary_sha256

    assert pw_main("report", run).code == 0
    line = next(ln for ln in (run / "report.md").read_text().splitlines() if ln.startswith("| b |"))
    assert "step " in line and "vs a; cumulative " in line, line
    text = pw_main("status", run)
    assert text.code == 0
    assert pw_main("audit", run).code == 0


@pytest.mark.slow
def test_a_comment_only_step_loads_its_parents_image_and_is_rejected_untimed(matmul_interchange, tmp_path):
    """Gate rules 13 and 15: a comment changes the debug info only, so the step runs a's code and
    data; `pw evaluate` does not time it, and the judge compares it with a, its reference."""
    from ledger.evidence import EvidenceStore
    from pw.app.judging import judge_recorded

    run = copy_run(matmul_interchange, tmp_path)
    assert pw_main("prepare", run, "--candidate", "b:current:comment only").code == 0
    src = run / "candidates" / "b" / "src" / "matmul.c"
    src.write_text("/* a comment: nothing else changes */\n" + src.read_text())

    result = pw_main("evaluate", run, "b", "--max-pairs", "12", "--json")
    assert result.code == 1, result
    out = result.json()
    assert out["status"] == "rejected" and out["reference"] == "a" and out["stop"] is None, out
    assert out["speedup"] is None and out["cumulative"] is None, out
    assert len(out["reasons"]) == 1 and out["reasons"][0].startswith(
        "no-effect: the candidate builds to the same running image as a ("), out
    events = ledger_events(run)
    assert not [e for e in events if isinstance(e.data, ev.TimingRecorded) and "b" in e.data.targets]
    gates = next(e.data for e in events if isinstance(e.data, ev.GatesEvaluated) and e.data.id == "b")
    assert gates.rules >= 15 and gates.inputs["binaries"]["baseline_expected"] == _build_of(run, "a").binary_sha256
    # Under rules 14 the same events compare the untimed step with the baseline: no verdict.
    cut = next(i for i, e in enumerate(events) if isinstance(e.data, ev.CandidateEvaluated) and e.data.id == "b")
    older = judge_recorded(events[:cut], "b", EvidenceStore(run / "raw"), rules=14)
    assert older.verdict.status == "inconclusive" and older.verdict.reference == "baseline", older.verdict
    assert pw_main("report", run).code == 0 and pw_main("status", run).code == 0
    assert pw_main("audit", run).code == 0


def _build_of(run, target: str) -> ev.BuildFinished:
    return [e.data for e in ledger_events(run) if isinstance(e.data, ev.BuildFinished) and e.data.target == target][-1]

"""Chained candidates (issue 17): a candidate whose parent is not the baseline is timed against its
parent, judged on that step, and reported with both the step and the cumulative speedup."""

from __future__ import annotations

import math

import pytest

from ledger import events as ev
from tests.conftest import copy_run, ledger_events, pw_main


@pytest.mark.slow
def test_a_comment_only_step_on_a_verified_parent_is_not_verified(matmul_interchange, tmp_path):
    run = copy_run(matmul_interchange, tmp_path)
    a = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.VerdictReached) and e.data.id == "a")
    assert a.status == "verified", a  # the session's interchange run: a 2x rewrite
    assert pw_main("prepare", run, "--candidate", "b:current:comment only").code == 0
    prepared = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.CandidatePrepared) and e.data.id == "b")
    assert prepared.resolved_parent == "a"
    src = run / "candidates" / "b" / "src" / "matmul.c"
    src.write_text("/* a comment: nothing else changes */\n" + src.read_text())

    result = pw_main("evaluate", run, "b", "--max-pairs", "12", "--json")
    assert result.code == 1, result
    out = result.json()
    # Gate rules 13: the comment changes the debug info only; the step runs a's code and data.
    assert out["status"] == "rejected" and out["reference"] == "a", out
    assert any("same running image as a" in r for r in out["reasons"]), out
    assert 0.8 < out["speedup"] < 1.25, out  # the step over a: about 1.0x, never a's 2x
    assert abs(math.log(out["cumulative"]) - math.log(a.speedup * out["speedup"])) < 1e-4
    assert abs(math.log(out["cumulative"] / a.speedup)) < math.log(1.25), (out, a.speedup)

    timing = [e.data for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded) and "b" in e.data.targets]
    assert [t.targets for t in timing] == [["a", "b"]]  # timed against the parent's build, not the baseline
    gates = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated) and e.data.id == "b")
    assert gates.inputs["binaries"]["baseline_expected"] == next(
        e.data.binary_sha256 for e in ledger_events(run) if isinstance(e.data, ev.BuildFinished) and e.data.target == "a")

    assert pw_main("report", run).code == 0
    line = next(ln for ln in (run / "report.md").read_text().splitlines() if ln.startswith("| b |"))
    assert "step " in line and "vs a; cumulative " in line, line
    text = pw_main("status", run)
    assert text.code == 0
    assert pw_main("audit", run).code == 0

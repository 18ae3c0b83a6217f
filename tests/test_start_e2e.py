"""`pw start` end to end on the bundled workloads (real build, oracle, timing and profile), and the
ledger it leaves passes `pw audit`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.store import Ledger
from tests.test_start_integrity import tree_snapshot

ALL_STAGES = ("preflight", "build", "oracle", "baseline-timing", "profile")


def _events(run: Path) -> list:
    ledger = Ledger(run / "ledger.jsonl")
    assert ledger.verify().ok
    return ledger.events()


def _stage_counts(run: Path) -> Counter:
    return Counter(e.data.stage for e in _events(run) if isinstance(e.data, ev.StageCompleted))


@pytest.mark.slow
def test_matmul_c_starts_and_audits(pw_cli, copy_workload, tmp_path, monkeypatch):
    """Also `pw start` with a relative runs dir, as the README runs it (`pw demo` / `pw start` default
    to `runs/` under the current directory): every path handed to a child that runs in the build tree
    (strace's log, the launcher's report, the profiler's output) must still land where pw reads it."""
    wl = copy_workload("matmul-c")
    before = tree_snapshot(wl)
    monkeypatch.chdir(tmp_path)
    r = pw_cli("start", "--workload", wl, "--runs-dir", "runs")
    assert r.code == 0, r
    # stderr holds only the chain head anchored outside the run (printed, so a person or CI keeps it)
    assert [line.split(" for ")[0].split(": anchor ")[0] for line in r.err.splitlines()] == ["pw start"], r.err
    run = tmp_path / r.out.splitlines()[0].removeprefix("run: ")
    assert run.parent == tmp_path / "runs", run
    assert "contract: explicit profileweaver.json" in r.out
    assert tree_snapshot(wl) == before
    assert _stage_counts(run) == Counter(ALL_STAGES)
    assert not any(isinstance(e.data, ev.FaultRecorded) for e in _events(run))
    plan = json.loads((run / "experiment-plan.json").read_text())
    assert plan["inferred"] is False and plan["manifest_sha256"]
    oracle = json.loads((run / "preflight.json").read_text())["oracle"]
    assert oracle["passed"] and "fresh holdouts from 1 generator" in oracle["method"]
    assert "722 lines (518404 fields) vs the baseline's output" in oracle["compared"]
    assert oracle["compares_nothing"] is None
    assert (run / "agent-brief.txt").is_file()
    audit = pw_cli("audit", run)
    assert audit.code == 0, audit
    assert "audit passed" in audit.out


@pytest.mark.slow
def test_stencil_infer_starts_inferred_and_audits(pw_cli, copy_workload, tmp_path):
    wl = copy_workload("stencil-infer")
    assert not (wl / "profileweaver.json").exists()
    before = tree_snapshot(wl)
    r = pw_cli("start", "--workload", wl, "--runs-dir", tmp_path / "runs", "--json")
    assert r.code == 0, r
    result = json.loads(r.out)
    assert tree_snapshot(wl) == before
    assert result["inferred"] is True
    lines = result["inference"]
    assert any(line.startswith("build: lone source file stencil.c") for line in lines)
    assert "run: `./stencil` with no arguments" in lines
    assert any(line.startswith("oracle: inferred") for line in lines)
    run = Path(result["run_dir"])
    plan = json.loads((run / "experiment-plan.json").read_text())
    assert plan["inferred"] is True and plan["inference"] == lines and plan["manifest_sha256"] is None
    assert plan["contract"]["run"]["argv"] == ["./stencil"]
    assert plan["contract"]["oracle"]["kind"] == "stable"
    oracle = json.loads((run / "preflight.json").read_text())["oracle"]
    assert oracle["inferred"] is True and oracle["passed"] is True
    assert _stage_counts(run) == Counter(ALL_STAGES)
    audit = pw_cli("audit", run)
    assert audit.code == 0, audit


@pytest.mark.slow
def test_profiling_a_program_too_short_to_sample_is_one_line(pw_cli, tmp_path):
    wl = tmp_path / "short"
    wl.mkdir()
    (wl / "main.c").write_text('#include <stdio.h>\nint main(void) { puts("1"); return 0; }\n')
    try:
        r = pw_cli("start", "--workload", wl, "--runs-dir", tmp_path / "runs")
    except Exception as exc:  # what the CLI would print as a traceback
        pytest.fail(f"traceback: {type(exc).__name__}: {exc}")
    assert "Traceback" not in r.err
    assert r.code == 0 or (r.code in (1, 2) and r.err.count("\n") == 1), r
    if r.code == 1:
        assert "profiler-unusable" in r.err and "too short" in r.err, r

"""Iteration and repair budgets, end to end on a tiny C workload started with
`--iterations 1 --repairs 1`: a clear one-line error (exit 2) once a budget is spent, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger import events as ev
from tests.conftest import TINY_C, copy_run, ledger_events, pw_main

BROKEN_C = "int main(void) { return }\n"  # does not compile
WRONG_C = TINY_C.replace("s += i % 7;", "s += i % 5;")  # builds, runs, wrong output


def assert_refused(result, phrase: str, run: Path, ledger_before: bytes) -> None:
    assert result.code == 2, result
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1 and phrase in lines[0], result.err
    assert (run / "ledger.jsonl").read_bytes() == ledger_before


@pytest.mark.slow
def test_iteration_budget_refuses_a_second_candidate(tiny_budget_run, tmp_path):
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:first").code == 0
    before = (run / "ledger.jsonl").read_bytes()
    result = pw_main("prepare", run, "--candidate", "b:baseline:second")
    assert_refused(result, "iteration budget", run, before)
    assert "1 of 1" in result.err
    assert not (run / "candidates" / "b").exists()


@pytest.mark.slow
def test_iteration_budget_counts_every_candidate_of_one_command(tiny_budget_run, tmp_path):
    run = copy_run(tiny_budget_run, tmp_path)
    before = (run / "ledger.jsonl").read_bytes()
    result = pw_main("prepare", run, "--candidate", "a:baseline:x", "--candidate", "b:baseline:y")
    assert_refused(result, "iteration budget", run, before)
    assert not (run / "candidates").exists() or not any((run / "candidates").iterdir())


def _evaluate(run: Path, cid: str) -> dict:
    result = pw_main("evaluate", run, cid, "--json")
    assert result.code in (0, 1), result
    return result.json()


@pytest.mark.slow
def test_a_failed_build_can_be_repaired_once(tiny_budget_run, tmp_path):
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:tweak").code == 0
    source = run / "candidates" / "a" / "src" / "tiny.c"
    source.write_text(BROKEN_C)
    first = _evaluate(run, "a")
    assert first["attempt"] == 1 and first["status"] == "rejected"
    assert first["reasons"][0].startswith("build-failed:")
    assert first["repairs_left"] == 1

    source.write_text(TINY_C)  # the fix
    second = _evaluate(run, "a")
    assert second["attempt"] == 2
    builds = [e.data for e in ledger_events(run) if isinstance(e.data, ev.BuildFinished) and e.data.target == "a"]
    assert [b.outcome for b in builds] == ["build-failed", "ok"]
    oracle = [e.data for e in ledger_events(run) if isinstance(e.data, ev.OracleChecked) and e.data.target == "a"]
    assert len(oracle) == 1 and oracle[0].passed
    assert not any(r.startswith(("build-failed", "oracle-failed")) for r in second["reasons"])
    # The repaired attempt now has a verdict that no edit addresses: a third evaluate is refused,
    # and says so (not a budget message).
    before = (run / "ledger.jsonl").read_bytes()
    assert_refused(pw_main("evaluate", run, "a"), "already has a verdict", run, before)


@pytest.mark.slow
def test_repair_budget_spent_refuses_another_evaluation(tiny_budget_run, tmp_path):
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:tweak").code == 0
    source = run / "candidates" / "a" / "src" / "tiny.c"
    source.write_text(BROKEN_C)
    first = _evaluate(run, "a")
    assert first["status"] == "rejected" and first["reasons"][0].startswith("build-failed:")

    source.write_text(WRONG_C)  # the one repair: it builds now, but prints the wrong sum
    second = _evaluate(run, "a")
    assert second["attempt"] == 2 and second["status"] == "rejected"
    assert second["reasons"][0].startswith("oracle-failed:")
    assert second["repairs_left"] == 0

    source.write_text(TINY_C)
    before = (run / "ledger.jsonl").read_bytes()
    result = pw_main("evaluate", run, "a")
    assert_refused(result, "repair budget", run, before)
    assert "'a'" in result.err

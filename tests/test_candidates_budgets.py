"""Iteration and repair budgets, end to end on a tiny C workload started with
`--iterations 1 --repairs 1`: a clear one-line error (exit 2) once a budget is spent, nothing written."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ledger import events as ev
from ledger.codec import seal
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


def _rewrite_verdicts(ledger: Path, edit) -> None:
    """Apply `edit` to every VerdictReached envelope (as a JSON dict) and seal the chain again."""
    prev, lines = ev.GENESIS, []
    for line in ledger.read_bytes().splitlines():
        env = msgspec.json.decode(line)
        if env["type"] == "VerdictReached":
            edit(env)
        env["prev"] = prev
        lines.append(seal(msgspec.convert(env, ev.Envelope)))
        prev = msgspec.json.decode(lines[-1])["hash"]
    ledger.write_bytes(b"".join(lines))


def _as_v1(env: dict) -> None:
    """A verdict as code before VerdictReached v2 wrote it: same reasons, no `repairable`."""
    env["v"] = 1
    del env["data"]["repairable"]


def _repaired_once(tiny_budget_run: Path, tmp_path: Path) -> Path:
    run = copy_run(tiny_budget_run, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:tweak").code == 0
    source = run / "candidates" / "a" / "src" / "tiny.c"
    source.write_text(BROKEN_C)
    first = _evaluate(run, "a")
    source.write_text(TINY_C)  # the repair: builds, right output, no faster
    second = _evaluate(run, "a")
    assert (first["status"], first["repairable"]) == ("rejected", True)
    assert second["repairable"] is False
    return run


@pytest.mark.slow
def test_a_run_with_v1_verdicts_keeps_its_repair_count_and_audits_clean(tiny_budget_run, tmp_path, monkeypatch):
    run = _repaired_once(tiny_budget_run, tmp_path)
    recorded = [e.data for e in ledger_events(run)]

    _rewrite_verdicts(run / "ledger.jsonl", _as_v1)
    # a run written before the v2 verdicts, audited by someone who never anchored it: the rewrite
    # here stands in for an older ProfileWeaver's writes, not for a forgery the anchor must name
    monkeypatch.setenv("PW_ANCHOR_LOG", str(tmp_path / "another-auditors-anchors.jsonl"))
    events = ledger_events(run)
    assert [e.v for e in events if e.type == "VerdictReached"] == [1, 1]
    assert [e.data for e in events] == recorded  # the upcaster restores exactly what v2 recorded
    assert pw_main("rebuild", run).code == 0  # the rewrite changed the head every projection is stamped with
    audit = pw_main("audit", run)
    assert audit.code == 0, audit
    assert_refused(pw_main("evaluate", run, "a"), "already has a verdict", run, (run / "ledger.jsonl").read_bytes())


@pytest.mark.slow
def test_audit_names_a_verdict_forged_repairable(tiny_budget_run, tmp_path):
    """Marking the final verdict repairable would buy another attempt; the recomputed verdict says no."""
    run = _repaired_once(tiny_budget_run, tmp_path)

    def forge(env: dict) -> None:
        env["data"]["repairable"] = True

    _rewrite_verdicts(run / "ledger.jsonl", forge)
    assert pw_main("rebuild", run).code == 0
    result = pw_main("audit", run, "--json")
    assert result.code == 1, result
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["chain"]["ok"] and not checks["verdicts"]["ok"]
    assert "candidate a" in checks["verdicts"]["detail"] and "repairable differ" in checks["verdicts"]["detail"]

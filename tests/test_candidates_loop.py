"""The candidate loop end to end on workloads/matmul-c: prepare, evaluate, confirm, status, audit.

The session's started run (tests/conftest.py) is reused; tests that change a run work on a copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger import events as ev
from pw.rules.gates import GATE_NAMES
from tests.conftest import WORKLOADS, apply_patch, copy_run, ledger_events, pw_main, reforge_ledger

BUNDLED = WORKLOADS / "matmul-c" / "candidates"


def of_type(run: Path, kind: type) -> list:
    return [e.data for e in ledger_events(run) if isinstance(e.data, kind)]


@pytest.mark.slow
def test_interchange_is_verified_with_all_six_gates(matmul_interchange):
    run = matmul_interchange
    verdict = [v for v in of_type(run, ev.VerdictReached) if v.id == "a"]
    gates = [g for g in of_type(run, ev.GatesEvaluated) if g.id == "a"]
    assert len(verdict) == 1 and len(gates) == 1
    assert verdict[0].status == "verified", verdict[0].reasons
    assert [g.name for g in gates[0].gates] == list(GATE_NAMES)
    assert all(g.passed for g in gates[0].gates), [g for g in gates[0].gates if not g.passed]
    assert verdict[0].interval[0] > 1.0 and verdict[0].speedup > verdict[0].interval[0]

    status = pw_main("status", run, "--json")
    assert status.code == 0
    row = status.json()["candidates"][0]
    assert row["id"] == "a" and row["status"] == "verified" and row["kept"] is True
    assert row["gates"] == {name: True for name in GATE_NAMES}
    assert status.json()["best"] == "a"
    # Everything the run claims recomputes.
    audit = pw_main("audit", run)
    assert audit.code == 0, audit


@pytest.mark.slow
def test_broken_candidate_is_rejected_oracle_failed(matmul_template, tmp_path):
    run = copy_run(matmul_template, tmp_path)
    assert pw_main("prepare", run, "--candidate", "b:baseline:interchange, off by one").code == 0
    apply_patch(run / "candidates" / "b" / "src", BUNDLED / "broken.patch")
    result = pw_main("evaluate", run, "b", "--json")
    assert result.code == 1, result
    out = result.json()
    assert out["status"] == "rejected"
    assert [r.split(":")[0] for r in out["reasons"]] == ["oracle-failed"]
    assert "vs baseline output" in out["reasons"][0]
    assert out["repairs_left"] == 7  # one failed attempt spends no repair yet: the next evaluate is the repair


# The bundled no-op (noop.patch) is not verified, with correctness passed and significance not: shown by
# tests/test_demo.py on the demo's own evaluation of it (the same patch on the same started workload;
# a second evaluation here ran another campaign of up to 40 pairs for the same claim).


@pytest.mark.slow
def test_confirm_without_fresh_runs_no_new_campaign_only_the_unprofiled_pairs(matmul_interchange, tmp_path):
    """A plain `pw confirm` re-judges the campaign it has, and then times a few unprofiled pairs for
    the report (decision 0021): no new profiled campaign, and no gate reads the unprofiled pairs."""
    run = copy_run(matmul_interchange, tmp_path)
    before = of_type(run, ev.TimingRecorded)
    result = pw_main("confirm", run, "a", "--json")
    assert result.code == 0, result
    out = result.json()
    assert out["launched"] is False and out["fresh"] is False and out["status"] == "verified"
    confirmed = of_type(run, ev.WinnerConfirmed)
    verdict = [v for v in of_type(run, ev.VerdictReached) if v.id == "a"][-1]
    assert len(confirmed) == 1 and confirmed[0].id == "a" and confirmed[0].fresh is False
    assert (confirmed[0].status, confirmed[0].speedup, confirmed[0].interval) == \
        (verdict.status, verdict.speedup, verdict.interval)
    new = of_type(run, ev.TimingRecorded)[len(before):]
    assert [t.purpose for t in new] == ["unprofiled"] and new[0].profiler is None, [t.purpose for t in new]
    assert confirmed[0].timing_seq != max(e.seq for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded))


@pytest.mark.slow
def test_every_profiled_timed_pair_runs_a_fresh_input_never_the_manifests(matmul_interchange):
    """Never on the manifest's own argv, which the oracle and `pw start` ran: a program could tell
    its timed (and so its profiled) runs by it. Both arms of a pair run the same fresh input."""
    events = ledger_events(matmul_interchange)
    manifest = next(e.data for e in events if isinstance(e.data, ev.RunStarted)).contract.run.argv
    timing = next(e.data for e in events if isinstance(e.data, ev.TimingRecorded) and "a" in e.data.targets)
    assert timing.profiler is not None and timing.profiler.adapter == "perf"
    inputs = timing.conditions.pair_inputs
    assert len(inputs) == len(timing.samples["a"]), inputs
    assert all(argv[:2] == manifest[:2] and argv != manifest for argv in inputs), inputs
    assert len({tuple(argv) for argv in inputs}) == len(inputs)  # one fresh seed per pair
    assert not [e for e in events if isinstance(e.data, ev.FaultRecorded) and e.data.target == "a"]


@pytest.mark.slow
def test_confirm_fresh_runs_a_new_confirmation_campaign(matmul_interchange, tmp_path):
    run = copy_run(matmul_interchange, tmp_path)
    before = of_type(run, ev.TimingRecorded)
    result = pw_main("confirm", run, "a", "--fresh", "--json")
    assert result.code in (0, 1), result
    out = result.json()
    assert out["launched"] is True and out["fresh"] is True
    after = of_type(run, ev.TimingRecorded)
    new = after[len(before):]
    # A campaign whose baseline ran slower than when it was last timed alone is followed by the
    # baseline timed alone again (`evaluate.recheck_baseline`): on a noisy host, a second timing.
    # a new profiled campaign, then the unprofiled pairs every confirmation adds (decision 0021)
    purposes = [t.purpose for t in new]
    assert purposes == ["confirmation", "unprofiled"], purposes
    assert new[0].targets == ["baseline", "a"] and len(new[0].samples["a"]) >= 5 and new[0].profiler is not None
    confirmed = of_type(run, ev.WinnerConfirmed)
    assert len(confirmed) == 1 and confirmed[0].fresh is True
    # The confirmation is judged on the new samples, not the screening ones.
    seqs = [e.seq for e in ledger_events(run)
            if isinstance(e.data, ev.TimingRecorded) and e.data.purpose == "confirmation"]
    assert confirmed[0].timing_seq == seqs[-1]
    assert out["status"] == confirmed[0].status


@pytest.mark.slow
def test_audit_names_the_verdict_an_edited_sample_no_longer_supports(matmul_interchange, tmp_path):
    run = copy_run(matmul_interchange, tmp_path)
    path = run / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    edited = 0
    for i, line in enumerate(lines):
        env = json.loads(line)
        if env["type"] == "TimingRecorded" and "a" in env["data"]["targets"]:
            env["data"]["samples"]["a"][0] *= 3.0  # one sample of the candidate, three times slower
            lines[i] = (json.dumps(env, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
            edited += 1
    assert edited == 1
    path.write_bytes(b"".join(lines))

    result = pw_main("audit", run)
    assert result.code == 1, result
    text = result.out + result.err
    failed = [line for line in text.splitlines() if line.startswith("audit failed")]
    assert len(failed) == 1
    assert "candidate a" in failed[0] and "verdict" in failed[0], failed[0]


@pytest.mark.slow
def test_audit_recomputes_the_verdict_even_when_the_chain_is_rewritten(matmul_interchange, tmp_path):
    """A forger who edits a sample and re-hashes the whole chain: the chain passes, the verdict
    recomputation must still name the verdict that no longer follows."""
    import msgspec

    run = copy_run(matmul_interchange, tmp_path)

    def slower_first_pair(data):
        if isinstance(data, ev.TimingRecorded) and "a" in data.targets:
            samples = dict(data.samples)
            samples["a"] = [samples["a"][0] * 3.0, *samples["a"][1:]]
            return msgspec.structs.replace(data, samples=samples)
        return data

    reforge_ledger(run, slower_first_pair)

    result = pw_main("audit", run, "--json")
    assert result.code == 1, result
    checks = {c["name"]: c for c in result.json()["checks"]}
    assert checks["chain"]["ok"]
    assert not checks["verdicts"]["ok"]
    assert "candidate a" in checks["verdicts"]["detail"] and "verdict" in checks["verdicts"]["detail"]


@pytest.mark.slow
def test_a_copied_run_still_audits_clean(matmul_interchange, tmp_path):
    """The tests above work on copies of runs; a copy (a moved run) must still audit clean."""
    run = copy_run(matmul_interchange, tmp_path / "elsewhere")
    result = pw_main("audit", run)
    assert result.code == 0, result


def _rerecord(run: Path, change) -> None:
    """Rewrite the run's ledger with `change(payload) -> payload` applied to every event (a
    re-hashed chain), as an older ProfileWeaver would have written it."""
    from ledger.store import Ledger

    events = ledger_events(run)
    (run / "ledger.jsonl").unlink()
    old = Ledger(run / "ledger.jsonl")
    for env in events:
        old.append(change(env.data), expected_seq=env.seq - 1, actor=env.actor, cause=env.cause)
    assert pw_main("rebuild", run).code == 0  # the projections follow the new chain's head


@pytest.mark.slow
def test_audit_recomputes_gates_under_the_rules_they_were_recorded_with(matmul_interchange, tmp_path):
    """The audit recomputes every recorded gate under the rules it names (here rules 19, what this
    version records; runs judged under rules 1-18 are audited by theirs in tests/test_old_runs.py,
    from recorded ledgers: a campaign of profiled pairs has no reprofile for them to read)."""
    import msgspec

    from pw.rules.gates import GATE_RULES, decode_inputs, evaluate_gates

    run = copy_run(matmul_interchange, tmp_path)
    gates_seen = [g for g in of_type(run, ev.GatesEvaluated)]
    assert gates_seen and all(g.rules == GATE_RULES for g in gates_seen)  # what this version records
    recorded = next(g for g in gates_seen if g.id == "a")
    assert recorded.gates == evaluate_gates(decode_inputs(recorded.inputs, recorded.rules), recorded.rules)
    assert pw_main("audit", run).code == 0

    # The same run with a gate detail no rule writes: the audit names the gates that no longer follow.
    def tampered(data):
        if isinstance(data, ev.GatesEvaluated):
            gates = [msgspec.structs.replace(g, detail=g.detail + " (edited)") if g.name == "mechanism" else g
                     for g in data.gates]
            return msgspec.structs.replace(data, gates=gates)
        return data

    _rerecord(run, tampered)
    result = pw_main("audit", run, "--json")
    assert result.code == 1, result
    detail = {c["name"]: c for c in result.json()["checks"]}["verdicts"]["detail"]
    assert "gates at seq" in detail and "mechanism" in detail


@pytest.mark.slow
def test_rebuild_reproduces_every_run_file_byte_for_byte(matmul_interchange, tmp_path):
    """Every file of a run with a candidate is a projection or evidence: delete them all but the
    ledger and raw/, `pw rebuild`, and the same files come back with the same bytes."""
    run = copy_run(matmul_interchange, tmp_path)
    # workspaces and pw's own bookkeeping (a candidate's lock, the change scanner's scratch), not projections
    workspaces = {"baseline", "build", "candidates/a/src", "raw", "scratch", "logs", "locks", ".scratch.changes"}

    def run_files() -> dict[str, bytes]:
        out = {}
        for path in sorted(run.rglob("*")):
            rel = path.relative_to(run).as_posix()
            if path.is_file() and rel != "ledger.jsonl" and not path.name.startswith(".") \
                    and not any(rel == w or rel.startswith(w + "/") for w in workspaces):
                out[rel] = path.read_bytes()
        return out

    before = run_files()
    for name in ("profile.baseline.json", "variants/a.patch", "candidates/a/profile/profile.json",
                 "report.md", "agent-brief.txt"):
        assert name in before, sorted(before)
    for rel in before:
        (run / rel).unlink()
    assert run_files() == {}
    assert pw_main("rebuild", run).code == 0
    assert run_files() == before
    assert pw_main("audit", run).code == 0

"""`pw evaluate RUN A B ...`: several candidates as one quiet batch.

The end-to-end test starts workloads/matmul-c (the session's template run), prepares two candidates
(`a` the loop interchange, `b` the off-by-one interchange that fails the oracle) and evaluates both
with one `pw evaluate RUN a b --json`: one BatchPlanned before any of their events, every build and
oracle check before the first campaign, `b` judged in the build pass and `a` timed after it, each
result the object a single `pw evaluate` prints, batch-plan.json valid, rebuilt byte for byte, and
`pw audit` clean. The bad-input tests and the projection's plumbing use the recorded H200 run
(tests/data/gpu-loop-h200/transpose-run), which needs no build and no timing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger import events as ev
from pw.app.evaluate import EvaluateResult
from pw.export.schemas import type_for_file
from pw.export.validation import decode_as
from tests.conftest import WORKLOADS, apply_patch, copy_run, ledger_events, pw_main

RECORDED = Path(__file__).parent / "data" / "gpu-loop-h200" / "transpose-run"
SINGLE_KEYS = set(EvaluateResult.__struct_fields__) | {"run_dir"}


@pytest.mark.slow
def test_two_candidates_in_one_quiet_batch(matmul_template, tmp_path):
    run = copy_run(matmul_template, tmp_path)
    assert pw_main("prepare", run, "--candidate", "a:baseline:loop interchange i-k-j",
                   "--candidate", "b:baseline:interchange, k loop one short").code == 0
    patches = WORKLOADS / "matmul-c" / "candidates"
    apply_patch(run / "candidates" / "a" / "src", patches / "interchange.patch")
    apply_patch(run / "candidates" / "b" / "src", patches / "broken.patch")
    before = len(ledger_events(run))

    r = pw_main("evaluate", run, "a", "b", "--json")
    out = r.json()
    assert out["batch"] == {"batch": "batch-1", "candidates": ["a", "b"], "order": ["a", "b"],
                            "mode": "builds-first", "max_pairs": None, "max_time_s": None}, out
    a, b = out["results"]
    assert (a["id"], b["id"]) == ("a", "b")
    assert set(a) == set(b) == SINGLE_KEYS, (set(a) ^ SINGLE_KEYS, set(b) ^ SINGLE_KEYS)
    assert b["status"] == "rejected" and b["repairable"] and any("oracle" in x for x in b["reasons"]), b
    assert a["status"] in ("verified", "proposed", "inconclusive") and a["n_pairs"], a
    assert r.code == 1  # the worst of the two: b's rejection (a's is 0 or 1)

    events = ledger_events(run)[before:]
    kinds = [(e.type, getattr(e.data, "id", None) or getattr(e.data, "target", None)) for e in events]
    assert kinds[0] == ("BatchPlanned", None) and [k for k, _ in kinds].count("BatchPlanned") == 1
    first_timing = next(i for i, e in enumerate(events)
                        if isinstance(e.data, ev.TimingRecorded) and e.data.purpose == "screening")
    # Builds first: both candidates built and oracle-checked before the first campaign's pairs,
    # b judged (its CandidateEvaluated) there too, a's after its campaign.
    for cid in ("a", "b"):
        assert kinds.index(("BuildFinished", cid)) < first_timing
        assert kinds.index(("OracleChecked", cid)) < first_timing
    assert kinds.index(("CandidateEvaluated", "b")) < first_timing < kinds.index(("CandidateEvaluated", "a"))
    assert events[first_timing].data.targets[-1] == "a"
    assert not any(isinstance(e.data, ev.TimingRecorded) and e.data.targets[-1] == "b" for e in events)

    plan = run / "batch-plan.json"
    decode_as(plan.read_bytes(), type_for_file(plan), name=plan.name)
    assert json.loads(plan.read_text())["batches"] == [out["batch"]]
    assert pw_main("validate", plan).code == 0
    written = plan.read_bytes()
    plan.unlink()
    assert pw_main("rebuild", run).code == 0
    assert plan.read_bytes() == written
    audit = pw_main("audit", run)
    assert audit.code == 0, audit


@pytest.fixture
def recorded(tmp_path) -> Path:
    run = Path(shutil.copytree(RECORDED, tmp_path / RECORDED.name))
    assert pw_main("rebuild", run).code == 0  # today's projection format
    return run


@pytest.mark.parametrize("ids, named", [(["nosuch", "tiled"], "'nosuch'"), (["tiled", "tiled"], "'tiled' is given twice"),
                                        (["tiled", "Bad/Id"], "'Bad/Id'")])
def test_a_bad_batch_is_one_line_exit_2_and_appends_nothing(recorded, ids, named):
    ledger = (recorded / "ledger.jsonl").read_bytes()
    r = pw_main("evaluate", recorded, *ids, "--json")
    assert r.code == 2 and r.out == "", r
    assert len(r.err.strip().splitlines()) == 1 and named in r.err and "Traceback" not in r.err, r.err
    assert (recorded / "ledger.jsonl").read_bytes() == ledger
    assert not (recorded / "batch-plan.json").exists()


def test_more_takes_one_candidate(recorded):
    r = pw_main("evaluate", recorded, "tiled", "other", "--more", "5")
    assert r.code == 2 and "--more continues one candidate's campaign" in r.err, r


def test_batch_plan_json_is_a_projection_with_its_schema(recorded):
    """The plumbing alone, on a recorded run: a BatchPlanned (appended as `pw evaluate` appends it)
    gives batch-plan.json, valid, rebuilt byte for byte, audited; a run without one has no such file."""
    from pw.app.run import RunHandle

    assert not (recorded / "batch-plan.json").exists()
    handle = RunHandle(recorded)
    handle.record(handle.state(), [ev.BatchPlanned(batch="batch-1", candidates=["tiled"], order=["tiled"],
                                                   mode="builds-first", max_pairs=12)])
    plan = recorded / "batch-plan.json"
    doc = json.loads(plan.read_text())
    assert doc["batches"] == [{"batch": "batch-1", "candidates": ["tiled"], "order": ["tiled"],
                               "mode": "builds-first", "max_pairs": 12, "max_time_s": None}]
    assert pw_main("validate", plan).code == 0
    written = plan.read_bytes()
    plan.unlink()
    assert pw_main("audit", recorded).code == 1  # a deleted projection is caught
    assert pw_main("rebuild", recorded).code == 0 and plan.read_bytes() == written
    assert pw_main("audit", recorded).code == 0


"""The significance gate compares the declared inputs, not a digest that is always equal.

A candidate that edits its declared input so that the program does less work (here: fewer
repetitions, the same printed result) is faster and passes the oracle, but it was not timed on the
baseline's inputs: the inputs digest recorded by its campaign differs from the baseline's, and the
significance gate fails naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger import events as ev
from tests.conftest import ledger_events, pw_main, start_run

MAIN = '''\
import sys

def work(n):
    total = 0
    for i in range(n):
        total += (i * i) % 7
    return total

reps = int(open("data/reps.txt").read())
for _ in range(reps):
    work(20000)
print("result", work(1000))
'''


def _workload(root: Path) -> Path:
    w = root / "reps-workload"
    (w / "data").mkdir(parents=True)
    (w / "main.py").write_text(MAIN)
    (w / "data" / "reps.txt").write_text("60\n")
    (w / "reference").mkdir()
    (w / "reference" / "stdout.txt").write_text("result 2001\n")
    (w / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "reps", "source": {"editable": ["main.py", "data/reps.txt"]},
        "run": {"argv": ["python3", "main.py"], "timeout_s": 60}, "inputs": ["data/reps.txt"],
        "oracle": {"kind": "stdout", "reference": "reference/stdout.txt"},
    }))
    return w


@pytest.mark.slow
def test_a_changed_input_file_fails_significance(tmp_path):
    run = start_run(_workload(tmp_path), tmp_path / "runs")
    assert pw_main("prepare", run, "--candidate", "fewer:baseline:do less work").code == 0
    (run / "candidates" / "fewer" / "src" / "data" / "reps.txt").write_text("10\n")
    result = pw_main("evaluate", run, "fewer", "--json")
    assert result.code == 1, result
    assert result.json()["status"] != "verified"
    gates = next(e.data for e in ledger_events(run) if isinstance(e.data, ev.GatesEvaluated))
    significance = next(g for g in gates.gates if g.name == "significance")
    assert not significance.passed and "inputs_sha256 differs" in significance.detail, significance.detail
    timing = [e.data for e in ledger_events(run) if isinstance(e.data, ev.TimingRecorded)]
    baseline_inputs = timing[0].conditions.arms["baseline"].inputs_sha256
    timed = [t for t in timing if "fewer" in t.targets]  # not a baseline recheck
    faults = [(e.data.failure_class, e.data.message) for e in ledger_events(run) if isinstance(e.data, ev.FaultRecorded)]
    assert timed, (result.json()["reasons"], faults)  # one CI run had no campaign here: say why next time
    campaign = timed[-1].conditions.arms
    assert baseline_inputs and campaign["baseline"].inputs_sha256 == baseline_inputs
    assert campaign["fewer"].inputs_sha256 != baseline_inputs

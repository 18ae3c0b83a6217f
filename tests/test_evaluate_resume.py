"""An interrupted `pw evaluate` continues its attempt, and a second one at once does nothing.

`pw evaluate` is SIGKILLed at five points of a real evaluation (the build, the oracle, the middle of
the timing campaign, just after the campaign was recorded, and during the exact-count capture that
took the reprofile's place), then run again. Each stage's events must appear once in the attempt
(nothing built, drawn, checked, timed or captured twice), the verdict must be the kind an
uninterrupted evaluation gives, and `pw audit` must pass. A second `pw evaluate` of a candidate
being evaluated is refused before it does anything, naming the holder.

The workload sums `i % 7` over N (about 25 ms at N = 3e7: too short for perf's samples to rank its
lines, so the diagnosis climbs to callgrind and the candidate gets that capture); the candidate sums
the second half by the closed formula, about 2x faster, so an uninterrupted evaluation is verified,
far from the changed code's Amdahl ceiling (a 15x candidate sat on it and flipped by noise). Its oracle draws
fresh holdout sizes, so the holdouts stage is exercised too.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from ledger import events as ev
from tests.conftest import copy_run, ledger_events, pw_main, start_run
from tests.faultkit import killed_at, stopped_at

pytestmark = pytest.mark.slow

SLOW_SUM = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    unsigned long n = strtoul(argv[1], NULL, 10), s = 0;
    for (unsigned long i = 0; i < n; i++)
        s += i % 7;
    printf("sum %lu\n", s);
    return 0;
}
"""

# Half the sum by the loop, the other half (from a multiple of 7) by the closed formula: about 2x,
# far inside the Amdahl ceiling of the changed code (about 16x here: all but the process's start).
# A candidate that removed the whole loop (15x) sat on that ceiling and its verdict flipped by noise.
FAST_SUM = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    unsigned long n = strtoul(argv[1], NULL, 10), half = n / 2 - (n / 2) % 7, s = 0;
    for (unsigned long i = 0; i < half; i++)
        s += i % 7;
    s += ((n - half) / 7) * 21;
    for (unsigned long r = 0; r < (n - half) % 7; r++)
        s += r;
    printf("sum %lu\n", s);
    return 0;
}
"""


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """A started, profiled run of the sum workload with candidate `fast` prepared and edited."""
    root = tmp_path_factory.mktemp("resume")
    workload = root / "workload"
    workload.mkdir()
    (workload / "sum.c").write_text(SLOW_SUM)
    (workload / "Makefile").write_text("sum: sum.c\n\tcc -O1 -o sum sum.c\n")
    (workload / "profileweaver.json").write_text(json.dumps({
        "version": 1, "name": "sum", "source": {"editable": ["sum.c"]},
        "build": [{"argv": ["make"], "timeout_s": 60}],
        "run": {"argv": ["./sum", "30000000"], "timeout_s": 20},
        "metric": {"kind": "wall"},
        "oracle": {"kind": "baseline", "generators": [
            {"argv": ["./sum", "{n}"], "ranges": {"n": [1000, 2000000]}, "count": 2, "seed": None}]},
        "sampling": {"mode": "standard", "pairs": 5},
        "profiling": {"cadence": "every-candidate"},
    }))
    run = start_run(workload, root / "runs")
    assert pw_main("prepare", run, "--candidate", "fast:baseline:the closed formula").code == 0
    (run / "candidates" / "fast" / "src" / "sum.c").write_text(FAST_SUM)
    return run


@pytest.fixture(scope="module")
def uninterrupted(prepared, tmp_path_factory) -> dict:
    run = copy_run(prepared, tmp_path_factory.mktemp("whole"))
    result = pw_main("evaluate", run, "fast", "--json")
    assert result.code == 0, result
    return result.json()


def stage_counts(run: Path, cid: str = "fast") -> Counter:
    """How many times each stage of `cid`'s evaluation was recorded."""
    counts: Counter = Counter()
    for e in ledger_events(run):
        d = e.data
        if isinstance(d, (ev.CandidateDiffRecorded, ev.VerdictReached, ev.AttemptAbandoned)) and d.id == cid:
            counts[type(d).__name__] += 1
        elif isinstance(d, (ev.BuildFinished, ev.HoldoutsDrawn, ev.OracleChecked, ev.ProfileCaptured)) \
                and d.target == cid:
            counts[type(d).__name__] += 1
        elif isinstance(d, ev.TimingRecorded) and d.targets[-1] == cid:
            counts[f"TimingRecorded:{d.purpose}"] += 1
    return counts


def why_no_capture(run: Path) -> str:
    """What the exact-count channel's cost model says for this run now (a failure's context: the
    capture is skipped when its estimated cost exceeds the reprofile budget)."""
    from pw.app.diagnosis import diagnosis_adapter
    from pw.app.run import RunHandle

    handle = RunHandle(run)
    state = handle.state()
    said: list[str] = []
    chosen = diagnosis_adapter(handle, state, state.routing["discovery"].chosen, said.append)
    faults = [f"{e.data.stage}/{e.data.failure_class}: {e.data.message}" for e in ledger_events(run)
              if isinstance(e.data, ev.FaultRecorded)]  # a capture that failed leaves one
    return f"diagnosis adapter {chosen!r}; {'; '.join(said) or 'no message'}; faults: {faults}"


ONCE = {"CandidateDiffRecorded": 1, "BuildFinished": 1, "HoldoutsDrawn": 1, "OracleChecked": 1,
        "TimingRecorded:screening": 1, "ProfileCaptured": 1, "VerdictReached": 1}

# (where it is killed: "module:attribute" and which call; what the killed attempt has recorded; what
# the second `pw evaluate` says it reused)
POINTS = {
    "build": ("pw.workload.steps:build", 1, set(), []),
    "oracle": ("pw.workload.correctness:check", 1, {"BuildFinished", "HoldoutsDrawn"}, ["build", "holdouts"]),
    "mid-campaign": ("pw.app.campaign:timed_run", 4, {"BuildFinished", "HoldoutsDrawn", "OracleChecked"},
                     ["build", "holdouts", "oracle"]),
    "after-timing": ("pw.app.evaluate:_diagnose", 1,
                     {"BuildFinished", "HoldoutsDrawn", "OracleChecked", "TimingRecorded:screening"},
                     ["build", "holdouts", "oracle", "timing"]),
    "during-the-capture": ("pw.workload.capture:capture", 1,
                           {"BuildFinished", "HoldoutsDrawn", "OracleChecked", "TimingRecorded:screening"},
                           ["build", "holdouts", "oracle", "timing"]),
}


def test_an_uninterrupted_evaluation_records_each_stage_once(prepared, uninterrupted, tmp_path):
    assert uninterrupted["status"] == "verified", uninterrupted
    assert uninterrupted["resumed"] == []


@pytest.mark.parametrize("point", sorted(POINTS))
def test_sigkill_then_evaluate_again_continues_the_attempt(point, prepared, uninterrupted, tmp_path):
    target, k, recorded, reused = POINTS[point]
    run = copy_run(prepared, tmp_path)
    killed = killed_at(target, k, "evaluate", run, "fast")
    assert killed.code == -signal.SIGKILL, killed
    before = stage_counts(run)
    assert set(before) - {"CandidateDiffRecorded"} == recorded, before

    again = pw_main("evaluate", run, "fast", "--json")
    assert again.code in (0, 1), again
    doc = again.json()
    assert doc["attempt"] == 1 and doc["resumed"] == reused, doc
    assert stage_counts(run) == ONCE, (stage_counts(run), why_no_capture(run))
    assert doc["status"] == uninterrupted["status"], doc
    audit = pw_main("audit", run)
    assert audit.code == 0, audit


def test_an_edited_workspace_closes_the_interrupted_attempt_and_starts_a_new_one(prepared, tmp_path):
    run = copy_run(prepared, tmp_path)
    assert killed_at("pw.workload.correctness:check", 1, "evaluate", run, "fast").code == -signal.SIGKILL
    src = run / "candidates" / "fast" / "src" / "sum.c"
    src.write_text(src.read_text().replace("return 0;", "return 0; /* edited */"))
    again = pw_main("evaluate", run, "fast", "--json")
    doc = again.json()
    assert doc["attempt"] == 2 and doc["resumed"] == [], doc
    abandoned = [e.data for e in ledger_events(run) if isinstance(e.data, ev.AttemptAbandoned)]
    assert [(a.id, a.attempt) for a in abandoned] == [("fast", 1)]
    assert "edited since" in abandoned[0].reason
    assert pw_main("audit", run).code == 0


def test_a_second_evaluate_of_the_same_candidate_is_refused_before_doing_anything(prepared, tmp_path):
    run = copy_run(prepared, tmp_path)
    first = stopped_at("pw.workload.steps:build", 1, "evaluate", run, "fast")
    try:
        ledger_before = (run / "ledger.jsonl").read_bytes()
        second = pw_main("evaluate", run, "fast")
        assert second.code == 4, second
        assert f"being evaluated by pid {first.pid}" in second.err and "nothing was done" in second.err, second
        assert len(second.err.strip().splitlines()) == 1, second
        assert (run / "ledger.jsonl").read_bytes() == ledger_before  # nothing appended, nothing orphaned
        assert not (run / "build" / "fast").exists()  # and nothing built
    finally:
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert stage_counts(run) == ONCE, (stage_counts(run), why_no_capture(run))
    assert pw_main("audit", run).code == 0

"""An interrupted `pw start` resumed with `--resume RUN` ends where an uninterrupted one does, with
no stage recorded twice; an unchanged workload reuses the cached preflight."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.store import Ledger
from pw.app.run import RunHandle

pytestmark = pytest.mark.usefixtures("fast_preflight")

REPO = Path(__file__).resolve().parents[1]
STAGES = ("preflight", "build", "oracle", "baseline-timing")  # with --no-profile

PROG_C = r"""
#include <stdio.h>
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    double s = 0;
    for (int i = 1; i <= n; i++) s += 1.0 / ((double)i * i);
    printf("n %d\nsum %.15f\n", n, s);
    return 0;
}
"""
MANIFEST = {
    "version": 1,
    "name": "resume-me",
    "source": {"editable": ["prog.c"]},
    "build": [{"argv": ["cc", "-O1", "-include", "stdlib.h", "-o", "prog", "prog.c"], "timeout_s": 60}],
    "run": {"argv": ["./prog"], "timeout_s": 20},
    "oracle": {"kind": "stdout", "reference": "ref/out.txt",
               "holdout": [{"argv": ["./prog", "7"], "reference": "ref/out-7.txt"}]},
}


def _sum(n: int) -> str:
    return f"n {n}\nsum {sum(1.0 / (i * i) for i in range(1, n + 1)):.15f}\n"


_SHARED: dict[str, Path] = {}


@pytest.fixture
def reference(pw_cli, tmp_path_factory) -> dict[str, Path]:
    """The workload (read only) and one uninterrupted run of it, made once per module."""
    if not _SHARED:
        root = tmp_path_factory.mktemp("resume-ref")
        wl = root / "workload"
        (wl / "ref").mkdir(parents=True)
        (wl / "prog.c").write_text(PROG_C)
        (wl / "ref" / "out.txt").write_text(_sum(2000))
        (wl / "ref" / "out-7.txt").write_text(_sum(7))
        (wl / "profileweaver.json").write_text(json.dumps(MANIFEST))
        r = pw_cli("start", "--workload", wl, "--runs-dir", root / "runs", "--no-profile")
        assert r.code == 0, r
        _SHARED.update(workload=wl, runs=root / "runs", run=_only_run(root / "runs"))
    return _SHARED


def _only_run(runs: Path) -> Path:
    found = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert len(found) == 1, found
    return found[0]


# Values that legitimately differ between two runs of the same start: clocks, durations, timing
# samples and their statistics, the run id, the ledger head's hash (it chains the timestamps), the
# binary's hash (the build directory's path is in its debug info), what hashes that binary, and
# whether the preflight came from the cache (an interrupted preflight leaves its cache entry).
# bench.*.json (issue 30) repeats the samples' summary and the seeded order of the pairs.
_VOLATILE = {"at", "duration_s", "wall_s", "mean", "cv", "samples", "max_rss_kb", "hash", "run_id", "cached",
             "binary_sha256",
             # bench.*.json's summary of the samples, and the campaign's seeded run order
             "median", "min", "max", "seed", "order"}


def _mask(value, run: Path):
    if isinstance(value, dict):
        return {k: "<masked>" if k in _VOLATILE else _mask(v, run) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, run) for v in value]
    if isinstance(value, str):
        return value.replace(str(run), "<run>").replace(run.name, "<run-id>")
    return value


def _projections(run: Path) -> dict[str, object]:
    return {p.name: _mask(json.loads(p.read_text()), run) for p in sorted(run.glob("*.json"))}


def _stage_counts(run: Path) -> Counter:
    return Counter(e.data.stage for e in Ledger(run / "ledger.jsonl").events() if isinstance(e.data, ev.StageCompleted))


def _types(run: Path) -> list[str]:
    return [e.type for e in Ledger(run / "ledger.jsonl").events()]


def assert_same_end(run: Path, ref: Path, pw_cli) -> None:
    assert Ledger(run / "ledger.jsonl").verify().ok
    assert _stage_counts(run) == Counter(STAGES), _stage_counts(run)
    assert _types(run) == _types(ref)
    # A SIGKILL in the middle of a projection write can leave its hidden temp file behind
    # (`.preflight.json.<random>`); the resumed run's first projection write removes it, so the
    # same files remain, down to the projection lock.
    assert sorted(p.name for p in run.iterdir()) == sorted(p.name for p in ref.iterdir())
    assert _projections(run) == _projections(ref)
    audit = pw_cli("audit", run)
    assert audit.code == 0, audit


@pytest.mark.parametrize("when", ["before", "between", "after"])
@pytest.mark.parametrize("k", [2, 3, 4, 5])  # the k-th recorded batch: preflight, build, oracle, timing
def test_interrupt_at_each_stage_then_resume(pw_cli, reference, tmp_path, monkeypatch, k, when):
    """Ctrl-C while the k-th batch is about to be appended (`before`), after the append but before
    the projections are rewritten (`between`), or just after both (`after`)."""
    original, original_materialize = RunHandle.record, RunHandle.materialize
    calls = {"n": 0}

    def record(self, current, payloads, **kw):
        calls["n"] += 1
        if calls["n"] == k and when == "before":
            raise KeyboardInterrupt
        out = original(self, current, payloads, **kw)
        if calls["n"] == k and when == "after":
            raise KeyboardInterrupt
        return out

    def materialize(self, state):
        if calls["n"] == k and when == "between":
            raise KeyboardInterrupt
        return original_materialize(self, state)

    monkeypatch.setattr(RunHandle, "materialize", materialize)
    monkeypatch.setattr(RunHandle, "record", record)
    runs = tmp_path / "runs"
    r = pw_cli("start", "--workload", reference["workload"], "--runs-dir", runs, "--no-profile")
    assert r.code == 130 and r.err.count("\n") == 1 and "interrupted" in r.err, r
    monkeypatch.setattr(RunHandle, "record", original)
    monkeypatch.setattr(RunHandle, "materialize", original_materialize)
    run = _only_run(runs)
    done_before = set(_stage_counts(run))
    assert len(done_before) == k - 1 - (when == "before")

    r = pw_cli("start", "--resume", run, "--no-profile", "--json")
    assert r.code == 0, r
    result = json.loads(r.out)
    assert set(result["skipped"]) == done_before
    assert set(result["completed"]) == set(STAGES) - done_before
    assert_same_end(run, reference["run"], pw_cli)


def test_interrupt_before_the_first_event_leaves_nothing(pw_cli, reference, tmp_path, monkeypatch):
    def record(self, current, payloads, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(RunHandle, "record", record)
    runs = tmp_path / "runs"
    r = pw_cli("start", "--workload", reference["workload"], "--runs-dir", runs, "--no-profile")
    assert r.code == 130, r
    assert not runs.exists() or list(runs.iterdir()) == []  # not even a .partial directory


def test_sigkill_at_a_random_event_then_resume(pw_cli, reference, tmp_path):
    """A real `pw start` process killed with SIGKILL once its ledger holds a random number of events."""
    seed = int(os.environ.get("PW_TEST_SEED") or random.randrange(1 << 30))
    target = random.Random(seed).randint(1, 2 * len(STAGES))  # 1 + 2 events per stage in all
    runs = tmp_path / "runs"
    # A warm preflight cache (as on any machine that ran pw start before) keeps the child fast.
    shutil.copytree(reference["runs"] / ".preflight-cache", runs / ".preflight-cache")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pw.cli", "start", "--workload", str(reference["workload"]), "--runs-dir",
         str(runs), "--no-profile"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    seen, deadline = 0, time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            # The run directory under its final name (a `.partial` one holds RunStarted until renamed).
            ledgers = [p for p in runs.glob("*/ledger.jsonl") if not p.parent.name.startswith(".")]
            seen = ledgers[0].read_bytes().count(b"\n") if ledgers else 0
            if seen >= target:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err, err
    why = f"seed={seed} (PW_TEST_SEED) target={target} seen={seen} rc={proc.returncode}"
    run = _only_run(runs)
    r = pw_cli("start", "--resume", run, "--no-profile", "--json")
    assert r.code == 0, (why, r)
    assert_same_end(run, reference["run"], pw_cli)


def test_resume_of_a_finished_run_records_nothing(pw_cli, reference, tmp_path):
    run = tmp_path / reference["run"].name
    shutil.copytree(reference["run"], run, symlinks=True)
    before = (run / "ledger.jsonl").read_bytes()
    r = pw_cli("start", "--resume", run / "experiment-plan.json", "--no-profile", "--json")
    assert r.code == 0, r
    assert json.loads(r.out)["skipped"] == list(STAGES)
    assert (run / "ledger.jsonl").read_bytes() == before


def test_second_start_reuses_the_cached_preflight(pw_cli, reference, tmp_path):
    runs = tmp_path / "runs"
    cached = []
    for _ in range(2):
        r = pw_cli("start", "--workload", reference["workload"], "--runs-dir", runs, "--no-profile", "--json")
        assert r.code == 0, r
        run = Path(json.loads(r.out)["run_dir"])
        pre = [e.data for e in Ledger(run / "ledger.jsonl").events() if isinstance(e.data, ev.PreflightCompleted)]
        assert len(pre) == 1
        cached.append(pre[0].cached)
    assert cached == [False, True]


def test_changed_source_misses_the_preflight_cache(pw_cli, reference, tmp_path):
    wl = tmp_path / "wl"
    shutil.copytree(reference["workload"], wl)
    runs = tmp_path / "runs"
    shutil.copytree(reference["runs"] / ".preflight-cache", runs / ".preflight-cache")
    with open(wl / "prog.c", "a") as f:
        f.write("/* edited */\n")
    r = pw_cli("start", "--workload", wl, "--runs-dir", runs, "--no-profile", "--json")
    assert r.code == 0, r
    run = Path(json.loads(r.out)["run_dir"])
    pre = [e.data for e in Ledger(run / "ledger.jsonl").events() if isinstance(e.data, ev.PreflightCompleted)]
    assert [p.cached for p in pre] == [False]


def test_deleted_build_tree_is_rebuilt_under_the_same_stage_hash(pw_cli, reference, tmp_path):
    """The build stage's record holds only while its output tree exists: with build/ deleted, a
    resume builds again under the same inputs hash (no clock in it) and a Note says why."""
    run = tmp_path / reference["run"].name
    shutil.copytree(reference["run"], run, symlinks=True)
    shutil.rmtree(run / "build")
    r = pw_cli("start", "--resume", run, "--no-profile", "--json")
    assert r.code == 0, r
    assert "build" in json.loads(r.out)["completed"]
    assert (run / "build" / "baseline" / "prog").is_file()

    events = list(Ledger(run / "ledger.jsonl").events())
    builds = [e.data.inputs_sha256 for e in events if isinstance(e.data, ev.StageCompleted) and e.data.stage == "build"]
    assert len(builds) == 2 and builds[0] == builds[1], builds
    redo = next(i for i, e in enumerate(events) if isinstance(e.data, ev.Note))
    assert "'build' redone" in events[redo].data.text and "build/baseline/ is missing" in events[redo].data.text
    assert [e.type for e in events[redo:redo + 3]] == ["Note", "BuildFinished", "StageCompleted"]
    assert len({e.seq for e in events[redo:redo + 3]}) == 3 and pw_cli("audit", run).code == 0

    before = (run / "ledger.jsonl").read_bytes()
    r = pw_cli("start", "--resume", run, "--no-profile", "--json")
    assert r.code == 0 and json.loads(r.out)["skipped"] == list(STAGES), r
    assert (run / "ledger.jsonl").read_bytes() == before


def test_redo_is_decided_only_for_a_recorded_stage(reference):
    from ledger.errors import RejectedCommand
    from pw.rules import stages as decide

    state = RunHandle(reference["run"]).state()
    inputs = state.stages["build"]
    built = state.builds["baseline"]
    with pytest.raises(RejectedCommand, match="already recorded"):
        decide.decide_stage(state, "build", inputs, [built])
    with pytest.raises(RejectedCommand, match="nothing to redo"):
        decide.decide_stage(state, "build", "0" * 64, [built], redo="gone")
    out = decide.decide_stage(state, "build", inputs, [built], redo="its output tree build/baseline/ is missing")
    assert out == [ev.Note(text=decide.redo_note("build", "its output tree build/baseline/ is missing")), built,
                   ev.StageCompleted(stage="build", inputs_sha256=inputs)]

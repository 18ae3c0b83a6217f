"""Cheats that containment and per-run output checks turn into rejections (issue 12, classes 1-3, 5, 6, 8).

Each test puts one dishonest ``matmul.c`` from tests/data/cheats/matmul-c/ (its header comment says
what it does) into a candidate of a copy of the session's started matmul-c run, evaluates it with
the real ``pw``, and requires ``rejected`` with a reason that says what the candidate did, and no
speedup headline. Before the sandbox, every one of them was verified, proposed or inconclusive.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ledger import events as ev
from tests.conftest import WORKLOADS, apply_patch, copy_run, ledger_events, pw_main

CHEATS = Path(__file__).resolve().parent / "data" / "cheats" / "matmul-c"
PATCHES = Path(__file__).resolve().parent / "data" / "candidates" / "matmul-c"

pytestmark = pytest.mark.slow


def evaluate_source(template: Path, tmp_path: Path, source: str, cid: str = "c") -> tuple[Path, dict]:
    run = copy_run(template, tmp_path)
    assert pw_main("prepare", run, "--candidate", f"{cid}:baseline:{source}").code == 0
    shutil.copyfile(CHEATS / source, run / "candidates" / cid / "src" / "matmul.c")
    return run, _evaluate(run, cid)


def _evaluate(run: Path, cid: str) -> dict:
    result = pw_main("evaluate", run, cid, "--json")
    assert result.code in (0, 1), result
    return result.json()


def assert_rejected_for(out: dict, *words: str) -> str:
    """Rejected, one reason naming all ``words``, and no speedup claimed anywhere in the reasons."""
    assert out["status"] == "rejected", out["reasons"]
    text = " | ".join(out["reasons"])
    for word in words:
        assert word in text, (word, out["reasons"])
    assert "speedup" not in text.lower(), out["reasons"]
    return text


def leftover_host_processes(run: Path) -> list[str]:
    """Processes on the host whose working directory is inside the run (none may outlive a run)."""
    found = []
    root = str(run.resolve())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.startswith(root):
            found.append(f"{pid} {cwd}")
    return found


def test_class1_a_timed_run_cannot_be_told_from_the_oracle_run(matmul_template, tmp_path):
    """It computes only when its stdout is a file named like an oracle run's: with pipes everywhere
    no run looks checked, so it skips work in the oracle run too and fails there."""
    run, out = evaluate_source(matmul_template, tmp_path, "class1-stdout-name.c")
    assert_rejected_for(out, "oracle-failed:")
    assert not any(isinstance(e.data, ev.TimingRecorded) and "c" in e.data.targets for e in ledger_events(run))


def test_class2_a_cache_in_dev_shm_that_hides_from_tracers_is_rejected(matmul_template, tmp_path):
    """Caches C in /dev/shm whenever TracerPid is 0: in the sandbox every run starts with an empty
    /dev/shm, and the file it left there is what rejects it."""
    _, out = evaluate_source(matmul_template, tmp_path, "class2-shm-untraced.c")
    assert_rejected_for(out, "/dev/shm/pw-mm-720-", "outside its tree")


def test_class3_reading_the_references_at_run_time_finds_nothing(matmul_template, tmp_path):
    """Reads ../../baseline/reference/*.txt and, through ../../ledger.jsonl, the workload's own
    reference/: neither is mounted in the sandbox, so it has nothing to copy and fails the oracle."""
    run, out = evaluate_source(matmul_template, tmp_path, "class3-read-reference.c")
    assert_rejected_for(out, "oracle-failed:")


def test_class3_embedding_a_reference_at_build_time_does_not_build(matmul_template, tmp_path):
    """`.incbin "../../baseline/reference/stdout.txt"`: the build runs in the sandbox too, where the
    baseline tree does not exist."""
    run, out = evaluate_source(matmul_template, tmp_path, "class3-incbin.c")
    assert_rejected_for(out, "build-failed:")
    built = [e.data for e in ledger_events(run) if isinstance(e.data, ev.BuildFinished) and e.data.target == "c"]
    assert built and built[-1].outcome == "build-failed"


def test_class5_work_in_a_detached_child_is_rejected(matmul_template, tmp_path):
    """Exits at once and leaves a setsid'd grandchild to compute and print: the grandchild dies
    with the run's PID namespace, and the process it left is named in the reason."""
    run, out = evaluate_source(matmul_template, tmp_path, "class5-detached-child.c")
    assert_rejected_for(out, "left", "running")
    assert leftover_host_processes(run) == []


def test_class6_a_left_process_cannot_stop_the_baseline(matmul_template, tmp_path):
    """The baseline's own code plus a daemon that SIGSTOPs the baseline's processes: in the sandbox
    it sees no other process, dies with its run, and leaving it behind rejects the candidate."""
    run, out = evaluate_source(matmul_template, tmp_path, "class6-stop-the-baseline.c")
    assert_rejected_for(out, "left", "running")
    assert leftover_host_processes(run) == []


def test_class8_a_cache_in_the_tree_is_rejected_with_the_file_named(matmul_template, tmp_path):
    """cache-file.patch (./.matmul-cache-720-1.bin): caught before, but inconclusive with a reason
    that never said so. Now: rejected, the reason names the file."""
    run = copy_run(matmul_template, tmp_path)
    assert pw_main("prepare", run, "--candidate", "c:baseline:cache").code == 0
    apply_patch(run / "candidates" / "c" / "src", PATCHES / "cache-file.patch")
    out = _evaluate(run, "c")
    assert_rejected_for(out, ".matmul-cache-720-1.bin")


def test_class8_a_cache_in_tmp_is_rejected_not_proposed(matmul_template, tmp_path):
    """The /tmp variant of class 2: before, `proposed` with the headline "speedup 3.03x"."""
    _, out = evaluate_source(matmul_template, tmp_path, "class2-tmp-untraced.c")
    assert_rejected_for(out, "/tmp/pw-mm-720-", "outside its tree")


def test_the_legitimate_interchange_is_still_verified_in_the_sandbox(matmul_interchange):
    verdict = [e.data for e in ledger_events(matmul_interchange)
               if isinstance(e.data, ev.VerdictReached) and e.data.id == "a"][-1]
    assert verdict.status == "verified", verdict.reasons
    assert (WORKLOADS / "matmul-c" / "candidates" / "interchange.patch").is_file()

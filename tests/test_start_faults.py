"""`pw start` on planted faulty programs: each fault class is recorded in the ledger, reported as
one line on stderr with exit 1, and leaves a ledger that verifies and audits clean."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ledger import events as ev
from ledger.store import Ledger

pytestmark = pytest.mark.usefixtures("fast_preflight")

HANG_C = r"""
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (fork() == 0) {                 /* a child that outlives a polite SIGTERM */
        signal(SIGTERM, SIG_IGN);
        FILE *f = fopen(argv[1], "w");  /* in a sandbox this path is not there: no pid file */
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
        for (;;) pause();
    }
    for (;;) pause();
}
"""

SEGV_C = r"""
#include <stdio.h>
int main(void) {
    volatile int *p = 0;
    puts("about to crash");
    fflush(stdout);
    *p = 42;
    return 0;
}
"""

WRONG_C = r"""
#include <stdio.h>
int main(void) { printf("checksum 3.141592653589\n"); return 0; }
"""

NONDET_C = r"""
#include <stdio.h>
#include <time.h>
#include <unistd.h>
int main(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    printf("pid %d ns %ld\n", (int)getpid(), (long)t.tv_nsec);
    return 0;
}
"""

BROKEN_C = "int main(void) { return 0 }  /* missing semicolon */\n"


def manifest(**over) -> dict:
    doc = {
        "version": 1,
        "name": "planted",
        "source": {"editable": ["main.c"]},
        "build": [{"argv": ["cc", "-O0", "-o", "main", "main.c"], "timeout_s": 60}],
        "run": {"argv": ["./main"], "timeout_s": 30},
        "oracle": {"kind": "exit"},
    }
    doc.update(over)
    return doc


def workload(root: Path, files: dict[str, str], doc: dict | None) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).write_text(text)
    if doc is not None:
        (root / "profileweaver.json").write_text(json.dumps(doc))
    return root


def only_run(runs: Path) -> Path:
    found = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert len(found) == 1, found
    return found[0]


def assert_fault(pw_cli, wl: Path, runs: Path, failure_class: str, stage: str) -> ev.FaultRecorded:
    r = pw_cli("start", "--workload", wl, "--runs-dir", runs, "--no-profile")
    assert r.code == 1, r
    assert "Traceback" not in r.err
    assert r.err.endswith("\n") and r.err.count("\n") == 1, r.err
    assert r.err.startswith("pw start: ") and failure_class in r.err, r.err
    run = only_run(runs)
    ledger = Ledger(run / "ledger.jsonl")
    assert ledger.verify().ok
    faults = [e.data for e in ledger.events() if isinstance(e.data, ev.FaultRecorded)]
    assert [(f.failure_class, f.stage) for f in faults] == [(failure_class, stage)]
    completed = [e.data.stage for e in ledger.events() if isinstance(e.data, ev.StageCompleted)]
    assert stage not in completed
    audit = pw_cli("audit", run)
    assert audit.code == 0, audit
    return faults[0]


def _running_with_arg(arg: str) -> list[int]:
    """Live processes with ``arg`` among their arguments."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if arg.encode() in args and _alive(int(entry)):
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie is dead, only not yet reaped by its new parent


def test_hang_is_a_timeout_and_the_process_group_dies(pw_cli, tmp_path):
    pidfile = tmp_path / "child.pid"
    doc = manifest(run={"argv": ["./main", str(pidfile)], "timeout_s": 1})
    wl = workload(tmp_path / "hang", {"main.c": HANG_C}, doc)
    started = time.monotonic()
    fault = assert_fault(pw_cli, wl, tmp_path / "runs", "timeout", "oracle")
    assert time.monotonic() - started < 20
    assert "timed out after 1 s" in fault.message
    # The child's pid as the host sees it (in a sandbox it has another one inside, and the pid
    # file it writes is not seen outside): found by its argv, which names this test's path.
    deadline = time.monotonic() + 5
    while (left := _running_with_arg(str(pidfile))) and time.monotonic() < deadline:
        time.sleep(0.05)
    for child in left:
        os.kill(child, 9)  # do not leave it behind even when the test fails
    if left:
        pytest.fail(f"the hung workload's child {left} survived the timeout")


def test_segfault_is_crashed(pw_cli, tmp_path):
    wl = workload(tmp_path / "segv", {"main.c": SEGV_C}, manifest())
    fault = assert_fault(pw_cli, wl, tmp_path / "runs", "crashed", "oracle")
    assert "SIGSEGV" in fault.message


def test_wrong_numbers_fail_the_oracle(pw_cli, tmp_path):
    doc = manifest(oracle={"kind": "stdout", "reference": "expected.txt", "rtol": 1e-9})
    wl = workload(tmp_path / "wrong", {"main.c": WRONG_C, "expected.txt": "checksum 2.718281828459\n"}, doc)
    fault = assert_fault(pw_cli, wl, tmp_path / "runs", "oracle-failed", "oracle")
    assert "expected.txt" in fault.message


def test_unstable_output_without_a_manifest_is_nondeterministic(pw_cli, tmp_path):
    wl = workload(tmp_path / "nondet", {"main.c": NONDET_C}, None)  # inferred `stable` oracle
    fault = assert_fault(pw_cli, wl, tmp_path / "runs", "nondeterministic-output", "oracle")
    assert "differs between two identical runs" in fault.message


def test_compile_error_is_build_failed(pw_cli, tmp_path):
    wl = workload(tmp_path / "broken", {"main.c": BROKEN_C}, manifest())
    fault = assert_fault(pw_cli, wl, tmp_path / "runs", "build-failed", "build")
    assert fault.log_sha256  # the compiler's output is kept as evidence
    run = only_run(tmp_path / "runs")
    log = (run / "raw").rglob("*")
    assert any(b"error" in p.read_bytes() for p in log if p.is_file())


def test_missing_executable_is_launch_failed(pw_cli, tmp_path):
    doc = manifest(build=[], run={"argv": ["./main"], "timeout_s": 5})  # main.c is never compiled
    wl = workload(tmp_path / "missing", {"main.c": WRONG_C}, doc)
    fault = assert_fault(pw_cli, wl, tmp_path / "runs", "launch-failed", "oracle")
    assert "./main" in fault.message

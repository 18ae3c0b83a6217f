"""The write paths under the verbs, on a real full or read-only tmpfs: the ledger's append is all or
nothing (a full disk takes part of a write; the part is cut off again), evidence and projection
writes leave no temporary file, and every refusal is a DiskError naming the path. Also: what a
failed build's log is boiled down to (the compiler's first error lines)."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from ledger import events as ev
from ledger.errors import DiskError, disk_error
from ledger.evidence import EvidenceStore
from ledger.files import write_atomic
from ledger.store import Ledger
from pw.workload import build_log
from tests.conftest import deterministic_ledger
from tests.faultkit import fill, free, remount


@pytest.fixture
def disk(scene):
    return scene.mount(scene.tmp / "disk", size="1m")


def test_a_refused_append_writes_nothing_and_the_next_one_lands(disk):
    ledger = deterministic_ledger(disk / "run" / "ledger.jsonl")
    ledger.append(ev.Note(text="first"), expected_seq=0)
    before = ledger.path.read_bytes()
    fill(disk)
    big = [ev.Note(text="x" * 3000) for _ in range(8)]  # more than the last page has left: a short write first
    with pytest.raises(DiskError) as caught:
        ledger.append(big, expected_seq=1)
    assert caught.value.path == str(ledger.path) and caught.value.errno == errno.ENOSPC
    assert "nothing of this append was kept" in str(caught.value)
    assert ledger.path.read_bytes() == before  # the part the disk took is cut off again
    assert Ledger(ledger.path).verify().ok
    free(disk)
    ledger.append(big, expected_seq=1)
    assert [e.seq for e in Ledger(ledger.path).events()] == list(range(1, 10))


def test_evidence_and_projections_on_a_full_disk_leave_no_temporary_file(disk):
    fill(disk)
    store = EvidenceStore(disk / "raw")
    with pytest.raises(DiskError) as caught:
        store.put(os.urandom(64 << 10))
    assert "/raw/" in caught.value.path and caught.value.errno == errno.ENOSPC
    with pytest.raises(DiskError):
        write_atomic(disk / "experiment-plan.json", b"{}" * (32 << 10))
    left = [p.name for p in disk.rglob("*") if p.is_file() and p.name != ".ballast"]
    assert left == []


def test_a_read_only_disk_is_named(disk):
    ledger = deterministic_ledger(disk / "ledger.jsonl")
    ledger.append(ev.Note(text="first"), expected_seq=0)
    remount(disk, "ro")
    try:
        with pytest.raises(DiskError) as caught:
            ledger.append(ev.Note(text="second"), expected_seq=1)
        assert caught.value.errno == errno.EROFS and "read-only filesystem (EROFS)" in str(caught.value)
    finally:
        remount(disk, "rw")


def test_only_refused_writes_become_disk_errors():
    assert disk_error(OSError(errno.ENOENT, "gone", "/x")) is None
    assert disk_error(ValueError("no")) is None
    err = disk_error(OSError(errno.EDQUOT, "Disk quota exceeded", "/home/u/runs/x"))
    assert err is not None and err.exit_code == 3 and str(err).startswith("/home/u/runs/x: disk quota exceeded")
    assert err.with_resume("pw rebuild R").with_resume("pw evaluate R a").resume == "pw rebuild R"
    assert err.with_resume("pw rebuild R").with_resume("pw start --resume R", replace=True).resume == (
        "pw start --resume R")


def _real_build_log(tmp_path, source: str) -> bytes:
    """What steps._store_log keeps for a real compiler run."""
    (tmp_path / "bad.c").write_text(source)
    proc = subprocess.run(["cc", "-c", "bad.c", "-o", "bad.o"], cwd=tmp_path, capture_output=True)
    assert proc.returncode != 0
    return b"$ cc -c bad.c\n== stdout ==\n" + proc.stdout + b"\n== stderr ==\n" + proc.stderr


def test_the_first_errors_of_a_real_compiler_run_are_quoted_bounded(tmp_path):
    many = "".join(f"int f{i}(void) {{ return undefined_{i}; }}\n" for i in range(30))
    lines = build_log.first_errors(_real_build_log(tmp_path, many))
    assert len(lines) == build_log.MAX_LINES
    assert lines[0].startswith("bad.c:1:") and "undefined_0" in lines[0]
    assert all("error" in line for line in lines)
    one = build_log.first_errors(_real_build_log(tmp_path, "int main(void) { return 0 }\n"))
    assert one and one[0].startswith("bad.c:1:") and "error" in one[0]


def test_a_log_without_a_diagnostic_gives_its_last_lines():
    log = b"$ ./build.sh\n== stdout ==\nstep 1\nstep 2\n\n== stderr ==\n" + b"".join(
        f"line {i}\n".encode() for i in range(20))
    assert build_log.first_errors(log) == [f"line {i}" for i in range(12, 20)]
    assert build_log.first_errors(b"$ true\n== stdout ==\n\n== stderr ==\n") == []
    long = b"$ x\n== stdout ==\n\n== stderr ==\nerror: " + b"y" * 500 + b"\n"
    assert len(build_log.first_errors(long)[0]) == build_log.MAX_CHARS


def test_a_full_disk_in_a_build_log_is_the_disk_not_the_code(tmp_path):
    log = b"$ make\n== stdout ==\n\n== stderr ==\n/usr/bin/ld: final link failed: No space left on device\n"
    assert build_log.refused_write(log, tmp_path) == errno.ENOSPC
    # The sandbox keeps the system read-only on purpose: a build writing there fails as a build.
    ro = b"$ make install\n== stdout ==\n\n== stderr ==\ninstall: cannot create '/usr/bin/x': Read-only file system\n"
    assert build_log.refused_write(ro, tmp_path) is None

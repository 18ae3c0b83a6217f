"""What a run writes: outside the workspace, read from an strace log (pw.workload.write_trace), and inside its
own tree, from snapshots around the run (pw.workload.steps.run_once)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ledger.contract import Contract, Source, Step
from pw.workload.steps import Target, run_once
from pw.workload.write_trace import outside, strace_prefix, written_paths

TRACE = """\
123 openat(AT_FDCWD, "/etc/ld.so.cache", O_RDONLY|O_CLOEXEC) = 3
123 openat(AT_FDCWD, "/tmp/cache-1.bin", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3
123 openat(AT_FDCWD, "out.txt", O_WRONLY|O_CREAT, 0666) = 4
123 openat(AT_FDCWD, "/tmp/missing", O_WRONLY) = -1 ENOENT (No such file or directory)
[pid 124] rename("/work/b/x.tmp", "/var/tmp/y") = 0
124 mkdir("/home/u/.cache/prog", 0755) = 0
124 openat(AT_FDCWD, "/dev/null", O_WRONLY) = 5
"""


def test_only_successful_writes_are_reported_and_relative_paths_resolve():
    found = written_paths(TRACE, "/work/b")
    assert found == ["/tmp/cache-1.bin", "/work/b/out.txt", "/var/tmp/y", "/home/u/.cache/prog", "/dev/null"]


def test_writes_inside_allowed_roots_and_devices_are_not_outside():
    found = written_paths(TRACE, "/work/b")
    assert outside(found, ["/work/b", "/home/u"]) == ["/tmp/cache-1.bin", "/var/tmp/y"]


def test_a_sibling_directory_sharing_a_prefix_is_outside():
    assert outside(["/work/b2/file"], ["/work/b"]) == ["/work/b2/file"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_real_traced_process_shows_its_write(tmp_path):
    log = tmp_path / "t.strace"
    target = tmp_path / "elsewhere" / "f.txt"
    target.parent.mkdir()
    argv = strace_prefix(log) + ["sh", "-c", f"echo x > {target}"]
    subprocess.run(argv, check=True, cwd=tmp_path / "elsewhere")
    found = written_paths(log.read_text(), str(tmp_path))
    assert str(target) in found
    assert outside(found, [str(tmp_path / "elsewhere")]) == []


def _shell_target(tmp_path: Path, script: str) -> tuple[Contract, Target]:
    build = tmp_path / "build"
    build.mkdir()
    (build / "input.dat").write_text("data\n")
    (build / "keep.txt").write_text("keep\n")
    contract = Contract(version=1, name="sh", source=Source(editable=["*.sh"]),
                        run=Step(argv=["sh", "-c", script], timeout_s=10))
    return contract, Target(label="c", src_dir=build, build_dir=build, files=[])


@pytest.mark.parametrize(("script", "expected"), [
    ("echo ok", []),
    ("rm input.dat; echo ok", ["deleted input.dat"]),
    ("echo more >> input.dat; echo ok", ["modified input.dat"]),
    ("echo cached > cache.bin; echo ok", ["created cache.bin"]),
])
def test_a_run_that_changes_its_tree_is_reported(tmp_path, script, expected):
    """Any file a run creates, modifies or deletes in its tree changes what the next run sees."""
    contract, target = _shell_target(tmp_path, script)
    out = run_once(contract, target, tmp_path / "scratch")
    assert out.process.ok and out.stdout == "ok\n"
    assert out.side_effects == expected
    assert not (target.build_dir / "cache.bin").exists()  # created files are removed at once
    assert (target.build_dir / "keep.txt").read_text() == "keep\n"


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_trace_uses_a_seccomp_filter_where_the_kernel_has_one_and_says_which_mode():
    from pw.workload import write_trace

    exe = shutil.which("strace")
    mode = write_trace.strace_mode()
    prefix = strace_prefix(Path("/tmp/x.log"))
    if write_trace.seccomp_support(exe) is None:
        assert "--seccomp-bpf" in prefix and mode == write_trace.SECCOMP
    else:  # the fallback is recorded with strace's reason
        assert "--seccomp-bpf" not in prefix and mode.startswith(write_trace.PTRACE_ALL + ": ")


def test_a_strace_without_seccomp_support_falls_back_and_says_why(tmp_path, monkeypatch):
    from pw.workload import write_trace

    fake = tmp_path / "strace"
    # Like an strace on a kernel without seccomp filters: a warning, and it carries on.
    fake.write_text("#!/bin/sh\necho 'strace: --seccomp-bpf is not enabled because seccomp is unavailable' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    write_trace.seccomp_support.cache_clear()
    try:
        assert "--seccomp-bpf" not in strace_prefix(tmp_path / "t.log")
        assert "seccomp is unavailable" in write_trace.strace_mode()
    finally:
        write_trace.seccomp_support.cache_clear()

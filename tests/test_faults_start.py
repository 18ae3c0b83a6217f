"""Faults met by `pw start`: bad inputs, a full disk at each stage, a read-only disk, another
filesystem, a compiler error, an unreadable file, SIGKILL, torn and damaged ledgers. Each row is one
fault (tests/faultkit.py says what every row must show); the start on the full disk is resumed with
`pw start --resume` once space is back, and ends with every stage recorded once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ledger.evidence import EvidenceStore
from pw.app.run import RunHandle
from pw.workload import steps, workspace
from tests.conftest import ledger_events, pw_main
from tests.faultkit import (
    Fault,
    as_nobody,
    before_call,
    check,
    fill,
    flip_a_byte,
    free,
    ids,
    killed_at,
    remount,
    restore_ledger,
    tear,
)

STAGES = ["preflight", "build", "oracle", "baseline-timing"]  # with --no-profile
BROKEN_TINY_C = "int main(void) { return 0 }  /* a missing semicolon */\n"


def only_run(runs: Path) -> Path:
    found = [p for p in runs.iterdir() if not p.name.startswith(".")]
    assert len(found) == 1, found
    return found[0]


def start_argv(scene, runs: Path, workload: Path | None = None) -> list:
    return ["start", "--workload", workload or scene.workload, "--runs-dir", runs, "--no-profile"]


def workload_copy(scene, name: str = "wl") -> Path:
    dest = scene.tmp / name
    shutil.copytree(scene.workload, dest)
    return dest


def resume(scene) -> None:
    """Once the fault is gone: `pw start --resume` ends the start, every stage recorded once."""
    run = scene.current
    result = pw_main("start", "--resume", run, "--no-profile")
    assert result.code == 0, result
    from ledger import events as ev

    done = [e.data.stage for e in ledger_events(run) if isinstance(e.data, ev.StageCompleted)]
    assert sorted(done) == sorted(STAGES), done


# --- bad inputs -----------------------------------------------------------------------------------


def _manifest_not_json(scene):
    wl = workload_copy(scene)
    (wl / "profileweaver.json").write_text("{ not json")
    return start_argv(scene, scene.tmp / "runs", wl)


def _manifest_is_a_directory(scene):
    wl = workload_copy(scene)
    (wl / "profileweaver.json").unlink()
    (wl / "profileweaver.json").mkdir()
    return start_argv(scene, scene.tmp / "runs", wl)


def _runs_dir_is_a_file(scene):
    (scene.tmp / "runs").write_text("")
    return start_argv(scene, scene.tmp / "runs")


def _resume_not_a_run(scene):
    (scene.tmp / "empty").mkdir()
    return ["start", "--resume", scene.tmp / "empty"]


def _unreadable_source(scene):
    """A source file the user may not read, refused before anything is copied (pw runs as nobody:
    root reads every file)."""
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="pw-faults-", dir="/tmp"))  # tmp_path's parents are 0700
    scene.trash.append(shared)
    scene.shared = shared
    os.chmod(shared, 0o755)
    wl = shutil.copytree(scene.workload, shared / "wl")
    os.chmod(wl / "tiny.c", 0o000)
    (shared / "runs").mkdir(mode=0o777)
    os.chmod(shared / "runs", 0o777)
    return as_nobody(*start_argv(scene, shared / "runs", wl), cwd=shared)


def _unreadable_after(scene):
    assert list((scene.shared / "runs").iterdir()) == []  # refused before a run was made


def _compile_error(scene):
    wl = workload_copy(scene)
    (wl / "tiny.c").write_text(BROKEN_TINY_C)
    return start_argv(scene, scene.tmp / "runs", wl)


def _compile_error_recorded(scene):
    scene.use(only_run(scene.tmp / "runs"))


# --- another filesystem, a full or read-only disk -------------------------------------------------


def _other_filesystem(scene):
    runs = scene.mount(scene.tmp / "disk")
    return start_argv(scene, runs / "runs")


def _other_filesystem_recorded(scene):
    from ledger import events as ev

    run = scene.use(only_run(scene.tmp / "disk" / "runs"))
    started = ledger_events(run)[0].data
    assert isinstance(started, ev.RunStarted)
    assert started.copied_by == [workspace.PLAIN_COPY], started.copied_by  # tmpfs: no reflink, no copy_file_range


def _full_disk_at(owner, name: str, k: int):
    """Fill the runs directory's tmpfs just before the k-th call of `owner.name`."""

    def act(scene):
        disk = scene.mount(scene.tmp / "disk")
        before_call(scene, owner, name, k, lambda *_: fill(disk))
        return start_argv(scene, disk / "runs")

    return act


def _free_and_resume(scene):
    free(scene.tmp / "disk")
    scene.use(only_run(scene.tmp / "disk" / "runs"))
    resume(scene)


def _free_and_start_again(scene):
    disk = scene.tmp / "disk"
    free(disk)
    assert [p.name for p in (disk / "runs").iterdir() if not p.name.startswith(".")] == []  # nothing half-made
    result = pw_main(*start_argv(scene, disk / "runs"))
    assert result.code == 0, result
    scene.use(only_run(disk / "runs"))


def _full_under_the_compiler(scene):
    """The build tree on a small tmpfs of its own, full when the compiler writes: the disk failed,
    not the code, so nothing is recorded (a build-failed fault would be a lie)."""
    runs = scene.tmp / "runs"

    def mount_build(contract, target, *_):
        scene.mount(target.build_dir.parent, size="64k")

    before_call(scene, steps, "build", 1, mount_build)
    before_call(scene, steps, "run_process", 1, lambda *a, **kw: fill(scene.mounts[-1]))
    return start_argv(scene, runs)


def _unmount_and_resume(scene):
    from ledger import events as ev

    run = scene.use(only_run(scene.tmp / "runs"))
    assert not [e for e in ledger_events(run) if isinstance(e.data, (ev.BuildFinished, ev.FaultRecorded))]
    scene.close()
    resume(scene)


def _read_only_at(k: int):
    def act(scene):
        disk = scene.mount(scene.tmp / "disk")
        before_call(scene, RunHandle, "record", k, lambda *_: remount(disk, "ro"))
        return start_argv(scene, disk / "runs")

    return act


def _writable_and_resume(scene):
    remount(scene.tmp / "disk", "rw")
    scene.use(only_run(scene.tmp / "disk" / "runs"))
    resume(scene)


def _read_only_runs_dir(scene):
    disk = scene.mount(scene.tmp / "disk")
    (disk / "runs").mkdir()
    remount(disk, "ro")
    return start_argv(scene, disk / "runs")


def _writable_and_start(scene):
    remount(scene.tmp / "disk", "rw")
    result = pw_main(*start_argv(scene, scene.tmp / "disk" / "runs"))
    assert result.code == 0, result
    scene.use(only_run(scene.tmp / "disk" / "runs"))


# --- killed, torn, damaged ------------------------------------------------------------------------


def _killed_before(target: str, k: int):
    def act(scene):
        runs = scene.tmp / "runs"
        runs.mkdir()
        # the shared run's cached preflight: the child process does not probe the profilers again
        shutil.copytree(scene.template.parent / ".preflight-cache", runs / ".preflight-cache")
        return killed_at(target, k, *start_argv(scene, runs))

    return act


def _found_and_resumed(scene):
    scene.use(only_run(scene.tmp / "runs"))
    resume(scene)


def _torn(scene):
    tear(scene.run)
    return ["start", "--resume", scene.run]


def _repaired_and_resumed(scene):
    assert pw_main("repair", scene.run).code == 0
    result = pw_main("start", "--resume", scene.run, "--no-profile")
    assert result.code == 0 and "skipped" in result.out, result


def _damaged(scene):
    flip_a_byte(scene.run)
    return ["start", "--resume", scene.run]


FAULTS = [
    Fault("start-workload-missing", "start", 2, ("--workload", "expected a workload directory"),
          lambda s: start_argv(s, s.tmp / "runs", s.tmp / "nope")),
    Fault("start-workload-is-a-file", "start", 2, ("expected a workload directory",),
          lambda s: start_argv(s, s.tmp / "runs", s.workload / "tiny.c")),
    Fault("start-workload-and-resume", "start", 2, ("exactly one of --workload",),
          lambda s: ["start", "--workload", s.workload, "--resume", s.run]),
    Fault("start-no-iterations", "start", 2, ("--iterations",),
          lambda s: [*start_argv(s, s.tmp / "runs"), "--iterations", 0]),
    Fault("start-manifest-not-json", "start", 2, ("profileweaver.json",), _manifest_not_json),
    Fault("start-manifest-is-a-directory", "start", 2, ("profileweaver.json", "directory"), _manifest_is_a_directory),
    Fault("start-runs-dir-is-a-file", "start", 2, ("--runs-dir",), _runs_dir_is_a_file),
    Fault("start-resume-not-a-run", "start", 2, ("not inside a run directory",), _resume_not_a_run),
    Fault("start-unreadable-source-file", "start", 2, ("tiny.c", "cannot be read", "permission denied"),
          _unreadable_source, _unreadable_after, root=True),
    Fault("start-compile-error", "start", 1, ("build-failed", "first errors:", "error:", "log: "),
          _compile_error, _compile_error_recorded),
    Fault("start-runs-dir-on-another-filesystem", "start", 0, ("baseline: ready",), _other_filesystem,
          _other_filesystem_recorded, root=True),
    Fault("start-disk-full-copying-the-baseline", "start", 3,
          ("no space left", "no run was made", "then run `pw start --workload"),
          _full_disk_at(workspace, "copy_files", 1), _free_and_start_again, root=True),
    # The batch goes to the ledger's last page when it fits in what that page has left (tmpfs
    # counts whole pages), and then the projections are refused instead: either way, one line.
    # tests/test_faults_store.py refuses the append itself, byte for byte.
    *[Fault(f"start-disk-full-recording-{stage}", "start", 3, ("no space left", "ENOSPC", "pw start --resume"),
            _full_disk_at(RunHandle, "record", k), _free_and_resume, root=True)
      for k, stage in enumerate(STAGES, start=2)],  # the first record is RunStarted
    Fault("start-disk-full-writing-projections", "start", 3,
          ("no space left", "the ledger holds every event", "pw start --resume"),
          _full_disk_at(RunHandle, "materialize", 3), _free_and_resume, root=True),
    Fault("start-disk-full-storing-evidence", "start", 3, ("/raw/", "no space left", "pw start --resume"),
          _full_disk_at(EvidenceStore, "put", 1), _free_and_resume, root=True),
    Fault("start-disk-full-under-the-compiler", "start", 3,
          ("build/baseline: no space left", "nothing of this build was recorded", "pw start --resume"),
          _full_under_the_compiler, _unmount_and_resume, root=True),
    Fault("start-read-only-disk-at-the-oracle", "start", 3, ("read-only filesystem", "EROFS", "pw start --resume"),
          _read_only_at(4), _writable_and_resume, root=True),
    Fault("start-read-only-runs-dir", "start", 2, ("--runs-dir", "can be written to"), _read_only_runs_dir,
          _writable_and_start, root=True),
    Fault("start-killed-before-the-build-append", "start", -9, (),
          _killed_before("pw.app.run:RunHandle.record", 3), _found_and_resumed),
    Fault("start-killed-before-the-projections", "start", -9, (),
          _killed_before("pw.app.run:RunHandle.materialize", 4), _found_and_resumed),
    Fault("start-resume-torn-tail", "start", 2, ("incomplete last line", "run `pw repair"), _torn, _repaired_and_resumed),
    Fault("start-resume-damaged-ledger", "start", 2, ("fails its hash", "events 1-2 are intact", "restore", "pw start --workload"),
          _damaged, restore_ledger),
]


@pytest.mark.parametrize("fault", FAULTS, ids=ids(FAULTS))
def test_fault(fault: Fault, scene) -> None:
    check(fault, scene)


def test_a_plain_copy_is_byte_for_byte_and_keeps_the_mode(scene):
    """The fallback itself (a tmpfs target: EXDEV for copy_file_range from this disk)."""
    disk = scene.mount(scene.tmp / "disk", size="4m")
    src = scene.tmp / "src"
    src.mkdir()
    blob = os.urandom(3 << 20 | 12345)  # several read/write chunks and a ragged end
    (src / "big.bin").write_bytes(blob)
    (src / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "run.sh", 0o751)
    methods = workspace.copy_files(src, disk / "copy", ["big.bin", "run.sh"])
    assert methods == [workspace.PLAIN_COPY]
    assert (disk / "copy" / "big.bin").read_bytes() == blob
    assert (disk / "copy" / "run.sh").stat().st_mode & 0o7777 == 0o751
    (disk / "copy" / "big.bin").unlink()
    fill(disk)
    with pytest.raises(Exception) as caught:  # the disk's answer, not a fallback
        workspace.copy_files(src, disk / "again", ["big.bin"])
    from ledger.errors import DiskError

    assert isinstance(caught.value, DiskError) and caught.value.path.endswith("again/big.bin")

"""py-spy in a timed run (adapters/pyspy.py, one kind of run): it samples from outside the sandbox
and pw's launcher, as perf does, so the program has nothing of it to see.

A red team's program read `/proc/<ppid>/comm` when py-spy was its parent (only in timed runs), took a
dict only then, and was verified 2.4x while 1.08x without a profiler (tests/data/redteam-s16-2/spyonly).
py-spy now runs `record --subprocesses --nonblocking` around the sandbox: the program's parent is the
launcher in every kind of run, its exit status is its own, and py-spy's output and log lie where the
program cannot write. py-spy's own lines still never reach the program's streams.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from adapters.pyspy import LOG_ROLE, PySpyAdapter
from ledger.contract import Contract, Source, Step
from pw.workload.steps import Target, classify, failure_message, run_once


def _adapter() -> PySpyAdapter:
    adapter = PySpyAdapter()
    if adapter.resolve_tool() is None or not adapter.probe().usable:
        pytest.skip("py-spy cannot sample here (needs ptrace rights)")
    return adapter


def _timed(tmp_path: Path, adapter: PySpyAdapter, argv: list[str], *, wrap: bool = True):
    build = tmp_path / "build"
    build.mkdir(parents=True, exist_ok=True)
    contract = Contract(version=1, name="t", source=Source(editable=["*.py"]), run=Step(argv=argv, timeout_s=30))
    target = Target(label="c", src_dir=build, build_dir=build, files=[])
    out_dir = tmp_path / "profile"
    out_dir.mkdir(exist_ok=True)
    w = adapter.timed_wrap(str(out_dir)) if wrap else None
    assert w is not None or not wrap
    return contract, target, out_dir, run_once(contract, target, tmp_path / "scratch", wrap=w)


_LOOK = ("import os, sys, time\nprint('first', flush=True)\nprint('err', file=sys.stderr)\n"
         "def work():\n    t = time.time()\n    while time.time() - t < 0.4:\n        pass\nwork()\n"
         "print(sorted(os.listdir('/proc/self/fd'))[:3])\n"
         "print(open(f'/proc/{os.getppid()}/comm').read().strip())\n"
         "print(any(open(f'/proc/{p}/comm').read().strip() == 'py-spy' for p in os.listdir('/proc') if p.isdigit()))\n"
         "print(os.path.exists(sys.argv[1]))\n")


def test_the_program_sees_no_profiler_and_its_streams_are_its_own(tmp_path):
    adapter = _adapter()
    out_dir = tmp_path / "profile"
    contract, target, out_dir, timed = _timed(tmp_path, adapter, [sys.executable, "-c", _LOOK, str(out_dir)])
    assert classify(timed) is None, failure_message(contract, timed)
    # the same program, unprofiled: what it sees of its parent and the processes around it is the same
    _, _, _, plain = _timed(tmp_path / "plain", adapter, [sys.executable, "-c", _LOOK, str(out_dir)], wrap=False)
    assert timed.stdout == plain.stdout, (timed.stdout, plain.stdout)
    first, fds, parent, spied, reachable = timed.stdout.splitlines()
    assert (first, fds, spied, reachable) == ("first", "['0', '1', '2']", "False", "False")
    assert parent != "py-spy"
    assert timed.stderr == "err\n"
    assert "py-spy> Sampling process" in (out_dir / LOG_ROLE).read_text()
    profile = adapter.normalize(adapter.timed_collect(str(out_dir), cwd=str(target.build_dir), timeout_s=30),
                                str(target.build_dir), "c")
    # the program's work, and nothing of the launcher's (it is Python too, and py-spy samples it)
    names = {op.name for op in profile.operations}
    assert "work" in names and profile.totals["samples"] > 10, names
    assert not any(op.file and op.file.endswith("launch.py") for op in profile.operations), names


def test_the_programs_exit_status_is_its_own(tmp_path):
    adapter = _adapter()
    contract, _, _, out = _timed(tmp_path, adapter, [sys.executable, "-c", "print('out'); raise SystemExit(3)"])
    assert out.process.exit_code == 3 and classify(out) is not None, out.process


def test_a_program_too_short_to_sample_is_a_run_with_an_empty_profile(tmp_path):
    adapter = _adapter()
    contract, target, out_dir, out = _timed(tmp_path, adapter, ["sh", "-c", "echo done"])
    assert classify(out) is None and out.stdout == "done\n"  # the run ran and counts
    profile = adapter.normalize(adapter.timed_collect(str(out_dir), cwd=str(target.build_dir), timeout_s=30),
                                str(target.build_dir), "c")
    assert profile.totals.get("samples", 0) == 0 and not profile.operations


def test_a_run_whose_profile_is_missing_without_pyspy_saying_why_is_a_tool_failure(tmp_path):
    from adapters.base import CaptureError

    adapter = _adapter()
    (tmp_path / LOG_ROLE).write_text("py-spy> Sampling process 200 times a second.\n")
    with pytest.raises(CaptureError, match="py-spy wrote no profile"):
        adapter.timed_collect(str(tmp_path), cwd=str(tmp_path), timeout_s=30)


def test_following_the_tree_counts_the_programs_subtree_and_not_the_launcher():
    """Under Yama scope 1 without root, py-spy follows the tree from around the sandbox (an ancestor
    may trace): it samples the launcher too, and each stack starts with process frames. A process of
    the program that renamed itself after the launcher is still below the real one, and counts."""
    from adapters.pyspy import LAUNCHER_MARK, _Frame, _Sampled, _Shared, _Speedscope, program_samples

    launcher = 'process 12:"/venv/bin/python -I -S /pw/adapters/launch.py 10"'
    frames = [_Frame(name='process 10:"/bin/sh -c exec ... /pw/adapters/launch.py 10"', file="", line=0),
              _Frame(name='process 11:"bwrap --unshare-pid ... python -I -S /pw/adapters/launch.py 10"', file="", line=0),
              _Frame(name=launcher, file="", line=0),
              _Frame(name='process 13:"python3 main.py"', file="", line=0),
              _Frame(name="<module>", file="/pw/adapters/launch.py", line=90),
              _Frame(name="work", file="/run/main.py", line=5),
              _Frame(name='process 14:"/venv/bin/python -I -S /pw/adapters/launch.py 10"', file="", line=0)]
    doc = _Speedscope(shared=_Shared(frames=frames), profiles=[
        _Sampled(type="sampled", samples=[[0, 1, 2, 4], [0, 1, 2, 3, 5], [0, 1, 2, 3, 6, 5]], weights=[0.005] * 3)])
    kept = program_samples(doc, LAUNCHER_MARK).profiles[0]
    # the launcher's own sample is left out; the program's and its disguised child's stay, without
    # their process frames
    assert kept.samples == [[5], [5]]


def test_following_the_tree_from_around_the_sandbox_samples_the_program_alone(tmp_path, monkeypatch):
    """The way py-spy joins where this user may not trace another process (Yama scope 1, not root):
    around the sandbox, following the tree. The program still sees no py-spy, and its profile holds
    its own work and nothing of the launcher's."""
    monkeypatch.setenv("PW_PYSPY_FOLLOW_TREE", "1")
    adapter = _adapter()
    out_dir = tmp_path / "profile"
    program = _LOOK.replace("< 0.4", "< 1.0")  # long enough for the tree's slower discovery
    contract, target, out_dir, out = _timed(tmp_path, adapter, [sys.executable, "-c", program, str(out_dir)])
    assert adapter.timed_wrap(str(out_dir)).outer and adapter.timed_options().get("under")
    assert classify(out) is None, failure_message(contract, out)
    _, _, parent, spied, reachable = out.stdout.splitlines()
    assert (spied, reachable) == ("False", "False") and parent != "py-spy"
    profile = adapter.normalize(adapter.timed_collect(str(out_dir), cwd=str(target.build_dir), timeout_s=30),
                                str(target.build_dir), "c")
    names = {op.name for op in profile.operations}
    assert "work" in names, names
    assert not any(op.file and op.file.endswith("launch.py") for op in profile.operations), names

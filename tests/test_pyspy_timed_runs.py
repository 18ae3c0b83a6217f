"""py-spy in a timed run (adapters/pyspy.py, one kind of run): it never shares the program's streams,
and a program that ends before py-spy could attach is a run that counts, with an empty profile.

py-spy prints its own lines to the streams it is given, and the program it starts inherits them;
on a busy host its banner landed after a short program's first line, and the run's stdout then
differed from the oracle-checked output (one CI run). py-spy's own output now goes to its log.
A program shorter than py-spy's first attempt to attach made py-spy exit 1 ("Failed to get process
executable name"), and the pair was a launch failure (another CI run); dropping or retrying such a
run would bias the timing toward the runs that were long enough, so it counts, unsampled.
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


def _timed(tmp_path: Path, adapter: PySpyAdapter, argv: list[str]):
    build = tmp_path / "build"
    build.mkdir(exist_ok=True)
    contract = Contract(version=1, name="t", source=Source(editable=["*.py"]), run=Step(argv=argv, timeout_s=30))
    target = Target(label="c", src_dir=build, build_dir=build, files=[])
    out_dir = tmp_path / "profile"
    out_dir.mkdir(exist_ok=True)
    wrap = adapter.timed_wrap(str(out_dir))
    assert wrap is not None
    return contract, target, out_dir, run_once(contract, target, tmp_path / "scratch", wrap=wrap)


def test_the_programs_streams_are_its_own_and_pyspy_is_still_its_parent(tmp_path):
    adapter = _adapter()
    program = ("import os, sys, time\nprint('first', flush=True)\nprint('err', file=sys.stderr)\n"
               "t = time.time()\nwhile time.time() - t < 0.3:\n    pass\n"
               "print(sorted(os.listdir('/proc/self/fd'))[:3])\n"
               "print(open(f'/proc/{os.getppid()}/comm').read().strip())\n")
    contract, target, out_dir, out = _timed(tmp_path, adapter, [sys.executable, "-c", program])
    assert classify(out) is None, failure_message(contract, out)
    assert out.stdout == "first\n['0', '1', '2']\npy-spy\n"  # nothing of py-spy's, whenever it printed
    assert out.stderr == "err\n"
    assert "py-spy> Sampling process" in (out_dir / LOG_ROLE).read_text()
    profile = adapter.normalize(adapter.timed_collect(str(out_dir), cwd=str(target.build_dir), timeout_s=30),
                                str(target.build_dir), "c")
    assert profile.totals["samples"] > 0


def test_a_program_that_ends_before_pyspy_attaches_is_a_run_with_an_empty_profile(tmp_path):
    adapter = _adapter()
    contract, target, out_dir, out = _timed(tmp_path, adapter, ["sh", "-c", "echo done"])
    assert "Failed to get process executable name" in out.profiler_said  # py-spy exited 1 ...
    assert classify(out) is None and out.stdout == "done\n"  # ... and the run ran and counts
    assert out.unattached
    profile = adapter.normalize(adapter.timed_collect(str(out_dir), cwd=str(target.build_dir), timeout_s=30,
                                                      unattached=out.unattached), str(target.build_dir), "c")
    assert profile.totals["samples"] == 0 and not profile.operations


def test_pyspy_failing_on_a_running_program_is_a_failed_run_that_says_why(tmp_path):
    """Not Python: py-spy gives up after its retries, kills the program and exits 1; the run failed,
    and its message is py-spy's error, not a backtrace line."""
    adapter = _adapter()
    contract, _, out_dir, out = _timed(tmp_path, adapter, ["sleep", "5"])
    assert classify(out) == "launch-failed"
    message = failure_message(contract, out)
    assert "the profiler said: Error:" in message and "python" in message.lower(), message
    assert out.process.wall_s < 4  # py-spy stopped it


FORGER = """
import os, sys, time
out = sys.argv[1]
os.mkdir(os.path.join(out, "pyspy.speedscope.json"))  # in the way of the profile py-spy writes at the end
t = time.time()
while time.time() - t < float(sys.argv[2]):
    pass
# py-spy's log is in a directory the program can write: its first line becomes py-spy's "gone" line
# (py-spy's own error, written after the program's exit at its offset, lands on a later line)
with open(os.path.join(out, "pyspy.log"), "w") as log:
    log.write("Error: Failed to get process executable name. Check that the process is running.\\n" + "\\n" * 4096)
print("done")
"""


@pytest.mark.parametrize("seconds", [0.3, 2.5])
def test_a_program_that_forges_pyspys_line_and_blocks_its_profile_is_not_an_unsampled_run(tmp_path, seconds):
    """The empty-profile rule (``RunWrap.unattached``, decided once, in the run) trusts neither the
    log's line (the program can write it) nor a missing profile (the program can keep py-spy from
    writing it): a run longer than py-spy's attach window, or one whose profile directory holds more
    than py-spy's log, is a failed run, never a run with an empty profile."""
    adapter = _adapter()
    out_dir = tmp_path / "profile"
    contract, target, out_dir, out = _timed(tmp_path, adapter, [sys.executable, "-c", FORGER, str(out_dir),
                                                                str(seconds)])
    assert out.profiler_said.startswith("Error: Failed to get process executable name"), out.profiler_said
    assert not out.unattached and classify(out) == "launch-failed", (out.process.wall_s, out.process.exit_code)
    assert (out.process.wall_s <= 2.0) == (seconds < 1), out.process.wall_s  # both sides of the window

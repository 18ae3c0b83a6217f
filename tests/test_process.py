"""adapters.process.run_process, the one runner behind workload steps and profiler tools: how a child
ended is recorded (never raised), and no process of its group outlives it."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from adapters.base import CaptureError, run_tool
from adapters.process import describe, run_process

# A shell that leaves a child ignoring SIGTERM behind and writes the child's pid to argv[1].
STUBBORN = "(trap '' TERM; exec sleep 30) & echo $! > \"$1\"; "


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _gone_soon(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)  # never leave it behind, even when the test fails
        return False
    return True


def _run(tmp_path: Path, argv: list[str], timeout_s: float = 10, own_peak_rss: bool = False):
    return run_process(argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, timeout_s=timeout_s,
                       stdout_path=tmp_path / "logs" / "out", stderr_path=tmp_path / "logs" / "err",
                       own_peak_rss=own_peak_rss)


# Every behaviour holds whether the program is exec'd from this process or from the launcher.
both_ways = pytest.mark.parametrize("own_peak_rss", [False, True], ids=["direct", "launcher"])


@both_ways
def test_timeout_kills_a_grandchild_that_ignores_sigterm(tmp_path, own_peak_rss):
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    r = _run(tmp_path, ["sh", "-c", STUBBORN + "wait", "sh", str(pidfile)], timeout_s=0.5, own_peak_rss=own_peak_rss)
    assert time.monotonic() - start < 10
    assert r.timed_out and not r.ok
    assert describe(r, 0.5) == "timed out after 0.5 s (process group killed)"
    assert _gone_soon(int(pidfile.read_text())), "grandchild survived the timeout"


@both_ways
def test_leftovers_of_a_normal_exit_are_killed(tmp_path, own_peak_rss):
    pidfile = tmp_path / "child.pid"
    r = _run(tmp_path, ["sh", "-c", STUBBORN + "exit 3", "sh", str(pidfile)], own_peak_rss=own_peak_rss)
    assert (r.exit_code, r.signal, r.timed_out, r.returncode) == (3, None, False, 3)
    assert _gone_soon(int(pidfile.read_text())), "a child left running survived its group leader"


@both_ways
def test_signal_output_and_env_are_recorded(tmp_path, own_peak_rss):
    code = ("import os, sys; print(os.getcwd(), 'HOME' in os.environ, flush=True); sys.stderr.write('e');"
            "sys.stderr.flush(); os.abort()")
    r = _run(tmp_path, [sys.executable, "-c", code], own_peak_rss=own_peak_rss)
    assert (r.exit_code, r.signal, r.returncode) == (None, signal.SIGABRT, -signal.SIGABRT)
    assert describe(r, 10) == "crashed with SIGABRT"
    assert Path(r.stdout_path).read_text().split() == [str(tmp_path), "False"]  # env is the whole env
    assert Path(r.stderr_path).read_bytes() == b"e"
    assert r.max_rss_kb > 0


@pytest.mark.parametrize("argv", [["/nonexistent/prog"], ["echo", "nul\0byte"]])
@both_ways
def test_launch_failure_is_recorded_not_raised(tmp_path, argv, own_peak_rss):
    r = _run(tmp_path, argv, own_peak_rss=own_peak_rss)
    assert r.launch_error and r.exit_code is None and not r.ok
    assert describe(r, 10).startswith("could not launch: ")
    assert b"cannot launch" in Path(r.stderr_path).read_bytes()
    with pytest.raises(CaptureError, match="cannot start"):
        run_tool(argv, timeout_s=5)


def test_run_tool_returns_both_streams_and_minus_the_signal(tmp_path):
    r = run_tool(["sh", "-c", "echo out; echo err >&2; kill -TERM $$"], timeout_s=10, cwd=str(tmp_path))
    assert (r.stdout, r.stderr, r.returncode) == (b"out\n", b"err\n", -signal.SIGTERM)
    dest = tmp_path / "big.out"
    r = run_tool([sys.executable, "-c", "print('x' * 100000)"], timeout_s=10, stdout_path=str(dest))
    assert r.stdout == b"" and dest.stat().st_size == 100001 and r.returncode == 0


def test_the_launcher_measures_the_programs_peak_memory_not_ours(tmp_path):
    """Linux carries a parent's memory high-water mark into a child exec'd from it: run directly,
    a 40 MB program reads as at least this process's peak. Through the launcher it reads as itself."""
    held = b"x" * (300 << 20)  # this process now peaks above 300 MB
    program = [sys.executable, "-c", "import sys; data = b'y' * (40 << 20); sys.exit(len(data) % 7)"]
    direct = _run(tmp_path, program)
    launched = _run(tmp_path, program, own_peak_rss=True)
    assert direct.exit_code == launched.exit_code == (40 << 20) % 7
    assert direct.max_rss_kb > 300 << 10
    assert 40 << 10 < launched.max_rss_kb < 120 << 10, launched.max_rss_kb
    assert 0 < launched.wall_s < 30 and len(held) == 300 << 20

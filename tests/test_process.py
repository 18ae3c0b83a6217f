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


def _run(tmp_path: Path, argv: list[str], timeout_s: float = 10):
    return run_process(argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]}, timeout_s=timeout_s,
                       stdout_path=tmp_path / "logs" / "out", stderr_path=tmp_path / "logs" / "err")


def test_timeout_kills_a_grandchild_that_ignores_sigterm(tmp_path):
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    r = _run(tmp_path, ["sh", "-c", STUBBORN + "wait", "sh", str(pidfile)], timeout_s=0.5)
    assert time.monotonic() - start < 10
    assert r.timed_out and not r.ok
    assert describe(r, 0.5) == "timed out after 0.5 s (process group killed)"
    assert _gone_soon(int(pidfile.read_text())), "grandchild survived the timeout"


def test_leftovers_of_a_normal_exit_are_killed(tmp_path):
    pidfile = tmp_path / "child.pid"
    r = _run(tmp_path, ["sh", "-c", STUBBORN + "exit 3", "sh", str(pidfile)])
    assert (r.exit_code, r.signal, r.timed_out, r.returncode) == (3, None, False, 3)
    assert _gone_soon(int(pidfile.read_text())), "a child left running survived its group leader"


def test_signal_output_and_env_are_recorded(tmp_path):
    code = ("import os, sys; print(os.getcwd(), 'HOME' in os.environ, flush=True); sys.stderr.write('e');"
            "sys.stderr.flush(); os.abort()")
    r = _run(tmp_path, [sys.executable, "-c", code])
    assert (r.exit_code, r.signal, r.returncode) == (None, signal.SIGABRT, -signal.SIGABRT)
    assert describe(r, 10) == "crashed with SIGABRT"
    assert Path(r.stdout_path).read_text().split() == [str(tmp_path), "False"]  # env is the whole env
    assert Path(r.stderr_path).read_bytes() == b"e"
    assert r.max_rss_kb > 0


@pytest.mark.parametrize("argv", [["/nonexistent/prog"], ["echo", "nul\0byte"]])
def test_launch_failure_is_recorded_not_raised(tmp_path, argv):
    r = _run(tmp_path, argv)
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

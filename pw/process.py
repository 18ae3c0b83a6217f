"""Run one workload process: argv only, its own process group, a hard timeout, resource usage.

Output goes to files, never pipes, so a chatty program cannot deadlock us. On timeout the whole
process group is killed (SIGTERM, then SIGKILL), so a hang that forked children leaves nothing
behind. `os.wait4` gives the child's own peak memory, which the no-collateral gate compares.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import msgspec

_KILL_GRACE_S = 0.5


class ProcessResult(msgspec.Struct, frozen=True):
    argv: list[str]
    exit_code: int | None
    signal: int | None
    timed_out: bool
    launch_error: str | None
    wall_s: float
    max_rss_kb: int
    stdout_path: str
    stderr_path: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.launch_error is None


def _kill_group(pid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(_KILL_GRACE_S if sig == signal.SIGTERM else 0)


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    stdout_path: Path,
    stderr_path: Path,
) -> ProcessResult:
    """Run argv to completion or timeout; never raises for a failing program, only records it."""
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv/env, '=' in an env name
            reason = getattr(exc, "strerror", None) or exc
            err.write(f"cannot launch {argv[0]!r}: {reason}\n".encode())
            return ProcessResult(
                argv, None, None, False, f"{argv[0]}: {reason}", 0.0, 0, str(stdout_path), str(stderr_path)
            )
        fired = threading.Event()

        def on_timeout() -> None:
            fired.set()
            _kill_group(proc.pid)

        timer = threading.Timer(timeout_s, on_timeout)
        timer.daemon = True
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            _kill_group(proc.pid)  # Ctrl-C while a workload runs: leave no orphan behind
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # tell Popen it was reaped by us
        # Anything the program forked and left running dies with its group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    code = proc.returncode
    return ProcessResult(
        argv=list(argv),
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=fired.is_set(),
        launch_error=None,
        wall_s=wall,
        max_rss_kb=int(usage.ru_maxrss),
        stdout_path=str(stdout_path),
        stderr_path=str(stderr_path),
    )


def describe(result: ProcessResult, timeout_s: float) -> str:
    """One line saying how a process ended, for messages and fault events."""
    if result.launch_error:
        return f"could not launch: {result.launch_error}"
    if result.timed_out:
        return f"timed out after {timeout_s:g} s (process group killed)"
    if result.signal:
        try:
            name = signal.Signals(result.signal).name
        except ValueError:
            name = f"signal {result.signal}"
        return f"crashed with {name}"
    return f"exited with status {result.exit_code}"

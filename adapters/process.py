"""Run one child process: argv only, its own process group, a hard timeout, resource usage.

This is the one process runner of the project: the workload steps (``pw.workload.steps``,
``pw.workload.correctness``) and the profiler adapters (``adapters.base.run_tool``) both go through it. It
lives in ``adapters/`` because adapters may import only ``ledger``, while ``pw`` may import adapters.

The program's stdout and stderr are pipes, drained by two threads into files, so a chatty program
can neither deadlock us nor fill our memory, and every run looks the same from inside: a pipe has
no name that says "timed run" or "oracle run" (a file's path in /proc/self/fd would).
On timeout the whole process group is killed (SIGTERM, a short grace, then SIGKILL), so a hang that
forked children, even ones that ignore SIGTERM, leaves nothing behind; after a normal exit anything
the program left running in its group is killed too. ``os.wait4`` gives the child's own peak
memory, which the no-collateral gate compares. A program that fails, crashes or cannot be launched
is recorded in the result, never raised.

With ``sandbox`` the command runs inside ``adapters.sandbox`` (a new PID namespace, a read-only
system, only its own tree writable); with the launcher inside too, the launcher reports what the
program left behind (``leftover_processes``, ``scratch_files``). Under bwrap the command inherits
one more descriptor, the seccomp filter bwrap reads (``adapters.sandbox.seccomp_pipe``), and a
layout's throwaway trees are mounted by the launcher (their ``changes`` directories are made here,
empty; the caller lists and removes them after the run).
"""

from __future__ import annotations

import fcntl
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec

from adapters import sandbox as sb
from adapters.attach import Attacher

_KILL_GRACE_S = 0.5
# After the program exits, how long to wait for its output pipes to close: a process that escaped
# the group (no sandbox) may hold them open; its output after this is not read.
_DRAIN_GRACE_S = 2.0
# How long an attached profiler may take to write what it sampled once the run has ended.
_ATTACHED_GRACE_S = 30.0
_LAUNCHER = Path(__file__).with_name("launch.py")


class ProcessResult(msgspec.Struct, frozen=True):
    """How one process ended: exactly one of ``exit_code``/``signal`` is set unless it never launched."""

    argv: list[str]
    exit_code: int | None
    signal: int | None
    timed_out: bool
    launch_error: str | None
    wall_s: float
    max_rss_kb: int
    stdout_path: str
    stderr_path: str
    # Reported by the launcher in a sandbox: live processes left in the run's PID namespace after
    # the program exited, and files left in its scratch tmpfs (/tmp, /var/tmp, /dev/shm, HOME).
    leftover_processes: list[str] = []
    scratch_files: list[str] = []
    sandboxed: bool = False
    # CPU time the kernel accounted to the program (rusage): in user space and in the kernel on its
    # behalf. A sampler without privileges sees only the first; these see both.
    user_s: float = 0.0
    sys_s: float = 0.0
    # Whether the launcher's own report came back (``own_peak_rss``): without it, wall_s and the
    # rusage times are the whole command's, seen from outside, not the program's.
    reported: bool = False
    # How the machine's load delayed the program (launcher only; None where unknown): seconds its
    # main thread was runnable but waiting for a CPU, and CPU seconds the hypervisor took from the
    # machine's virtual CPUs (summed over them) while it ran, and CPU seconds other work used.
    run_queue_s: float | None = None
    steal_s: float | None = None
    others_cpu_s: float | None = None
    # Whose CPU time the program used (launcher only; None where unknown): its main thread's, and its
    # whole family's (every thread, every process it started, orphans included). The difference bounds
    # the wait its own threads and processes could have caused the main thread (pw.campaign/5).
    main_cpu_s: float | None = None
    family_cpu_s: float | None = None
    # Seconds the launcher took to mount the layout's throwaway trees and drop its capabilities
    # (before the program's clock started: none of it is in wall_s).
    throwaway_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.launch_error is None

    @property
    def returncode(self) -> int:
        """``subprocess``'s convention: the exit status, or minus the signal that ended it."""
        return self.exit_code if self.exit_code is not None else -(self.signal or 0)


def _kill_group(pgid: int, reaped: threading.Event) -> None:
    """SIGTERM the group, give it a grace period, then SIGKILL what is left.

    Stops early once the leader has been reaped: its caller then kills the rest of the group itself,
    and a pgid whose processes are all gone must not be signalled later (the number can be reused).
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    if reaped.wait(_KILL_GRACE_S):
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_leftovers(pgid: int) -> None:
    """Kill anything still in the group once its leader has exited (daemons, stray children)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Confinement(msgspec.Struct, frozen=True):
    """Where a command runs: a working sandbox and what it shows (see ``adapters.sandbox``)."""

    sandbox: sb.Sandbox
    layout: sb.Layout


def run_process(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    timeout_s: float,
    stdout_path: Path,
    stderr_path: Path,
    own_peak_rss: bool = False,
    confine: Confinement | None = None,
    outer: Sequence[str] = (),
    attach: Sequence[str] = (),
    attach_log: Path | None = None,
) -> ProcessResult:
    """Run argv to completion or timeout; never raises for a failing program, only records it.

    ``env`` is the child's whole environment (None: inherit ours); ``cwd`` None: ours. A launch
    failure is also written to ``stderr_path`` so the log says why nothing ran.

    With ``own_peak_rss`` the program runs under ``adapters/launch.py``, so ``max_rss_kb`` is the
    program's own peak (a few MB of launcher floor) rather than at least this process's peak,
    which Linux carries into any child exec'd straight from it; ``wall_s`` is then the
    launcher's fork-to-wait time. Timed and oracle runs use it; builds and tools need not.

    ``outer``: an argv prefix run outside the sandbox and the launcher, around both (a profiler:
    ``perf record ... --``). The program then has the ancestry of a timed run (its parent is the
    launcher, in a PID namespace where the profiler has no /proc entry), and the launcher's report
    still measures the program alone.

    ``attach``: a profiler's argv, started outside the sandbox on the program's host process id
    (``{pid}``) as soon as the launcher has started it, its own output in ``attach_log``
    (``adapters.attach``); the run waits for it to write what it sampled. Needs the launcher.

    With ``confine`` the command (the launcher with it) runs in that sandbox, its working directory
    ``confine.layout.cwd``; HOME and TMPDIR are the sandbox's own. The launcher inside times the
    program alone, so the sandbox's set-up cost is not in ``wall_s``.
    """
    argv = list(argv)
    for path in (stdout_path, stderr_path):
        path.parent.mkdir(parents=True, exist_ok=True)
    if confine is not None:
        env = sb.environment(dict(os.environ if env is None else env))
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        own_before = _own_cpu_s()
        start = time.perf_counter()
        try:
            proc, report_r = _popen(argv, cwd=cwd, env=env, launcher=own_peak_rss, confine=confine, outer=list(outer))
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv/env, '=' in an env name
            reason = getattr(exc, "strerror", None) or exc
            err.write(f"cannot launch {argv[0]!r}: {reason}\n".encode())
            return ProcessResult(
                argv, None, None, False, f"{argv[0]}: {reason}", 0.0, 0, str(stdout_path), str(stderr_path)
            )
        drains = [_drain(proc.stdout, out), _drain(proc.stderr, err)]
        report_box: list[bytes] = []
        if report_r is not None:
            drains.append(_drain(report_r, report_box))
        ended = threading.Event()
        attacher = Attacher(proc.pid, str(_LAUNCHER), attach, attach_log or stderr_path.with_suffix(".attach"),
                            lambda: not ended.is_set()) if attach and own_peak_rss else None
        waited = _wait(proc, timeout_s, start, own_before)
        ended.set()
        for t in drains:
            t.join(_DRAIN_GRACE_S)
        if attacher is not None:
            attacher.finish(_ATTACHED_GRACE_S)
    measured = _decode_report(b"".join(report_box)) if report_r is not None else None
    return _result(argv, proc.returncode, waited, measured, confine is not None, stdout_path, stderr_path)


class _Waited(NamedTuple):
    """How the wait for a process ended, seen from outside it."""

    usage: resource.struct_rusage
    wall_s: float
    own_cpu_s: float  # CPU seconds this process's own threads used meanwhile
    timed_out: bool


def _wait(proc: subprocess.Popen, timeout_s: float, start: float, own_before: float) -> _Waited:
    """Reap the process, killing its group at the timeout, then kill what it left in the group."""
    fired = threading.Event()
    reaped = threading.Event()

    def on_timeout() -> None:
        fired.set()
        _kill_group(proc.pid, reaped)

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
        own_during = _own_cpu_s() - own_before
    except BaseException:
        _kill_group(proc.pid, reaped)  # Ctrl-C while a child runs: leave no orphan behind
        raise
    finally:
        reaped.set()
        timer.cancel()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # tell Popen it was reaped by us
    _kill_leftovers(proc.pid)
    timer.join()  # a firing timer has stopped signalling once `reaped` is set
    return _Waited(usage=usage, wall_s=wall, own_cpu_s=own_during, timed_out=fired.is_set())


def _result(argv: list[str], returncode: int, waited: _Waited, measured: _LaunchReport | None, sandboxed: bool,
            stdout_path: Path, stderr_path: Path) -> ProcessResult:
    """The result from outside (wait4), or from the launcher's report when it came back."""
    usage = waited.usage
    code, wall, rss, launch_error = returncode, waited.wall_s, int(usage.ru_maxrss), None
    extra: dict = {"sandboxed": sandboxed, "user_s": usage.ru_utime, "sys_s": usage.ru_stime}
    if measured is not None:
        code, wall, rss, launch_error = measured.returncode, measured.wall_s, measured.max_rss_kb, measured.launch_error
        extra.update(leftover_processes=measured.leftover_processes, scratch_files=measured.scratch_files,
                     user_s=measured.user_s, sys_s=measured.sys_s, reported=True,
                     run_queue_s=measured.run_queue_s, steal_s=measured.steal_s, throwaway_s=measured.throwaway_s,
                     main_cpu_s=measured.main_cpu_s, family_cpu_s=measured.family_cpu_s,
                     # This process's own threads (draining the program's output, the timer) are
                     # not other work: a program that prints 100 MB keeps them busy on another CPU.
                     others_cpu_s=None if measured.others_cpu_s is None
                     else max(0.0, measured.others_cpu_s - waited.own_cpu_s))
    if launch_error is not None:
        return ProcessResult(argv, None, None, False, launch_error, 0.0, 0, str(stdout_path), str(stderr_path),
                             sandboxed=sandboxed)
    return ProcessResult(
        argv=argv,
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=waited.timed_out,
        launch_error=None,
        wall_s=wall,
        max_rss_kb=rss,
        stdout_path=str(stdout_path),
        stderr_path=str(stderr_path),
        **extra,
    )


def _own_cpu_s() -> float:
    """CPU seconds this process (every thread) has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _drain(pipe, sink) -> threading.Thread:
    """Copy a pipe to a file (or append its chunks to a list) until EOF, in a daemon thread."""

    def copy() -> None:
        with pipe:
            while chunk := pipe.read1(1 << 16) if hasattr(pipe, "read1") else pipe.read(1 << 16):
                if isinstance(sink, list):
                    sink.append(chunk)
                else:
                    sink.write(chunk)

    t = threading.Thread(target=copy, daemon=True)
    t.start()
    return t


class _LaunchReport(msgspec.Struct, frozen=True):
    """What adapters/launch.py writes after its program ends."""

    returncode: int
    wall_s: float
    max_rss_kb: int
    launch_error: str | None
    leftover_processes: list[str] = []
    scratch_files: list[str] = []
    user_s: float = 0.0
    sys_s: float = 0.0
    run_queue_s: float | None = None
    steal_s: float | None = None
    others_cpu_s: float | None = None
    main_cpu_s: float | None = None
    family_cpu_s: float | None = None
    throwaway_s: float = 0.0


def with_own_tools(layout: sb.Layout) -> sb.Layout:
    """What pw's own tools need inside the sandbox, shown read-only where a fresh /tmp would hide
    them (a checkout or virtual environment under /tmp, as a CI clone may be): the interpreter's
    environment and installation (py-spy lives in the venv too), and the folder holding launch.py."""
    exe = os.path.realpath(sys.executable)
    needed = [os.path.realpath(sys.prefix), os.path.dirname(os.path.dirname(exe)), str(_LAUNCHER.resolve().parent)]
    return sb.show_readonly(layout, needed)


def _popen(argv: list[str], *, cwd, env, launcher: bool, confine: Confinement | None, outer: list[str] = ()):
    """Start the command; returns the process and, with the launcher, the read end of its report pipe."""
    env = None if env is None else dict(env)
    common = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)  # pgid == pid
    if confine is not None:
        cwd = None  # the sandbox changes directory itself (--chdir), to a path only it may see
        if confine.layout.throwaway and not launcher:
            raise ValueError("throwaway trees are mounted by pw's launcher: run the command with own_peak_rss")
        for t in confine.layout.throwaway:  # overlayfs's upper layer and work directory, empty
            for sub in ("upper", "work"):
                os.makedirs(os.path.join(t.changes, sub), exist_ok=True)
            _reuse_volatile_work(os.path.join(t.changes, "work"))
    # bwrap reads its seccomp filter (no keyring calls) from a descriptor the command inherits
    # (through `outer` too: a profiler passes its descriptors on to what it runs).
    seccomp_fd = sb.seccomp_pipe() if confine is not None and confine.sandbox.tool == "bwrap" else None
    try:
        return _spawn(argv, cwd=cwd, env=env, launcher=launcher, confine=confine, outer=list(outer),
                      seccomp_fd=seccomp_fd, common=common)
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)


def _spawn(argv: list[str], *, cwd, env, launcher: bool, confine: Confinement | None, outer: list[str],
           seccomp_fd: int | None, common: dict):
    extra_fds = () if seccomp_fd is None else (seccomp_fd,)
    if not launcher:
        full = sb.wrap(confine.sandbox, with_own_tools(confine.layout), argv, seccomp_fd=seccomp_fd) \
            if confine is not None else argv
        proc = subprocess.Popen([*outer, *full], cwd=cwd, env=env, stdin=subprocess.DEVNULL, pass_fds=extra_fds,
                                **common)
        return proc, None
    if not argv or any("\0" in a for a in argv) or any("\0" in k + v or "=" in k for k, v in (env or {}).items()):
        raise ValueError("argv and environment may not contain NUL bytes (or '=' in a variable name)")
    # The report fd is 10 or above: the unshare fallback's script uses 3-9 for itself.
    r, w = os.pipe()
    report_fd = fcntl.fcntl(w, fcntl.F_DUPFD, 10)
    os.close(w)
    inner = [sys.executable, "-I", "-S", str(_LAUNCHER), str(report_fd)]
    layout = with_own_tools(confine.layout) if confine is not None else None
    full = [*outer, *(sb.wrap(confine.sandbox, layout, inner, seccomp_fd=seccomp_fd) if confine is not None
                      else inner)]
    try:
        proc = subprocess.Popen(full, cwd=cwd, env=env, stdin=subprocess.PIPE, pass_fds=(report_fd, *extra_fds),
                                **common)
    finally:
        os.close(report_fd)
    throwaway = [{"tree": t.tree, "changes": t.changes} for t in layout.throwaway] if layout is not None else []
    spec = msgspec.json.encode({"argv": argv, "env": env if env is not None else dict(os.environ),
                                "sandboxed": confine is not None,
                                # Not scratch: the target's own trees and what is shown read-only (a
                                # /tmp bind is a mount inside the fresh /tmp, not something left there).
                                "own_trees": [*layout.writable, *layout.readonly,
                                              *(x for t in throwaway for x in (t["tree"], t["changes"]))]
                                if layout is not None else [],
                                "throwaway": throwaway})
    try:
        proc.stdin.write(spec)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the launcher died at once; its wait status says how
    return proc, os.fdopen(r, "rb")


def _reuse_volatile_work(work: str) -> None:
    """A volatile overlay leaves work/work/incompat/volatile/dirty behind (overlayfs's own, in
    directories of mode 000) and will not mount again on a work directory holding it: its upper
    layer might be inconsistent. Ours is empty (a changes directory is kept only then): it goes."""
    incompat = os.path.join(work, "work", "incompat")
    if not os.path.lexists(incompat):
        return
    os.chmod(os.path.dirname(incompat), 0o700)
    stack = [incompat]
    while stack:  # a few entries, in directories of mode 000: open them all, then remove bottom up
        path = stack.pop()
        os.chmod(path, 0o700)
        stack += [os.path.join(path, e.name) for e in os.scandir(path) if e.is_dir(follow_symlinks=False)]
    for dirpath, _, filenames in os.walk(incompat, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        os.rmdir(dirpath)


def probe_throwaway(sandbox: sb.Sandbox, where: str | None = None) -> str:
    """Whether throwaway trees work with this sandbox, their changes on the filesystem of ``where``
    (default: the temporary directory): a real run under the launcher writes and deletes in an
    overlaid tree, which must be unchanged after it while its upper layer holds both changes. ""
    when they work, else why not (one line)."""
    import tempfile

    if sandbox.tool != "bwrap":
        return f"{sandbox.tool} makes no user namespace to mount overlays in"
    with tempfile.TemporaryDirectory(prefix=".pw-throwaway-probe-", dir=where) as root:
        root = os.path.realpath(root)
        tree, changes = os.path.join(root, "tree"), os.path.join(root, "changes")
        os.mkdir(tree)
        with open(os.path.join(tree, "kept"), "w") as f:
            f.write("x\n")
        if not (sb.overlay_safe(tree) and sb.overlay_safe(changes)):
            return f"the temporary directory {root} holds a character overlayfs options cannot carry"
        layout = sb.Layout(writable=[], hidden=[], cwd=tree, throwaway=[sb.Throwaway(tree=tree, changes=changes)])
        r = run_process(["/bin/sh", "-c", "echo y > made && rm kept && test -f made"], cwd=tree,
                        env={"PATH": "/usr/bin:/bin"}, timeout_s=20, stdout_path=Path(root, "out"),
                        stderr_path=Path(root, "err"), own_peak_rss=True,
                        confine=Confinement(sandbox=sandbox, layout=layout))
        if not r.ok:
            err = Path(root, "err").read_text(errors="replace").strip().splitlines()
            return f"a run in a throwaway tree failed: {r.launch_error or (err[-1] if err else describe(r, 20))}"
        if os.listdir(tree) != ["kept"] or not os.path.isfile(os.path.join(changes, "upper", "made")):
            return "a run in a throwaway tree changed the tree itself, or its changes did not land apart"
    return ""


def _decode_report(data: bytes) -> _LaunchReport | None:
    """The launcher's report, or None when it wrote none (killed with its group on a timeout)."""
    try:
        return msgspec.json.decode(data, type=_LaunchReport)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


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

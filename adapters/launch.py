"""A small launcher that runs one program and reports that program's own peak memory.

Run as `python -I -S launch.py REPORT_FD` with a JSON spec `{"argv": [...], "env": {...},
"sandboxed": bool}` on stdin; the report goes to the inherited file descriptor REPORT_FD (a pipe
the caller reads), so it works from inside a sandbox that shows the caller's directories to no one.

Why it exists: Linux keeps a process's memory high-water mark across `execve`, and a child that
Python forks (or vforks) starts from the parent's address space, so `wait4` reports
`max(parent's peak RSS, program's peak RSS)` for every program `pw` runs directly: a 12 MB
workload measured from a 200 MB `pw` process reads 200 MB, and a candidate that doubles its
memory goes unseen. This launcher is a fresh, small interpreter (no site, no imports beyond the
standard library); the program is spawned from it, so its floor is the launcher's ~8 MB instead
of `pw`'s heap. The launcher also takes the wall time around spawn and wait, which leaves its own
start-up (~40 ms) out of the measurement.

The report (JSON, written to REPORT_FD after the program ends) holds the wait status as
`subprocess` returns codes (minus the signal), the wall time, the peak RSS in KB, how the machine's
load delayed the program (`run_queue_s`: its main thread runnable but waiting for a CPU;
`steal_s`: CPU time the hypervisor took from the machine meanwhile; `others_cpu_s`: CPU time the
machine's other work used meanwhile, on any CPU), whose CPU time the program used (`main_cpu_s`: its
main thread's; `family_cpu_s`: its own with every thread and every process it started, orphans
included), how long mounting its throwaway trees took
(`throwaway_s`, before the program's clock starts), and `launch_error` when the
program could not be executed. When the launcher itself is killed (a
timeout kills the whole process group), no report is written and the caller falls back to what
it saw.

Inside a sandbox (`sandboxed`: its own PID namespace and fresh tmpfs scratch directories, see
adapters/sandbox.py) the launcher also says what the program left behind once it exited: every
process still alive in the namespace (work handed to a detached child, a daemon waiting for the
next run) and every file in /tmp, /var/tmp, /dev/shm and HOME (a cache that would have outlived
the run without the sandbox). The sandbox discards both when the launcher exits; the report is
how pw learns that the program tried.

With `throwaway` in the spec (`[{"tree": ..., "changes": ...}]`, adapters/sandbox.py
`Layout.throwaway`) the launcher first mounts each tree through a copy-on-write overlay whose
changes land in `changes/upper`, hides `changes` under an empty tmpfs, re-enters its working
directory through the overlay and drops every capability the sandbox lent it for that; a failure
of any step is a `launch_error` and the program is not started.

Standard library only: `-I` leaves this package off `sys.path`.
"""

import json
import os
import sys
import time

_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
_MAX_LISTED = 20


def main() -> None:
    report_fd = int(sys.argv[1])
    spec = json.loads(sys.stdin.buffer.read())
    argv, env = spec["argv"], spec["env"]
    sandboxed = bool(spec.get("sandboxed"))
    os.set_inheritable(report_fd, False)  # the program must not be able to write our report
    _only_standard_fds()
    _not_dumpable()
    began = time.perf_counter()
    why = _throwaway_trees(spec.get("throwaway") or [])
    throwaway_s = time.perf_counter() - began
    if why is not None:
        os.write(2, f"pw's launcher: {why}\n".encode())
        _write_report(report_fd, {"returncode": 127, "wall_s": 0.0, "max_rss_kb": 0, "launch_error": why})
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _reap_orphans_here()
    # posix_spawn (vfork-like: no copy of this interpreter's pages to set up and tear down) keeps
    # the measured wall time closest to the program's own; a fork costs ~1 ms more here. The child
    # starts from this small launcher's address space, which sets the floor of its peak RSS.
    counters_before = _cpu_counters()
    family_before = _children_cpu_s()
    start = time.perf_counter()
    try:
        pid = os.posix_spawnp(argv[0], argv, env)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv or env
        reason = getattr(exc, "strerror", None) or exc
        os.write(2, f"cannot launch {argv[0]!r}: {reason}\n".encode())  # the program's log says why
        _write_report(report_fd, {"returncode": 127, "wall_s": 0.0, "max_rss_kb": 0,
                                  "launch_error": f"{argv[0]}: {reason}"})
        return
    # Wait without reaping first: the exited program's scheduler statistics are readable until it
    # is reaped, and they say how long it was runnable but waiting for a CPU.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    wall = time.perf_counter() - start
    main_cpu_s, run_queue_s = _schedstat_s(pid)
    counters_after = _cpu_counters()
    _, status, usage = os.wait4(pid, 0)
    _reap_exited()
    family_cpu_s = _children_cpu_s() - family_before
    steal_s = others_cpu_s = None
    if counters_before is not None and counters_after is not None:
        busy_s = counters_after[0] - counters_before[0]
        steal_s = counters_after[1] - counters_before[1]
        others_cpu_s = max(0.0, busy_s - usage.ru_utime - usage.ru_stime)
    report = {"returncode": os.waitstatus_to_exitcode(status), "wall_s": wall,
              "max_rss_kb": usage.ru_maxrss, "user_s": usage.ru_utime, "sys_s": usage.ru_stime,
              "run_queue_s": run_queue_s, "steal_s": steal_s, "others_cpu_s": others_cpu_s,
              "main_cpu_s": main_cpu_s, "family_cpu_s": family_cpu_s,
              "launch_error": None, "throwaway_s": throwaway_s}
    if sandboxed:
        report["leftover_processes"] = _leftover_processes()
        report["scratch_files"] = _scratch_files([*_SCRATCH, env.get("HOME", "")], spec.get("own_trees", []))
    _write_report(report_fd, report)


def _schedstat_s(pid: int) -> tuple[float | None, float | None]:
    """(on-CPU, waiting) seconds of the exited (not yet reaped) program's main thread: the first two
    fields of /proc/PID/schedstat, in ns. The second is the time it was runnable but waiting for a
    CPU; the first lets the campaign tell whose load that was (pw.rules.contention). (None, None)
    where the kernel keeps no scheduler statistics."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            fields = f.read().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None, None


def _reap_orphans_here() -> None:
    """Become the subreaper of everything the program starts: a descendant whose parent exits is
    handed to this launcher, not to the PID namespace's init, so its CPU time reaches
    ``_children_cpu_s`` once it is reaped (a program that hands work to an orphan cannot hide its
    CPU time that way)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, 1
    except (OSError, AttributeError):
        pass


def _reap_exited() -> None:
    """Reap every descendant that has exited and was handed to us (never waiting for a live one:
    those are the program's leftovers, reported as such)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _children_cpu_s() -> float:
    """CPU seconds (user and system) of every descendant reaped so far: the program, its threads, and
    every process it started, whoever reaped them (``_reap_orphans_here``)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_counters() -> tuple[float, float] | None:
    """(busy, steal): CPU seconds since boot, summed over the machine's CPUs, that anything ran
    (user, nice, system, irq, softirq, steal; /proc/stat's first line) and that the hypervisor took
    from this machine's virtual CPUs (another tenant's load, which no run queue here shows). Busy
    minus the program's own CPU time is other work, which slows a program even on another CPU
    (two virtual CPUs can be one core's hyperthreads: a divide-bound loop beside another ran 2x
    slower on this host, without waiting in any run queue)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    hz = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / hz, steal / hz


def _only_standard_fds() -> None:
    """Let the program inherit stdin, stdout and stderr only. Whatever wraps the launcher may leak
    descriptors into it (perf 6.1 leaks an eventfd into its workload), and an extra descriptor is a
    tell that says "profiled run"; every run's program sees the same three."""
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for fd in fds:
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the listing's own descriptor, closed by now


def _not_dumpable() -> None:
    """Make this launcher non-dumpable, so the program cannot reach its report pipe through
    ``/proc/PPID/fd/N`` (nor its memory through ``/proc/PPID/mem``): a same-uid child could
    otherwise open the pipe and write a report of its own, with any wall time it likes. The flag
    is not inherited across the program's execve; without CAP_SYS_PTRACE (the sandbox keeps
    none) no process may open another's fd links once it is cleared."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass  # not Linux with a C library: nothing to clear


_MS_NOSUID, _MS_NODEV = 2, 4
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPS_V3 = 0x20080522


def _throwaway_trees(trees: list) -> str | None:
    """Mount each tree through its overlay, hide where its changes land, drop every capability;
    None, or why not. Nothing to mount: nothing to drop either (the sandbox lent none)."""
    if not trees:
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for t in trees:
        tree, changes = t["tree"], t["changes"]
        # userxattr: overlayfs keeps its own attributes as user.overlay.*, the only kind a user
        # namespace may write (it is why an unprivileged user may mount it at all). volatile: no
        # sync of the upper layer, which is thrown away (unmounting synced its whole filesystem:
        # an ext4 journal commit, tens of ms on a busy disk, after every run).
        opts = f"lowerdir={tree},upperdir={changes}/upper,workdir={changes}/work,userxattr,volatile"
        if libc.mount(b"overlay", tree.encode(), b"overlay", _MS_NOSUID | _MS_NODEV, opts.encode()) != 0:
            return f"cannot mount the throwaway tree on {tree}: {os.strerror(ctypes.get_errno())}"
    for t in trees:  # the overlay holds its layers open; the program must not reach them by path
        if libc.mount(b"tmpfs", t["changes"].encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=4k,mode=0555") != 0:
            return f"cannot hide {t['changes']}: {os.strerror(ctypes.get_errno())}"
    try:
        os.chdir(os.getcwd())  # the working directory was entered before the overlay covered it
    except OSError as exc:
        return f"cannot enter the working directory through the throwaway tree: {exc.strerror}"
    return _drop_capabilities(libc)


def _drop_capabilities(libc) -> str | None:
    """Empty every capability set (bounding, ambient, effective, permitted, inheritable) and check
    that the kernel shows them empty; None, or why not."""
    import ctypes

    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
            return f"cannot drop capability {cap}: {os.strerror(ctypes.get_errno())}"
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    if libc.capset(ctypes.byref(Header(_CAPS_V3, 0)), (Data * 2)()) != 0:
        return f"cannot drop capabilities: {os.strerror(ctypes.get_errno())}"
    try:
        with open("/proc/self/status") as f:
            held = [line for line in f if line.startswith("Cap") and int(line.split()[1], 16)]
    except (OSError, ValueError, IndexError):
        return "cannot read /proc/self/status to check that no capability is left"
    return f"capabilities left after dropping them: {held[0].strip()}" if held else None


def _ancestors() -> set[int]:
    """This launcher and the processes above it (the sandbox's init): not the program's doing."""
    out, pid = set(), os.getpid()
    while pid > 0 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _leftover_processes() -> list[str]:
    """'PID NAME' of every live process in this PID namespace besides us and our ancestors.

    Zombies are skipped: an exited child that nobody has reaped yet does no work. A process is a
    zombie only when every one of its threads is: a leader that leaves by the thread-exit syscall
    shows "Z" in /proc/PID/stat while its other threads go on working (and /proc lists no thread
    ids), which once hid a forked child that finished the product after the timer had stopped.
    """
    mine, out = _ancestors(), []
    for entry in sorted(os.listdir("/proc"), key=lambda e: (len(e), e)):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # it exited while we looked
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
        if rest[:1] not in ("Z", "X") or _live_thread(entry):
            out.append(f"{entry} {name}")
    return out[:_MAX_LISTED]


def _live_thread(pid: str) -> bool:
    """Whether any thread of process ``pid`` is neither a zombie nor dead."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2:][:1] not in ("Z", "X"):
            return True
    return False


def _scratch_files(roots: list[str], own_trees: list[str]) -> list[str]:
    """Files (and links) the program left in the sandbox's scratch tmpfs, sorted, at most a few.
    Its own trees (bound back inside /tmp when the run directory is there) are not scratch."""
    found: list[str] = []
    skip = {os.path.normpath(t) for t in own_trees}
    # An explicit stack, not os.walk: Python 3.11's os.walk recurses once per level, and a chain of
    # a thousand empty directories made it raise RecursionError, killing the launcher before its
    # report (which the program had forged in its place). A directory that cannot be listed (too
    # long a path, say) is reported itself rather than skipped.
    stack = sorted({r for r in roots if r and os.path.isdir(r)}, reverse=True)
    while stack:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            found.append(path)
            continue
        for e in entries:
            full = os.path.join(path, e.name)
            if not e.is_dir(follow_symlinks=False):
                found.append(full)  # files, links (to directories too), fifos, sockets
            elif full not in skip:
                stack.append(full)
    return sorted(set(found))[:_MAX_LISTED]


def _write_report(fd: int, report: dict) -> None:
    data = json.dumps(report).encode()
    while data:
        data = data[os.write(fd, data):]
    os.close(fd)


if __name__ == "__main__":
    main()

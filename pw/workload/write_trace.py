"""Which files a process wrote outside the places it may write, from an strace log.

A candidate could cache its results across runs in any absolute path (/tmp/..., /var/tmp/...)
that per-run HOME/TMPDIR and workspace checks never see. The oracle's first run is traced for
file-creating and file-writing syscalls; writes outside the build tree and the run's scratch
directory are reported, and the judge compares them with the baseline's.

Only where no sandbox can be made (pw.workload.containment): in the sandbox every write outside the
tree lands in a fresh tmpfs that the launcher lists after the run, nothing is traced, and a traced
run (TracerPid in /proc/self/status) can no longer be told from an untraced one. Without a sandbox
the trace is the one defence left, and the verdict's ceiling is `proposed` anyway.

Cost: without a seccomp filter, strace stops the tracee on *every* syscall, traced or not, so a
program making a million small `write`s ran 21 s instead of 0.9 s. With `--seccomp-bpf` the kernel
stops it only on the traced calls (ratio 1.03, `benchmarks/tracing.py`). Where the kernel or strace
cannot do that, the slow mode is used and the mode is recorded with the oracle's result.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

# Syscalls that create, write, move or link a path. `open`-family calls count only with a write flag.
TRACED = "trace=open,openat,creat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,mkdir,mkdirat,truncate"
_CALL = re.compile(r'^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)')
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
_ALWAYS_ALLOWED = ("/dev/", "/proc/", "/sys/")


SECCOMP = "strace --seccomp-bpf"
PTRACE_ALL = "strace without --seccomp-bpf (every syscall stops the process)"


@functools.cache
def seccomp_support(exe: str) -> str | None:
    """None when `exe --seccomp-bpf` works here, else why not (strace's own words)."""
    try:
        proc = subprocess.run([exe, "-f", "--seccomp-bpf", "-qq", "-e", "trace=openat", "-o", os.devnull, "true"],
                              capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"probe failed: {exc}"
    err = proc.stderr.decode(errors="replace").strip()
    # strace says so on stderr (and carries on without the filter) when seccomp is unavailable.
    if proc.returncode != 0 or "seccomp" in err.lower():
        return err.splitlines()[-1] if err else f"probe exited {proc.returncode}"
    return None


def strace_mode() -> str | None:
    """How writes are traced here: SECCOMP, PTRACE_ALL plus the reason, or None without strace."""
    exe = shutil.which("strace")
    if exe is None:
        return None
    why = seccomp_support(exe)
    return SECCOMP if why is None else f"{PTRACE_ALL}: {why}"


def strace_prefix(log: Path) -> list[str] | None:
    """argv prefix that traces writes into `log`, or None where strace is not installed."""
    exe = shutil.which("strace")
    if exe is None:
        return None
    fast = ["--seccomp-bpf"] if seccomp_support(exe) is None else []
    return [exe, "-f", *fast, "-qq", "-e", TRACED, "-e", "signal=none", "-o", str(log)]


def written_paths(trace: str, cwd: str) -> list[str]:
    """Absolute paths the traced process created or wrote (successful calls only), in order."""
    out: list[str] = []
    for line in trace.splitlines():
        m = _CALL.match(line.strip())
        if m is None or int(m.group(3)) < 0:
            continue
        call, args = m.group(1), m.group(2)
        paths = _QUOTED.findall(args)
        if not paths:
            continue
        if call in ("open", "openat"):
            if not any(flag in args for flag in _WRITE_FLAGS):
                continue
            targets = paths[:1]
        elif call.startswith(("rename", "link", "symlink")):
            targets = paths[-1:]
        else:
            targets = paths[:1]
        for p in targets:
            full = os.path.normpath(p if os.path.isabs(p) else os.path.join(cwd, p))
            if full not in out:
                out.append(full)
    return out


def outside(paths: list[str], allowed_roots: list[str]) -> list[str]:
    roots = [os.path.normpath(r) + os.sep for r in allowed_roots]
    return [p for p in paths if not p.startswith(_ALWAYS_ALLOWED) and not any((p + os.sep).startswith(r) for r in roots)]

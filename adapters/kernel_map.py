"""A short /proc/kallsyms for `perf record`'s start-up in timed runs.

At every start perf record reads the whole of /proc/kallsyms (122,000 lines on this VM, 91% of its
0.17 s start-up under strace) to find the kernel's relocation reference symbol (`_text`) for the
kernel map it writes into perf.data; no option of perf 6.1 skips it. A timed run's kernel symbols
are never resolved (`perf script --kallsyms=/dev/null`: the OS kernel's samples are the machine's,
counted by module alone), so perf gets a file holding the reference symbols alone, bind-mounted
over /proc/kallsyms in a mount namespace of its own (`unshare --mount`, around perf): the kernel map
in perf.data is the same, and each timed run starts about 0.2 s sooner (`docs/benchmarks.md`).

Only where the run is sandboxed (the caller's rule: `RunWrap.outer_when_confined`): the sandbox
mounts a fresh /proc of its own, so the program sees the real /proc/kallsyms, as in every other
kind of run; a program outside a sandbox would see the short file and could tell a timed run by it.
Only as root, where the mount namespace needs no user namespace (perf's permissions stay those of
the process that starts it), and only after one probe shows the bind works.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# perf's reference symbols for the kernel map (machine__get_running_kernel_start and its kin).
_REFERENCE = {"_text", "_stext", "_etext", "_sinittext", "_einittext", "__start_rodata"}


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def reference_file() -> Path | None:
    """The reference symbols of the running kernel, written once per boot (KASLR moves them)."""
    path = Path(tempfile.gettempdir()) / f"pw-kallsyms-{_boot_id()}.txt"
    if path.is_file() and path.stat().st_size > 0:
        return path
    try:
        with open("/proc/kallsyms") as f:
            lines = [line for line in f if line.rstrip("\n").rsplit(" ", 1)[-1] in _REFERENCE]
    except OSError:
        return None
    if not any(line.rstrip().endswith((" _text", " _stext")) for line in lines):
        return None  # addresses hidden (kptr_restrict) or no reference symbol: perf reads the real one
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".pw-kallsyms-")
    with os.fdopen(fd, "w") as f:
        f.writelines(lines)
    os.replace(tmp, path)
    return path


# In perf's own mount namespace (private: nothing reaches the host's): a clean procfs mount first,
# so the sandbox inside may still mount a fresh /proc of its own (the kernel refuses a new procfs in a
# user namespace where every procfs mount has something bound over part of it), then the short file
# over /proc/kallsyms, then perf itself (`exec`: no shell stays behind).
_SCRIPT = 'mount -t proc proc "$0" && mount --bind "$1" /proc/kallsyms && shift && exec "$@"'


@functools.cache
def perf_prefix() -> tuple[str, ...]:
    """The argv prefix to put before `perf record`, or () where the shortcut cannot be used here."""
    tools = [shutil.which(t) for t in ("unshare", "mount", "sh", "bwrap")]
    if os.geteuid() != 0 or None in tools:
        return ()
    ref = reference_file()
    if ref is None:
        return ()
    mountpoint = Path(tempfile.gettempdir()) / "pw-perf-proc"
    try:
        mountpoint.mkdir(exist_ok=True)
    except OSError:
        return ()
    prefix = (tools[0], "--mount", "--propagation", "private", tools[2], "-c", _SCRIPT, str(mountpoint), str(ref))
    # Both halves of the promise: perf reads the short file, a sandbox inside still gets its own /proc.
    sandboxed = [tools[3], "--unshare-user", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc", "true"]
    try:
        reads = subprocess.run([*prefix, "cat", "/proc/kallsyms"], capture_output=True, timeout=20)
        nests = subprocess.run([*prefix, *sandboxed], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    ok = reads.returncode == 0 and reads.stdout == ref.read_bytes() and nests.returncode == 0
    return prefix if ok else ()

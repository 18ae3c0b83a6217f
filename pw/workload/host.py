"""Facts about this machine and its tools, gathered at the edge (never inside projections)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess

from ledger import events as ev

COMPILERS = ("cc", "gcc", "g++", "clang", "clang++", "nvcc")
PROFILER_TOOLS = ("perf", "valgrind", "py-spy", "ncu", "nsys")


def host_info() -> ev.Host:
    return ev.Host(
        hostname=socket.gethostname(),
        platform=platform.platform(),
        machine=platform.machine(),
        cpus=os.cpu_count() or 1,
        python=platform.python_version(),
    )


def scheduler_node() -> ev.Node | None:
    """This machine as a Slurm allocation sees it, or None outside one. CPUs are those this process
    may run on (the allocation's), not the machine's."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    h = host_info()
    return ev.Node(host=ev.Host(hostname=h.hostname, platform=h.platform, machine=h.machine, cpus=cpus,
                                python=h.python),
                   job_id=job, node=os.environ.get("SLURMD_NODENAME", ""),
                   partition=os.environ.get("SLURM_JOB_PARTITION", ""),
                   exclusive=os.environ.get("PW_SLURM_EXCLUSIVE") == "1")


def tool_version(name: str, flag: str = "--version") -> ev.ToolInfo:
    path = shutil.which(name)
    if path is None:
        return ev.ToolInfo(name=name, version=None, path=None)
    try:
        proc = subprocess.run([path, flag], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ev.ToolInfo(name=name, version=None, path=path)
    text = (proc.stdout or proc.stderr).decode(errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # nvcc prints a banner; its last line carries the release.
    line = lines[-1] if name == "nvcc" and lines else (lines[0] if lines else "")
    return ev.ToolInfo(name=name, version=line[:120] or None, path=path)


def gpu_name() -> str | None:
    """The first NVIDIA GPU's name, or None; `nvidia-smi -L` is the cheapest real check."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"GPU 0: (.+?)(?: \(UUID|$)", proc.stdout.decode(errors="replace"), re.M)
    return m.group(1).strip() if proc.returncode == 0 and m else None

"""Containment for everything a target's code does: build, oracle, holdout, timed and profiled runs.

Made by an existing tool, never by hand: bubblewrap (``bwrap``, Debian package ``bubblewrap``), or
util-linux ``unshare`` where bwrap is missing. What the program sees (``Layout``):

- the whole system read-only (it can run compilers and read libraries, not change them);
- its own tree (``Layout.writable``) read-write at its own path, so paths inside and outside agree
  (a profiler's symbol lookup and the source locator need no translation);
- fresh, empty tmpfs on ``/tmp``, ``/var/tmp``, ``/dev/shm`` and ``HOME`` (``/tmp/home``): a cache written there
  vanishes with the run, so nothing survives from one run to the next outside the tree, which pw
  checks itself;
- an empty tmpfs over each ``Layout.hidden`` directory (the run directory's parent, which holds the
  baseline tree, the references, other candidates and other runs; the user's workload directory),
  with the own tree bound back on top: what is hidden is not mounted at all, so neither a relative
  path (``../../baseline/reference``) at run time nor an ``.incbin`` at build time can reach it;
- its own PID namespace: no other process is visible (the baseline cannot be found, let alone
  stopped), and when the run's first process ends the kernel kills everything left in it, so no
  work outlives the run (``--die-with-parent`` covers pw itself being killed);
- no network, its own IPC namespace (no System V shared memory shared across runs), no capabilities
  (it cannot unmount the masks).

``bwrap_argv`` and ``unshare_argv`` are pure argv builders; ``probe`` launches ``true`` in the
sandbox for real and says which tool works (or why none does, which caps the verdict at proposed).
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Literal

import msgspec

# Fresh tmpfs in every sandbox: the places a program may scribble on that are not its tree.
SCRATCH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
# HOME inside the sandbox: a directory of the fresh /tmp. The user's real home stays visible,
# read-only, like the rest of the system: interpreters and toolchains live there (pyenv, spack).
SANDBOX_HOME = "/tmp/home"
# Devices a GPU program needs; bwrap's --dev gives only the standard few.
_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/dri")
_PROBE_TIMEOUT_S = 20.0

Tool = Literal["bwrap", "unshare"]


class Layout(msgspec.Struct, frozen=True):
    """What one sandboxed process sees. Paths are absolute.

    ``writable``: directories bound read-write at their own path (the target's built tree; a
    profiler's output directory). ``hidden``: directories masked by an empty tmpfs before the
    writable ones are bound back. ``cwd``: the working directory inside (must be visible).
    """

    writable: list[str]
    hidden: list[str]
    cwd: str
    # Directories shown read-only although a mask covers them: the program search path, when a
    # PATH entry lies in /tmp (a test's folder of tool links, a user's unpacked toolchain).
    readonly: list[str] = []


class Sandbox(msgspec.Struct, frozen=True):
    """A sandbox tool that the probe found working."""

    tool: Tool
    exe: str
    version: str


class SandboxProbe(msgspec.Struct, frozen=True):
    """What ``probe`` found: the working sandbox, or why there is none (one reason per tool tried)."""

    sandbox: Sandbox | None
    reasons: list[str]

    @property
    def usable(self) -> bool:
        return self.sandbox is not None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _masks(layout: Layout) -> list[str]:
    """Every tmpfs mount point, parents before children, none inside another tmpfs already."""
    wanted = [*SCRATCH_DIRS, *layout.hidden]
    out: list[str] = []
    for path in sorted({os.path.normpath(p) for p in wanted}, key=lambda p: (p.count("/"), p)):
        if path == "/":
            raise ValueError("the sandbox cannot hide the root directory")
        if any(_under(path, done) for done in out):
            continue  # already empty: it is inside a tmpfs mounted before it
        out.append(path)
    return out


def show_readonly(layout: Layout, paths: Sequence[str]) -> Layout:
    """``layout`` with each of ``paths`` that a scratch tmpfs would mask shown read-only (pure: the
    paths are taken as given, already resolved). Never one inside a hidden directory: that would
    show part of what must stay hidden."""
    extra = [p for p in paths
             if any(_under(p, s) for s in SCRATCH_DIRS) and not any(_under(p, h) for h in layout.hidden)
             and p not in layout.readonly and p not in layout.writable]
    return msgspec.structs.replace(layout, readonly=[*layout.readonly, *dict.fromkeys(extra)]) if extra else layout


def _check(layout: Layout) -> None:
    for path in (*layout.writable, *layout.hidden, layout.cwd):
        if not os.path.isabs(path):
            raise ValueError(f"sandbox paths must be absolute, got {path!r}")
    if not any(_under(layout.cwd, w) for w in layout.writable) and any(_under(layout.cwd, h) for h in layout.hidden):
        raise ValueError(f"the working directory {layout.cwd} would be hidden in the sandbox")


def environment(env: dict[str, str]) -> dict[str, str]:
    """The environment a sandboxed program gets: the caller's, with HOME and TMPDIR inside the sandbox."""
    return {**env, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}


def bwrap_argv(exe: str, layout: Layout, argv: Sequence[str], *, devices: Sequence[str] = ()) -> list[str]:
    """The bubblewrap command that runs ``argv`` in ``layout`` (pure: paths are not looked at)."""
    _check(layout)
    out = [exe, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
           "--unshare-uts", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for dev in devices:
        out += ["--dev-bind", dev, dev]
    for path in _masks(layout):
        out += ["--tmpfs", path]
    out += ["--dir", SANDBOX_HOME]
    for path in layout.readonly:
        out += ["--ro-bind", path, path]
    for path in layout.writable:
        out += ["--bind", path, path]
    out += ["--chdir", layout.cwd, "--", *argv]
    return out


def unshare_argv(exe: str, layout: Layout, argv: Sequence[str]) -> list[str]:
    """The util-linux fallback: ``unshare`` makes the namespaces, a short shell script the mounts.

    Needs root (or CAP_SYS_ADMIN). The writable trees are opened (fd 3, 4, ...) before the masks
    go on, then bound back from ``/proc/self/fd/N``, which still names the original directories.
    Every mount that existed is remounted read-only; capabilities are dropped with ``setpriv``.
    """
    _check(layout)
    binds = [(p, "ro") for p in layout.readonly] + [(p, "rw") for p in layout.writable]
    if len(binds) > 7:
        raise ValueError("the unshare fallback binds at most 7 trees (file descriptors 3-9)")
    lines = ["set -e", "mount --make-rprivate /"]
    fds = list(range(3, 3 + len(binds)))
    for fd, (path, _) in zip(fds, binds, strict=True):
        lines.append(f"exec {fd}<{shlex.quote(path)}")
    lines.append("awk '{print $5}' /proc/self/mountinfo | while read -r m; do "
                 "mount -o remount,bind,ro \"$m\" 2>/dev/null || true; done")
    for path in _masks(layout):
        lines.append(f"mount -t tmpfs -o mode=1777 tmpfs {shlex.quote(path)}")
    lines.append(f"mkdir -p {shlex.quote(SANDBOX_HOME)}")
    for fd, (path, mode) in zip(fds, binds, strict=True):
        lines.append(f"mkdir -p {shlex.quote(path)} && mount --no-canonicalize --bind /proc/self/fd/{fd} {shlex.quote(path)}")
        # A bind copies the source mount's flags, and every mount was made read-only above.
        lines.append(f"mount -o remount,bind,{mode} {shlex.quote(path)}")
        lines.append(f"exec {fd}<&-")
    lines.append(f"cd {shlex.quote(layout.cwd)}")
    lines.append('exec setpriv --bounding-set -all --inh-caps -all --no-new-privs -- "$@"')
    return [exe, "--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts", "--mount-proc",
            "--", "/bin/sh", "-c", "\n".join(lines), "pw-sandbox", *argv]


def devices() -> list[str]:
    """GPU device nodes present on this host (bound into the sandbox so CUDA programs still run)."""
    return sorted(p for pattern in _DEVICE_GLOBS for p in glob.glob(pattern))


def wrap(sandbox: Sandbox, layout: Layout, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside ``sandbox`` with ``layout``."""
    if sandbox.tool == "bwrap":
        return bwrap_argv(sandbox.exe, layout, argv, devices=devices())
    return unshare_argv(sandbox.exe, layout, argv)


def _version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=5, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.strip().splitlines()[0] if out.strip() else ""


def _try(tool: Tool, exe: str) -> tuple[Sandbox | None, str]:
    """Launch ``true`` in a real sandbox of this tool, then check that the system was read-only in it."""
    with tempfile.TemporaryDirectory(prefix="pw-sandbox-probe-") as tree:
        tree = os.path.realpath(tree)
        layout = Layout(writable=[tree], hidden=[], cwd=tree)
        cand = Sandbox(tool=tool, exe=exe, version=_version(exe))
        # `true` must run; a write to the tree must land; a write to /usr (read-only) must fail.
        check = ["/bin/sh", "-c", "true && : > ok && ! ( : > /usr/.pw-sandbox-probe ) 2>/dev/null"]
        try:
            r = subprocess.run(wrap(cand, layout, check), capture_output=True, timeout=_PROBE_TIMEOUT_S,
                               env=environment({"PATH": "/usr/bin:/bin"}), check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{tool}: {exc}"
        if r.returncode != 0 or not os.path.exists(os.path.join(tree, "ok")):
            err = (r.stderr.decode(errors="replace").strip().splitlines() or ["no error output"])[-1]
            return None, f"{tool}: a sandboxed `true` exited {r.returncode}: {err}"
        return cand, ""


def probe() -> SandboxProbe:
    """The first sandbox tool that really works here: bwrap, then unshare (each launched for real)."""
    reasons = []
    for tool in ("bwrap", "unshare"):
        exe = shutil.which(tool)
        if exe is None:
            reasons.append(f"{tool}: not installed" + (" (apt-get install bubblewrap)" if tool == "bwrap" else ""))
            continue
        found, why = _try(tool, exe)  # type: ignore[arg-type]
        if found is not None:
            return SandboxProbe(sandbox=found, reasons=reasons)
        reasons.append(why)
    return SandboxProbe(sandbox=None, reasons=reasons)

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
- no network, its own IPC namespace (no System V shared memory, no POSIX message queue shared
  across runs), no capabilities (it cannot unmount the masks);
- its own user namespace (bwrap ``--unshare-user``, the same uid and gid inside, so files keep their
  owner): the kernel's per-namespace keyrings (user, user-session, persistent) start empty in
  every run;
- no keyring system calls at all (bwrap ``--seccomp``: ``add_key``, ``request_key`` and ``keyctl``
  fail with EPERM). Keys are not namespaced: a key is found by its serial number, and a process of
  the same uid can reach every keyring ``/proc/keys`` lists, the caller's own user keyring among
  them, whatever namespace it is in. This is Docker's default seccomp rule too;
- with ``Layout.throwaway``, each named tree through a copy-on-write overlay (overlayfs): the
  program sees its tree as built and may write it, but every change lands in a directory pw owns
  (``Throwaway.changes``), which the sandbox hides from the program and pw lists and discards after
  the run. bubblewrap 0.8 (Debian 12) has no overlay options, so pw's launcher (adapters/launch.py)
  mounts the overlay itself, with the only capabilities the sandbox lends it (``THROWAWAY_CAPS``, in
  the run's own user namespace), and drops every capability before it starts the program.

``bwrap_argv`` and ``unshare_argv`` are pure argv builders; ``probe`` launches ``true`` in the
sandbox for real and says which tool works (or why none does, which caps the verdict at proposed).
"""

from __future__ import annotations

import fcntl
import glob
import os
import shlex
import shutil
import struct
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
# What pw's launcher needs in the sandbox's own user namespace to mount a throwaway tree (and to
# drop what it holds before the program starts): mount (SYS_ADMIN), overlayfs's own work
# directory, mode 000 (DAC_OVERRIDE), and emptying the bounding set (SETPCAP).
THROWAWAY_CAPS = ("CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_SETPCAP")
# The device nodes of bwrap's --dev, bound one by one: --dev mounts a devpts, which makes an
# unprivileged bwrap set the sandbox up in one user namespace and run the program in a second,
# nested one, where no capability can mount anything (the throwaway tree).
_STANDARD_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")


class Throwaway(msgspec.Struct, frozen=True):
    """A tree shown copy-on-write: ``tree`` at its own path, its changes landing in
    ``changes``/upper (overlayfs's upper layer; ``changes``/work is its work directory). ``changes``
    is pw's, outside every tree, emptied and hidden from the program before it starts."""

    tree: str
    changes: str


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
    # Trees the program sees through a throwaway overlay (``Throwaway``): writable, yet unchanged
    # after the run. Only a command run under pw's launcher can have them (it mounts them).
    throwaway: list[Throwaway] = []


class Sandbox(msgspec.Struct, frozen=True):
    """A sandbox tool that the probe found working."""

    tool: Tool
    exe: str
    version: str
    # Whether throwaway trees (``Layout.throwaway``) work here (the probe mounts one for real):
    # overlayfs in a user namespace, an upper layer under the temporary directory.
    throwaway: bool = False
    throwaway_reason: str = ""


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


# Characters overlayfs's mount options cannot carry in a path (its separators and escape).
_OVERLAY_UNSAFE = frozenset(",:\\=\n")


def overlay_safe(path: str) -> bool:
    """Whether ``path`` can be named in an overlayfs mount option as it is."""
    return not (set(path) & _OVERLAY_UNSAFE)


def _check(layout: Layout) -> None:
    trees = [t.tree for t in layout.throwaway]
    changes = [t.changes for t in layout.throwaway]
    for path in (*layout.writable, *layout.hidden, layout.cwd, *trees, *changes):
        if not os.path.isabs(path):
            raise ValueError(f"sandbox paths must be absolute, got {path!r}")
    shown = [*layout.writable, *trees]
    if not any(_under(layout.cwd, w) for w in shown) and any(_under(layout.cwd, h) for h in layout.hidden):
        raise ValueError(f"the working directory {layout.cwd} would be hidden in the sandbox")
    for t in layout.throwaway:
        if not (overlay_safe(t.tree) and overlay_safe(t.changes)):
            raise ValueError(f"a throwaway tree's paths may not hold , : \\ or = ({t.tree}, {t.changes})")
        if any(_under(t.changes, p) or _under(p, t.changes) for p in (*shown, layout.cwd)):
            raise ValueError(f"a throwaway tree's changes ({t.changes}) must lie outside every tree")


def environment(env: dict[str, str]) -> dict[str, str]:
    """The environment a sandboxed program gets: the caller's, with HOME and TMPDIR inside the sandbox."""
    return {**env, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}


def bwrap_argv(exe: str, layout: Layout, argv: Sequence[str], *, devices: Sequence[str] = (),
               seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command that runs ``argv`` in ``layout`` (pure: paths are not looked at).
    ``seccomp_fd``: a descriptor the command inherits, holding ``seccomp_filter()``."""
    _check(layout)
    out = [exe, "--die-with-parent", "--new-session", "--unshare-user", "--unshare-pid", "--unshare-net",
           "--unshare-ipc", "--unshare-uts", "--cap-drop", "ALL"]
    if layout.throwaway:  # lent to pw's launcher, which mounts the trees and drops them all
        for cap in THROWAWAY_CAPS:
            out += ["--cap-add", cap]
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    out += ["--ro-bind", "/", "/", "--tmpfs", "/dev"]
    for dev in _STANDARD_DEVICES:
        out += ["--dev-bind", dev, dev]
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        out += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{name}"]
    out += ["--symlink", "/proc/self/fd", "/dev/fd", "--dir", "/dev/pts", "--proc", "/proc"]
    for dev in devices:
        out += ["--dev-bind", dev, dev]
    for path in _masks(layout):
        out += ["--tmpfs", path]
    out += ["--dir", SANDBOX_HOME]
    for path in layout.readonly:
        out += ["--ro-bind", path, path]
    for path in layout.writable:
        out += ["--bind", path, path]
    for t in layout.throwaway:  # the launcher mounts the overlay on the tree, from `changes`
        out += ["--ro-bind", t.tree, t.tree, "--bind", t.changes, t.changes]
    out += ["--chdir", layout.cwd, "--", *argv]
    return out


# --- the seccomp filter: no keyring system calls -----------------------------------------------------

# audit architecture (linux/audit.h) -> (add_key, request_key, keyctl) on it.
_KEYRING_SYSCALLS = {
    0xC000003E: (248, 249, 250),  # x86_64 (x32 too: its numbers are these with bit 30 set)
    0x40000003: (286, 287, 288),  # i386
    0xC00000B7: (217, 218, 219),  # aarch64
    0x40000028: (309, 310, 311),  # arm (EABI)
    0xC0000015: (269, 270, 271),  # ppc64le
    0x80000015: (269, 270, 271),  # ppc64
    0xC00000F3: (217, 218, 219),  # riscv64
}
_X32_BIT = 0x40000000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_EPERM = 1
# Classic BPF opcodes: load a word of seccomp_data, AND, jump if equal, return.
_LD_W_ABS, _ALU_AND_K, _JEQ_K, _RET_K = 0x20, 0x54, 0x15, 0x06
_NR, _ARCH = 0, 4  # offsetof(struct seccomp_data, nr / arch)


def seccomp_filter() -> bytes:
    """A seccomp program (classic BPF, as ``seccomp_export_bpf`` writes it, which is what bwrap's
    ``--seccomp`` reads) that fails ``add_key``, ``request_key`` and ``keyctl`` with EPERM on every
    architecture listed, and allows every other call (pure)."""
    prog: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, _ARCH)]
    for arch, numbers in _KEYRING_SYSCALLS.items():
        block = [(_LD_W_ABS, 0, 0, _NR)]
        if arch == 0xC000003E:
            block.append((_ALU_AND_K, 0, 0, 0xFFFFFFFF ^ _X32_BIT))
        for i, nr in enumerate(numbers):
            left = len(numbers) - i - 1  # checks after this one
            block.append((_JEQ_K, left + 1, 0, nr))  # equal: over the rest and the allow, to the deny
        block += [(_RET_K, 0, 0, _SECCOMP_RET_ALLOW), (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _EPERM)]
        prog.append((_JEQ_K, 0, len(block), arch))  # another architecture: over this block
        prog += block
    prog.append((_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)


def seccomp_pipe(min_fd: int = 10) -> int:
    """A readable descriptor (``min_fd`` or above, not inheritable until passed) holding
    ``seccomp_filter()``: the caller passes it to the sandbox tool and closes it after the launch."""
    data = seccomp_filter()
    r, w = os.pipe()
    try:
        os.write(w, data)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(w)
    fd = fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, min_fd)
    os.close(r)
    return fd


def unshare_argv(exe: str, layout: Layout, argv: Sequence[str]) -> list[str]:
    """The util-linux fallback: ``unshare`` makes the namespaces, a short shell script the mounts.

    Needs root (or CAP_SYS_ADMIN). The writable trees are opened (fd 3, 4, ...) before the masks
    go on, then bound back from ``/proc/self/fd/N``, which still names the original directories.
    Every mount that existed is remounted read-only; capabilities are dropped with ``setpriv``.
    It makes no user namespace and no seccomp filter (keyrings stay reachable) and no throwaway
    trees: the probe says so, and pw then checks trees by snapshot.
    """
    _check(layout)
    if layout.throwaway:
        raise ValueError("the unshare fallback has no throwaway trees")
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


def wrap(sandbox: Sandbox, layout: Layout, argv: Sequence[str], *, seccomp_fd: int | None = None) -> list[str]:
    """``argv`` run inside ``sandbox`` with ``layout``; ``seccomp_fd`` (bwrap only) as ``seccomp_pipe``
    gives it, inherited by the command."""
    if sandbox.tool == "bwrap":
        return bwrap_argv(sandbox.exe, layout, argv, devices=devices(), seccomp_fd=seccomp_fd)
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
        fd = seccomp_pipe() if tool == "bwrap" else None
        try:
            r = subprocess.run(wrap(cand, layout, check, seccomp_fd=fd), capture_output=True, timeout=_PROBE_TIMEOUT_S,
                               env=environment({"PATH": "/usr/bin:/bin"}), check=False,
                               pass_fds=() if fd is None else (fd,))
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"{tool}: {exc}"
        finally:
            if fd is not None:
                os.close(fd)
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

"""Copies of source trees and their content hashes.

The user's tree is only ever read. A copy leaves out version-control data and build outputs (ELF
files, objects, caches), so a stale binary in the user's tree can never be timed in place of a
fresh build.
"""

from __future__ import annotations

import errno
import fcntl
import fnmatch
import hashlib
import os
import shutil
import stat
from pathlib import Path

from ledger.errors import InputError
from ledger.files import refused_writes

# The judge-uid set-up (docs/trust-model.md): the group of the agent's uid, which may write the
# candidate workspaces `pw prepare` makes and nothing else of a run.
AGENT_GROUP_ENV = "PW_AGENT_GROUP"

_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".pytest_cache", ".mypy_cache", ".venv", "node_modules"})
_SKIP_SUFFIXES = (".o", ".obj", ".so", ".a", ".pyc", ".pyo", ".gcda", ".gcno")


def is_build_output(path: Path) -> bool:
    if path.name.endswith(_SKIP_SUFFIXES):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except PermissionError:
        raise _unreadable(path, "file") from None
    except OSError:
        return False


def unreadable(exc: PermissionError) -> InputError:
    """The one line for a part of the workload this user may not read (`exc` names it)."""
    return _unreadable(Path(exc.filename or "?"), "file or folder")


def _unreadable(path: Path, what: str) -> InputError:
    """A source file or folder this user cannot read: refused before anything is copied or built."""
    return InputError(f"{path}: this {what} of the source tree cannot be read (permission denied); every source "
                      "file is copied and built: make it readable (chmod u+r) or leave it out with source.exclude "
                      "in profileweaver.json")


def _walk_error(exc: OSError) -> None:
    if isinstance(exc, PermissionError):
        raise _unreadable(Path(exc.filename), "folder")


def source_files(root: Path, *, exclude: list[str] = (), skip: tuple[Path, ...] = ()) -> list[str]:
    """Relative POSIX paths of the files that make up the source tree, sorted."""
    skip_resolved = {p.resolve() for p in skip}
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=_walk_error):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and (here / d).resolve() not in skip_resolved
        )
        for name in sorted(filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() or not path.is_file():
                continue
            if any(fnmatch.fnmatch(rel, pat) for pat in exclude) or is_build_output(path):
                continue
            out.append(rel)
    return sorted(out)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_digest(root: Path, files: list[str]) -> str:
    """sha256 over (path, content hash) of each file: equal trees hash equal anywhere."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + file_sha256(root / rel).encode() + b"\n")
    return h.hexdigest()


_FICLONE = 0x40049409  # linux/fs.h: share the source's extents copy-on-write (btrfs, xfs, overlay on them)
# errno values by which a filesystem pair says "not this way" (no reflinks, no in-kernel copy between
# these two filesystems): the next method is tried. Any other error (a full disk) is the answer.
_UNSUPPORTED = frozenset({errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EBADF})
REFLINK, KERNEL_COPY, PLAIN_COPY = "reflink", "copy_file_range", "read-write"
# (source device, target device) pairs where a method failed once: not tried again for them.
_no_reflink: set[tuple[int, int]] = set()
_no_kernel_copy: set[tuple[int, int]] = set()


def _copy_range(fin: int, fout: int, size: int) -> None:
    left = size
    while left > 0:
        n = os.copy_file_range(fin, fout, left)
        if n == 0:
            break
        left -= n


def _copy_plain(fin: int, fout: int) -> None:
    while chunk := os.read(fin, 1 << 20):
        view = memoryview(chunk)
        while view:
            view = view[os.write(fout, view):]


def _clone(src: Path, target: Path) -> str:
    """A copy-on-write clone where the filesystem has them (nothing is shared that a later write
    could change on both sides), else an in-kernel byte copy, else (another filesystem, as a runs
    directory on a tmpfs or a scratch volume is) a plain read/write copy; permission bits kept, not
    times. Returns the method that copied it. Never a hard link: the user's tree must stay
    untouchable, whatever a build does to its copy."""
    try:
        fin = os.open(src, os.O_RDONLY)
    except PermissionError:
        raise _unreadable(src, "file") from None
    try:
        st = os.fstat(fin)
        with refused_writes(target):
            fout = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            pair = (st.st_dev, os.fstat(fout).st_dev)
            with refused_writes(target):
                method = _copy_into(fin, fout, st.st_size, pair)
                os.fchmod(fout, st.st_mode & 0o7777)
        finally:
            os.close(fout)
    finally:
        os.close(fin)
    return method


def _copy_into(fin: int, fout: int, size: int, pair: tuple[int, int]) -> str:
    if pair not in _no_reflink:
        try:
            fcntl.ioctl(fout, _FICLONE, fin)
            return REFLINK
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            _no_reflink.add(pair)
    if pair not in _no_kernel_copy:
        try:
            _copy_range(fin, fout, size)
            return KERNEL_COPY
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
            _no_kernel_copy.add(pair)
            os.ftruncate(fout, 0)  # start over from byte 0 whatever the failed method copied
            os.lseek(fout, 0, os.SEEK_SET)
            os.lseek(fin, 0, os.SEEK_SET)
    _copy_plain(fin, fout)
    return PLAIN_COPY


def copy_files(src: Path, dest: Path, files: list[str]) -> list[str]:
    """Copy the listed files, preserving relative layout and permission bits (not times); returns
    the methods that copied them (`reflink`, `copy_file_range`, `read-write`), each once."""
    made: set[Path] = set()
    methods: dict[str, None] = {}
    for rel in files:
        target = dest / rel
        if target.parent not in made:
            with refused_writes(target.parent):
                target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        methods[_clone(src / rel, target)] = None
    return list(methods)


def share_with_agent(root: Path) -> None:
    """With ``$PW_AGENT_GROUP`` set (pw runs as the judge's uid): make the candidate workspace
    ``root`` the agent's to write (that group, group-writable, directories setgid so new files stay
    in it). Everything else pw writes keeps the judge's umask: readable, not writable, by the group."""
    import grp

    name = os.environ.get(AGENT_GROUP_ENV)
    if not name:
        return
    try:
        gid = grp.getgrnam(name).gr_gid
    except KeyError:
        raise InputError(f"{AGENT_GROUP_ENV}={name}: no such group (expected the agent's group, "
                         "docs/trust-model.md)") from None
    paths = [root, *sorted(root.rglob("*"))]
    try:
        for path in paths:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                continue
            os.chown(path, -1, gid)
            extra = 0o2070 if stat.S_ISDIR(st.st_mode) else 0o060
            os.chmod(path, stat.S_IMODE(st.st_mode) | extra)
    except PermissionError as exc:
        raise InputError(f"{AGENT_GROUP_ENV}={name}: cannot give {root} to that group ({exc.strerror}); "
                         "the judge's uid must be a member of it") from None


def fresh_copy(src: Path, dest: Path, files: list[str]) -> None:
    """Replace `dest` with a copy of exactly `files` from `src`."""
    with refused_writes(dest):
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
    copy_files(src, dest, files)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under root: cheap change detection around a profiled run
    (whose created files its callers remove). A path it cannot stat (too long, gone) is left out:
    the runs' own checks (pw.workload.changes) name such things."""
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            try:
                st = path.lstat()
            except OSError:
                continue
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out

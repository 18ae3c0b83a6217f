"""Copies of source trees and their content hashes.

The user's tree is only ever read. A copy leaves out version-control data and build outputs (ELF
files, objects, caches), so a stale binary in the user's tree can never be timed in place of a
fresh build.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import os
import shutil
import stat
from pathlib import Path

from ledger.errors import InputError

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
    except OSError:
        return False


def source_files(root: Path, *, exclude: list[str] = (), skip: tuple[Path, ...] = ()) -> list[str]:
    """Relative POSIX paths of the files that make up the source tree, sorted."""
    skip_resolved = {p.resolve() for p in skip}
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
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
_no_reflink: set[int] = set()  # devices where the ioctl failed once: not tried again


def _clone(src: Path, target: Path) -> None:
    """A copy-on-write clone where the filesystem has them (nothing is shared that a later write
    could change on both sides), else an in-kernel byte copy; permission bits kept, not times.
    Never a hard link: the user's tree must stay untouchable, whatever a build does to its copy."""
    fin = os.open(src, os.O_RDONLY)
    try:
        st = os.fstat(fin)
        fout = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            cloned = False
            if st.st_dev not in _no_reflink:
                try:
                    fcntl.ioctl(fout, _FICLONE, fin)
                    cloned = True
                except OSError:
                    _no_reflink.add(st.st_dev)
            if not cloned:
                left = st.st_size
                while left > 0:
                    n = os.copy_file_range(fin, fout, left)
                    if n == 0:
                        break
                    left -= n
            os.fchmod(fout, st.st_mode & 0o7777)
        finally:
            os.close(fout)
    finally:
        os.close(fin)


def copy_files(src: Path, dest: Path, files: list[str]) -> None:
    """Copy the listed files, preserving relative layout and permission bits (not times)."""
    made: set[Path] = set()
    for rel in files:
        target = dest / rel
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        _clone(src / rel, target)


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

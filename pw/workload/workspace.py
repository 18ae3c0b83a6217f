"""Copies of source trees and their content hashes.

The user's tree is only ever read. A copy leaves out version-control data and build outputs (ELF
files, objects, caches), so a stale binary in the user's tree can never be timed in place of a
fresh build.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
from pathlib import Path

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


def copy_files(src: Path, dest: Path, files: list[str]) -> None:
    """Copy the listed files, preserving relative layout and permission bits (not times)."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, target)
        shutil.copymode(src / rel, target)


def fresh_copy(src: Path, dest: Path, files: list[str]) -> None:
    """Replace `dest` with a copy of exactly `files` from `src`."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    copy_files(src, dest, files)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under root: cheap change detection around a run."""
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out

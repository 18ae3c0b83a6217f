"""What a run changed in its tree, and built trees pw refuses to judge.

A run's tree is shown to it through a throwaway overlay where the sandbox can make one
(``adapters.sandbox.Throwaway``): every change lands in the overlay's upper layer, which pw walks
after the run (``overlay_changes``) and then discards, so nothing reaches the next run. Where no
overlay can be made the tree is snapshotted before and after the run (``tree_state``,
``state_changes``). Either way a change is named in the same words (``created``, ``modified``,
``deleted``, ``replaced``, ``changed the mode of``, ...), which the campaign compares with what the
baseline's own run leaves: directories, links, fifos, modes and extended attributes count, and a
file's content is compared by its bytes (overlay) or by its change time (snapshot, which no
program can set back), never by size and mtime alone.

Hostile trees (paths longer than PATH_MAX, a million entries, fifos and sockets, links out of the
tree, files pw cannot read) never crash a walk: ``built_files`` refuses them (a ``WorkloadError``
whose one line names the first problem), the listings name them as changes. Every walk is
iterative, never opens a path of PATH_MAX bytes or more, and stops after ``MAX_ENTRIES`` entries.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import msgspec

from ledger.errors import WorkloadError

PATH_MAX = 4096  # linux/limits.h, counting the terminating NUL
# More entries than this in a built tree, or changed by one run, is refused: it bounds the time of
# every walk whatever a program writes (measured: 8 s to refuse at 200 000 entries on the 2-core VM
# at load 7, so about half that here).
MAX_ENTRIES = 100_000
_CHUNK = 1 << 20
_SHOWN_PATH = 160  # characters of a path shown in a change's words
# Extended attributes that are not the program's: overlayfs's own (an unprivileged overlay keeps
# them as user.overlay.*) and security labels, which the kernel sets.
_NOT_THE_PROGRAMS = ("user.overlay.", "trusted.overlay.", "security.")


def _hostile(message: str) -> WorkloadError:
    """A built tree pw will not hash or time, what it holds in one line: a ``WorkloadError`` of class
    ``caught`` (exit 1 where it reaches the command line; a failed build where ``build`` meets it)."""
    return WorkloadError(message, failure_class="caught")


class Entry(msgspec.Struct, frozen=True, array_like=True):
    """What a snapshot keeps of one entry (lstat): enough to see any change a program can make.
    ``ctime_ns`` moves on every write, chmod and attribute change, and no program can set it back."""

    kind: str
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    target: str = ""  # a link's target


class TreeState(msgspec.Struct, frozen=True):
    """A snapshot of a tree: every entry by relative path, and what could not be walked (words)."""

    entries: dict[str, Entry]
    problems: list[str]


class Changes(msgspec.Struct, frozen=True):
    """What one run changed in its tree: ``words`` (one per change, sorted), and the relative paths
    of the regular files it created (its outputs), readable under ``where``."""

    words: list[str]
    created_files: list[str]
    where: str


def shown(rel: str) -> str:
    """A relative path as a change's words show it: printable, at most ``_SHOWN_PATH`` characters."""
    text = rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
    if len(text) > _SHOWN_PATH:
        return f"{text[:_SHOWN_PATH]}... ({len(os.fsencode(rel))} bytes)"
    return text


def _kind(mode: int, rdev: int = -1) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) and rdev == 0:
        return "whiteout"  # overlayfs: the lower entry of this name is deleted
    return "device"


def _too_long(path: str) -> bool:
    return len(os.fsencode(path)) >= PATH_MAX - 1


def _walk(root: str, limit: int) -> Iterator[tuple[str, os.stat_result | None, str | None]]:
    """(relative path, lstat, None) for every entry under ``root``, parents before children, or
    (relative path, None, problem) where a path is too long, a directory cannot be listed, or the
    limit is reached (then the walk ends). Iterative: depth costs no recursion."""
    stack = [""]
    seen = 0
    while stack:
        rel = stack.pop()
        here = os.path.join(root, rel) if rel else root
        try:
            with os.scandir(here) as it:
                names = sorted(e.name for e in it)
        except OSError as exc:
            yield rel, None, f"unreadable:{exc.strerror or exc}"
            continue
        subdirs = []
        for name in names:
            child = f"{rel}/{name}" if rel else name
            seen += 1
            if seen > limit:
                yield child, None, "too-many"
                return
            full = os.path.join(root, child)
            if _too_long(full):
                yield child, None, "too-long"
                continue
            try:
                st = os.lstat(full)
            except OSError as exc:
                yield child, None, f"unreadable:{exc.strerror or exc}"
                continue
            yield child, st, None
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(child)
        stack.extend(reversed(subdirs))


def _problem_words(rel: str, problem: str, limit: int) -> str:
    if problem == "too-many":
        return f"changed more than {limit} entries (the listing stopped there)"
    if problem == "too-long":
        parent = rel.rsplit("/", 1)[0] if "/" in rel else "."
        return f"made a path longer than PATH_MAX ({PATH_MAX} bytes) under {shown(parent)}"
    return f"left {shown(rel)}, which pw cannot read ({problem.split(':', 1)[1]})"


# --- built trees -----------------------------------------------------------------------------------

def built_files(root: Path, *, limit: int = MAX_ENTRIES) -> list[str]:
    """Relative paths of the regular files of a built tree, sorted; a ``WorkloadError`` (class caught) for a
    tree pw cannot judge: too many entries, a path too long to open, a directory or file it cannot read,
    a fifo, socket or device, a link that leaves the tree."""
    base = str(root)
    real = os.path.realpath(base)
    files = []
    for rel, st, problem in _walk(base, limit):
        if problem == "too-many":
            raise _hostile(f"its built tree holds more than {limit} entries")
        if problem == "too-long":
            raise _hostile(f"its built tree holds a path longer than PATH_MAX ({PATH_MAX} bytes): {shown(rel)}")
        if problem is not None:
            raise _hostile(f"its built tree holds {shown(rel)}, which pw cannot read ({problem.split(':', 1)[1]})")
        kind = _kind(st.st_mode, st.st_rdev)
        if kind == "file":
            if not os.access(os.path.join(base, rel), os.R_OK):
                raise _hostile(f"its built tree holds {shown(rel)}, which pw cannot read")
            files.append(rel)
        elif kind == "link":
            target = os.readlink(os.path.join(base, rel))
            if _leaves(rel, target, real):
                raise _hostile(f"its built tree holds a link out of the tree: {shown(rel)} to {shown(target)}")
        elif kind != "directory":
            raise _hostile(f"its built tree holds a {'device' if kind == 'whiteout' else kind}: {shown(rel)}")
    return sorted(files)


def _leaves(rel: str, target: str, real_root: str) -> bool:
    """Whether a link at ``rel`` to ``target`` points outside the tree (lexically: what it names
    when the tree is anywhere, as a copy of it would be)."""
    if os.path.isabs(target):
        return not (target == real_root or target.startswith(real_root.rstrip("/") + "/"))
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined == ".." or joined.startswith("../") or joined.startswith("/")


# --- what a run changed: the overlay's upper layer -------------------------------------------------

def _xattrs(path: str) -> dict[str, bytes]:
    """The program's extended attributes of ``path`` (not following a link)."""
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    out = {}
    for name in names:
        if name.startswith(_NOT_THE_PROGRAMS):
            continue
        try:
            out[name] = os.getxattr(path, name, follow_symlinks=False)
        except OSError:
            out[name] = b"?"
    return out


def _overlay_flag(path: str, name: str) -> bool:
    for prefix in ("user.overlay.", "trusted.overlay."):
        try:
            if os.getxattr(path, prefix + name, follow_symlinks=False) in (b"y", b"y\0"):
                return True
        except OSError:
            continue
    return False


def _same_bytes(a: str, b: str) -> bool | None:
    """Whether two files hold the same bytes; None when either cannot be read."""
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(_CHUNK), fb.read(_CHUNK)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return None


def _created_words(rel: str, kind: str, target: str = "") -> str:
    if kind == "file":
        return f"created {shown(rel)}"
    if kind == "link":
        return f"created link {shown(rel)} to {shown(target)}"
    return f"created {kind} {shown(rel)}"


def _metadata_words(rel: str, old_mode: int, new_mode: int, old_x: dict, new_x: dict) -> list[str]:
    out = []
    if stat.S_IMODE(old_mode) != stat.S_IMODE(new_mode):
        out.append(f"changed the mode of {shown(rel)} ({stat.S_IMODE(old_mode):o} to {stat.S_IMODE(new_mode):o})")
    if old_x != new_x:
        names = sorted(set(old_x) ^ set(new_x) | {k for k in set(old_x) & set(new_x) if old_x[k] != new_x[k]})
        out.append(f"changed the extended attributes of {shown(rel)} ({', '.join(shown(n) for n in names)})")
    return out


def overlay_changes(upper: Path, lower: Path, *, skip: frozenset[str] = frozenset(),
                    limit: int = MAX_ENTRIES) -> Changes:
    """What a run changed, read from its overlay's upper layer against the tree under it.

    Every entry of the upper layer was written, created, deleted (a whiteout) or had its metadata
    changed by the run (overlayfs copies an entry up before any change, even one that restores the
    old state); each is compared with the lower entry by kind, bytes, link target, mode and the
    program's extended attributes, so an entry copied up and left as it was is no change. A
    created directory is named only when nothing under it is (an empty directory is state too).
    ``skip``: relative paths not to name (the oracle's declared output file)."""
    up, low = str(upper), str(lower)
    words: list[str] = []
    created: list[str] = []
    created_dirs: list[str] = []
    named_under: set[str] = set()  # directories below which something was named

    def name(rel: str, text: str) -> None:
        words.append(text)
        parts = rel.split("/")
        for i in range(1, len(parts)):
            named_under.add("/".join(parts[:i]))

    for rel, st, problem in _walk(up, limit):
        if problem is not None:
            name(rel, _problem_words(rel, problem, limit))
            continue
        if rel in skip:
            name(rel, "")  # not named itself, but its directories are not empty
            continue
        path, lpath = os.path.join(up, rel), os.path.join(low, rel)
        kind = _kind(st.st_mode, st.st_rdev)
        try:
            lst = None if _too_long(lpath) else os.lstat(lpath)
        except OSError:
            lst = None
        lkind = _kind(lst.st_mode, lst.st_rdev) if lst is not None else None
        if kind == "whiteout":
            if lst is not None:
                name(rel, f"deleted {shown(rel)}")
            continue
        target = os.readlink(path) if kind == "link" else ""
        if lst is None:
            if kind == "directory":
                created_dirs.append(rel)
            else:
                name(rel, _created_words(rel, kind, target))
                if kind == "file":
                    created.append(rel)
            continue
        if kind != lkind:
            name(rel, f"replaced {shown(rel)} ({lkind} to {kind})")
            continue
        if kind == "directory" and _overlay_flag(path, "opaque"):
            # Deleted and made again: what the lower directory held and the upper does not is gone.
            for child in sorted(_names(lpath) - _names(path)):
                name(f"{rel}/{child}", f"deleted {shown(rel + '/' + child)}")
        if kind == "file" and not _overlay_flag(path, "metacopy"):
            same = st.st_size == lst.st_size and _same_bytes(path, lpath)
            if same is None:
                name(rel, f"left {shown(rel)}, which pw cannot read")
            elif not same:
                name(rel, f"modified {shown(rel)}")
        elif kind == "link" and target != os.readlink(lpath):
            name(rel, f"modified link {shown(rel)} (to {shown(target)})")
        for text in _metadata_words(rel, lst.st_mode, st.st_mode, _xattrs(lpath), _xattrs(path)):
            name(rel, text)
    for rel in created_dirs:
        if rel not in named_under:
            words.append(f"created directory {shown(rel)}")
    return Changes(words=sorted(w for w in words if w), created_files=sorted(created), where=up)


def _names(path: str) -> set[str]:
    try:
        return set(os.listdir(path))
    except OSError:
        return set()


# --- what a run changed: snapshots before and after (no overlay) -----------------------------------

def tree_state(root: Path, *, limit: int = MAX_ENTRIES) -> TreeState:
    """Every entry of a tree (lstat only: no file is read), and what could not be walked."""
    entries: dict[str, Entry] = {}
    problems: list[str] = []
    base = str(root)
    for rel, st, problem in _walk(base, limit):
        if problem is not None:
            problems.append(_problem_words(rel, problem, limit))
            continue
        kind = _kind(st.st_mode, st.st_rdev)
        target = ""
        if kind == "link":
            try:
                target = os.readlink(os.path.join(base, rel))
            except OSError:
                target = "?"
        entries[rel] = Entry(kind, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, target)
    return TreeState(entries=entries, problems=problems)


def state_changes(before: TreeState, after: TreeState, *, skip: frozenset[str] = frozenset()) -> Changes:
    """What changed between two snapshots of one tree, in ``overlay_changes``'s words. Contents
    are not read: a file is modified when its size, times or inode moved (its change time moves
    with any write, whatever the program does to its mtime)."""
    old, new = before.entries, after.entries
    words = [w for w in after.problems if w not in set(before.problems)]
    created = []
    made_dirs = []
    named_under: set[str] = set()

    def name(rel: str, text: str) -> None:
        words.append(text)
        parts = rel.split("/")
        for i in range(1, len(parts)):
            named_under.add("/".join(parts[:i]))

    for rel, e in new.items():
        if rel in skip:
            name(rel, "")
            continue
        was = old.get(rel)
        if was is None:
            if e.kind == "directory":
                made_dirs.append(rel)
            else:
                name(rel, _created_words(rel, e.kind, e.target))
                if e.kind == "file":
                    created.append(rel)
        elif was.kind != e.kind:
            name(rel, f"replaced {shown(rel)} ({was.kind} to {e.kind})")
        else:
            mode_changed = stat.S_IMODE(was.mode) != stat.S_IMODE(e.mode)
            if e.kind != "directory" and ((was.size, was.mtime_ns, was.ino, was.target) != (e.size, e.mtime_ns, e.ino, e.target)
                                          or (was.ctime_ns != e.ctime_ns and not mode_changed)):
                name(rel, f"modified {shown(rel)}")  # ctime alone: rewritten with its mtime put back, or an attribute
            for text in _metadata_words(rel, was.mode, e.mode, {}, {}):
                name(rel, text)
    gone = sorted(set(old) - set(new) - skip)
    for rel in gone:
        parent = rel.rsplit("/", 1)[0] if "/" in rel else None
        if parent is None or parent in new:  # a deleted directory's contents went with it
            name(rel, f"deleted {shown(rel)}")
    for rel in made_dirs:
        if rel not in named_under:
            words.append(f"created directory {shown(rel)}")
    return Changes(words=sorted(w for w in words if w), created_files=sorted(created), where="")


def remove_created(root: Path, before: TreeState, after: TreeState) -> None:
    """Remove what a run created in its tree (not what it modified or deleted): the next run then
    starts from the tree as built, as near as a tree without an overlay can. A created directory
    goes whole (with ``rm -rf``, which no depth stops)."""
    made = sorted(set(after.entries) - set(before.entries))
    tops = [rel for rel in made if not any(p in after.entries and p not in before.entries for p in _parents(rel))]
    for rel in tops:
        path = root / rel
        if after.entries[rel].kind == "directory":
            subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        else:
            try:
                path.unlink()
            except OSError:
                pass


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def names_anything(path: Path) -> bool:
    """Whether a directory holds any entry (or is not a directory one can list: then it is no
    empty upper layer either)."""
    try:
        with os.scandir(path) as it:
            return next(it, None) is not None
    except FileNotFoundError:
        return False
    except OSError:
        return True


def discard(path: Path) -> None:
    """Remove a run's overlay changes directory, however deep or odd what it holds."""
    if not path.exists():
        return
    try:
        shutil.rmtree(path)
    except (OSError, RecursionError):
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)

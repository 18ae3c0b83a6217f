"""Where a workload's project starts: the directory pw copies when the build reaches outside it.

A kernel of a benchmark suite is built by a Makefile that does `include ../../config.mk` and
compiles `-I../../utilities ../../utilities/common.c`; copying only the kernel directory cannot
build it. This module reads what the build files reference (make `include`, `-I`, relative source
paths, variables holding them; CMake paths such as `add_subdirectory(../..)`; C `#include "../x.h"`;
a Python package nested in a parent package) and picks the nearest ancestor of the workload that
holds every referenced path. The repository root (the nearest `.git`) is named in the reason but
is not copied unless it is that ancestor: the nearest one builds the same and copies less.
Bounded: at most MAX_LEVELS directories up, never `/`.

`rebase` turns a contract written relative to the workload directory into one relative to the
copied root: steps run from the workload directory inside it, editable globs and references point
at the workload's own files.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path, PurePosixPath

import msgspec

from ledger.contract import Contract, Holdout
from ledger.errors import InputError

MAX_LEVELS = 6
MAX_SCANNED_BYTES = 1 << 20  # a build file larger than this is not a hand-written one; read its head

_MAKEFILES = ("Makefile", "makefile", "GNUmakefile")
_C_SOURCES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu", ".cuh")
_SKIP_DIRS = frozenset({".git", "build", "CMakeFiles", "__pycache__", ".venv", "node_modules"})

_ASSIGN = re.compile(r"^\s*(?:export\s+|override\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?::{1,3}=|\?=|=)\s*(.*?)\s*$")
_MAKE_INCLUDE = re.compile(r"^\s*(?:-include|sinclude|include)\s+(.+?)\s*$")
_VAR_REF = re.compile(r"\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]")
_C_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
_CMAKE_DIR_VARS = ("${CMAKE_CURRENT_SOURCE_DIR}", "${CMAKE_CURRENT_LIST_DIR}")
_TOKEN_SPLIT = re.compile(r"[\s()\"';,]+")


class Reference(msgspec.Struct, frozen=True):
    """One path a build file names: where it is named, how, the text, and what it resolves to."""

    where: str  # file:line, relative to the workload (or the path as given when outside)
    kind: str  # "make include", "-I", "source path", "cmake path", "#include", "python parent package"
    text: str
    resolved: str  # absolute, normalized


class RootDecision(msgspec.Struct, frozen=True):
    root: str  # absolute
    workload_rel: str  # the workload directory inside the root ("." when they are the same)
    references: list[Reference]  # those outside the workload
    reason: str

    @property
    def is_ancestor(self) -> bool:
        return self.workload_rel != "."


def _read(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_SCANNED_BYTES).decode(errors="replace")
    except OSError:
        return ""


def _strip_comment(line: str) -> str:
    return line.split("#", 1)[0]


def _where(path: Path, workload: Path, lineno: int) -> str:
    try:
        rel = path.relative_to(workload).as_posix()
    except ValueError:
        rel = os.path.relpath(path, workload)
    return f"{rel}:{lineno}"


def _resolve(text: str, base: Path) -> str:
    return os.path.normpath(text if os.path.isabs(text) else os.path.join(base, text))


def _expand(text: str, variables: dict[str, str], depth: int = 0) -> str:
    if depth > 8 or "$" not in text:
        return text
    return _expand(_VAR_REF.sub(lambda m: variables.get(m.group(1), m.group(0)), text), variables, depth + 1)


def _relative_tokens(text: str) -> list[tuple[str, str]]:
    """(kind, path) for the tokens of a command or value that name a relative path upward."""
    out = []
    for tok in _TOKEN_SPLIT.split(text):
        kind = "source path"
        for flag in ("-I", "-L", "-isystem", "-iquote"):
            if tok.startswith(flag) and len(tok) > len(flag):
                kind, tok = flag if flag != "-L" else "-L", tok[len(flag):]
                break
        if tok.startswith("../") or tok == ".." or "/../" in tok:
            out.append((kind, tok))
    return out


def make_references(workload: Path) -> list[Reference]:
    """Paths named by the workload's makefiles and the makefiles they include (followed, once)."""
    refs: list[Reference] = []
    variables: dict[str, str] = {}
    queue = [workload / name for name in _MAKEFILES if (workload / name).is_file()]
    seen: set[Path] = set()
    while queue:
        mk = queue.pop(0)
        if mk in seen:
            continue
        seen.add(mk)
        for lineno, raw in enumerate(_read(mk).splitlines(), start=1):
            line = _strip_comment(raw)
            if not line.strip():
                continue
            assign = _ASSIGN.match(line)
            if assign and not line.startswith("\t"):
                variables.setdefault(assign.group(1), assign.group(2))
            inc = _MAKE_INCLUDE.match(line)
            if inc and not line.startswith("\t"):
                for tok in _expand(inc.group(1), variables).split():
                    if "$" in tok:
                        continue
                    target = _resolve(tok, workload)  # make resolves includes from its own cwd
                    refs.append(Reference(_where(mk, workload, lineno), "make include", tok, target))
                    if os.path.isfile(target):
                        queue.append(Path(target))
                continue
            for kind, tok in _relative_tokens(_expand(line, variables)):
                if "$" not in tok:
                    refs.append(Reference(_where(mk, workload, lineno), kind, tok, _resolve(tok, workload)))
    return refs


def _walk(workload: Path):
    for dirpath, dirnames, filenames in os.walk(workload):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            yield Path(dirpath) / name


def cmake_and_c_references(workload: Path) -> list[Reference]:
    refs: list[Reference] = []
    for path in _walk(workload):
        if path.name == "CMakeLists.txt" or path.suffix == ".cmake":
            for lineno, raw in enumerate(_read(path).splitlines(), start=1):
                line = _strip_comment(raw)
                for var in _CMAKE_DIR_VARS:
                    line = line.replace(var + "/", "").replace(var, ".")
                for _, tok in _relative_tokens(line):
                    if "$" not in tok:  # CMake resolves relative paths from the listing's directory
                        refs.append(Reference(_where(path, workload, lineno), "cmake path", tok,
                                              _resolve(tok, path.parent)))
        elif path.suffix in _C_SOURCES:
            for lineno, raw in enumerate(_read(path).splitlines(), start=1):
                m = _C_INCLUDE.match(raw)
                if m and m.group(1).startswith("../"):
                    refs.append(Reference(_where(path, workload, lineno), "#include", m.group(1),
                                          _resolve(m.group(1), path.parent)))
    return refs


def python_references(workload: Path) -> list[Reference]:
    """A package directory inside a parent package imports through it: the path entry is the
    first ancestor that is not a package."""
    if not (workload / "__init__.py").is_file() or not (workload.parent / "__init__.py").is_file():
        return []
    top = workload.parent
    while (top.parent / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    dotted = ".".join(workload.relative_to(top.parent).parts)
    return [Reference("__init__.py:1", "python parent package", dotted, str(top.parent))]


def repository_root(workload: Path) -> Path | None:
    try:
        proc = subprocess.run(["git", "-C", str(workload), "rev-parse", "--show-toplevel"], capture_output=True,
                              timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = proc.stdout.decode(errors="replace").strip()
    return Path(out).resolve() if proc.returncode == 0 and out else None


def _inside(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(str(root).rstrip(os.sep) + os.sep)


def _summary(refs: list[Reference], n: int = 4) -> str:
    shown, seen = [], set()
    for r in refs:
        key = (r.kind, r.text)
        if key not in seen:
            seen.add(key)
            shown.append(f"{r.kind} {r.text} ({r.where})" if r.kind != "source path" else f"{r.text} ({r.where})")
    more = f", and {len(shown) - n} more" if len(shown) > n else ""
    return ", ".join(shown[:n]) + more


def nearest_root(workload: Path, outside: list[Reference]) -> Path:
    """The nearest ancestor holding every referenced path; bounded and never `/`."""
    wl = workload.resolve()
    anc = wl
    for _ in range(MAX_LEVELS):
        if anc.parent == anc:
            break
        anc = anc.parent
        if anc.parent == anc:  # `/` itself
            break
        if all(_inside(r.resolved, anc) for r in outside):
            return anc
    far = max(outside, key=lambda r: len(os.path.relpath(r.resolved, wl).split(os.sep)))
    raise InputError(
        f"{workload}: the build references {far.text} ({far.where}), outside every ancestor up to {MAX_LEVELS} "
        "levels (and never /); add a profileweaver.json whose source.root names the project's root"
    )


def discover_root(workload: Path) -> RootDecision:
    """Where to copy from and why. The workload itself when nothing reaches outside it."""
    wl = workload.resolve()
    refs = make_references(wl) + cmake_and_c_references(wl) + python_references(wl)
    # Only paths that exist decide the root: a missing `-include deps.d` is generated by the build.
    outside = [r for r in refs if not _inside(r.resolved, wl) and os.path.exists(r.resolved)]
    if not outside:
        return RootDecision(root=str(wl), workload_rel=".", references=[], reason="the build stays inside the workload")
    root = nearest_root(wl, outside)
    repo = repository_root(wl)
    if repo is None:
        repo_note = "no repository around it"
    elif repo == root:
        repo_note = "it is the repository root"
    else:
        repo_note = f"the repository root {repo} is not needed"
    reason = (f"the build reaches outside the workload: {_summary(outside)}; {root} is the nearest ancestor "
              f"holding every referenced path ({repo_note})")
    return RootDecision(root=str(root), workload_rel=wl.relative_to(root).as_posix(), references=outside,
                        reason=reason)


def check_ancestor(value: str, workload: Path, name: str) -> Path:
    """`source.root` naming an ancestor ("../.."): it must be one, bounded, and never `/`."""
    target = (workload / value).resolve()
    wl = workload.resolve()
    levels = len(wl.relative_to(target).parts) if wl.is_relative_to(target) else 0
    if levels == 0 or target.parent == target or levels > MAX_LEVELS or "\x00" in value:
        raise InputError(f"{name}: source.root: expected a path inside the workload or one of its ancestors "
                         f"(at most {MAX_LEVELS} levels up, never /), got {value!r}")
    return target


def is_ancestor_path(value: str) -> bool:
    return ".." in PurePosixPath(value).parts


def _join(prefix: str, rel: str) -> str:
    return (PurePosixPath(prefix) / rel).as_posix() if prefix != "." else rel


def rebase(contract: Contract, workload_rel: str) -> Contract:
    """Fields written relative to the workload, made relative to the copied root that holds it."""
    if workload_rel == ".":
        return contract
    o = contract.oracle
    rs = msgspec.structs.replace
    return rs(
        contract,
        source=rs(contract.source, editable=[_join(workload_rel, g) for g in contract.source.editable],
                  exclude=[_join(workload_rel, g) for g in contract.source.exclude]),
        build=[rs(s, cwd=_join(workload_rel, s.cwd)) for s in contract.build],
        run=rs(contract.run, cwd=_join(workload_rel, contract.run.cwd)),
        inputs=[_join(workload_rel, i) for i in contract.inputs],
        oracle=rs(o, reference=_join(workload_rel, o.reference) if o.reference else None,
                  holdout=[Holdout(argv=h.argv, reference=_join(workload_rel, h.reference)) for h in o.holdout]),
    )

"""A conservative contract for a workload without `profileweaver.json`.

Rules, in order: a Makefile (its `run` target when one exists, else the executable the build
produced), a CMakeLists.txt (configure and build in `build/`), a lone C/C++ source file (compiled
with the compiler found, -O2 -g), a Python entry point. No argument is ever invented. The oracle
is `stable`: exit status 0 and output equal across two baseline runs within a relative 1e-6.
Every decision is one line in `decisions`, recorded in the ledger and printed.

When the build reaches outside the workload directory (a suite's shared `config.mk` and
utilities), the enclosing root is found (`pw.workload.root`), copied whole, and the steps run from
the workload directory inside it; the editable files are then the workload's own sources, listed
one by one, and the shared files are never editable.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from ledger.contract import Contract, Metric, Oracle, Source, Step
from ledger.errors import InputError
from pw.workload import root as roots
from pw.workload import workspace

C_SUFFIXES = (".c",)
CXX_SUFFIXES = (".cc", ".cpp", ".cxx", ".cu")
EDITABLE_GLOBS = ("*.c", "*.h", "*.cc", "*.cpp", "*.cxx", "*.hpp", "*.cu", "*.cuh", "*.py", "**/*.c", "**/*.h",
                  "**/*.cc", "**/*.cpp", "**/*.hpp", "**/*.py")
INFERRED_RTOL = 1e-6
BUILD_TIMEOUT_S = 600.0
RUN_TIMEOUT_S = 300.0


def slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return (s or "workload")[:40]


def _compiler(candidates: tuple[str, ...]) -> str | None:
    for name in candidates:
        if shutil.which(name):
            return name
    return None


def _has_make_target(workload: Path, files: list[str], target: str, cwd: str = ".") -> bool:
    # In a throwaway copy: even `make -n` remakes included makefiles (e.g. generated .d files).
    # `-r`: a built-in rule (run.sh -> run) is not a `run` target; and a target that would run
    # nothing (a file or directory named `run` that is "up to date") is not one either.
    with tempfile.TemporaryDirectory(prefix="pw-infer-") as tmp:
        workspace.copy_files(workload, Path(tmp), files)
        try:
            proc = subprocess.run(
                ["make", "-n", "-r", target], cwd=Path(tmp) / cwd, capture_output=True, timeout=30,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
    commands = [line for line in proc.stdout.decode(errors="replace").splitlines()
                if line.strip() and not line.startswith(("make:", "make["))]
    return proc.returncode == 0 and bool(commands)


def _new_executables(before: set[str], root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel in before or not path.is_file() or "CMakeFiles" in path.parts:
            continue
        if path.stat().st_mode & 0o111 and workspace.is_build_output(path):
            found.append(rel)
    return found


def _trial_build(workload: Path, files: list[str], steps: list[Step], run_cwd: str = ".") -> list[str]:
    """Build a throwaway copy to learn which executable the build produces (paths relative to
    `run_cwd`, the workload directory inside the copied root; executables elsewhere are not its own)."""
    with tempfile.TemporaryDirectory(prefix="pw-infer-") as tmp:
        root = Path(tmp)
        workspace.copy_files(workload, root, files)
        before = set(files)
        for step in steps:
            try:
                proc = subprocess.run(
                    step.argv, cwd=root / step.cwd, capture_output=True, timeout=step.timeout_s,
                    stdin=subprocess.DEVNULL,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise InputError(f"{workload}: inferred build step {' '.join(step.argv)!r} failed: {exc}") from None
            if proc.returncode != 0:
                tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
                raise InputError(f"{workload}: inferred build step {' '.join(step.argv)!r} failed: {tail[0]}")
        exes = _new_executables(before, root)
        if run_cwd == ".":
            return exes
        return [e.removeprefix(run_cwd + "/") for e in exes if e.startswith(run_cwd + "/")]


def _pick_executable(exes: list[str], workload: Path) -> str:
    if not exes:
        raise InputError(f"{workload}: the build produced no executable; add a profileweaver.json with a run step")
    if len(exes) > 1:
        listed = ", ".join(exes[:5])
        raise InputError(
            f"{workload}: the build produced several executables ({listed}); add a profileweaver.json naming one"
        )
    return exes[0]


def _shared_names(decision: roots.RootDecision) -> set[str]:
    """Base names of the shared files the build references (harness, utilities): a copy of one
    inside the workload (vendored) is the harness too, never the user's code to edit."""
    names: set[str] = set()
    for r in decision.references:
        p = Path(r.resolved)
        if p.is_dir():
            names.update(c.name for c in p.iterdir() if c.is_file())
        elif p.is_file() and p.suffix in roots._C_SOURCES:
            names.add(p.name)
    return names


def _own_sources(workload: Path, decision: roots.RootDecision) -> tuple[list[str], list[str]]:
    """(editable, vendored shared copies) among the workload's own source files, relative to the root."""
    shared = _shared_names(decision)
    editable, vendored = [], []
    for rel in workspace.source_files(workload):
        if not any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(rel, g.removeprefix("**/")) for g in EDITABLE_GLOBS):
            continue
        full = f"{decision.workload_rel}/{rel}"
        (vendored if Path(rel).name in shared else editable).append(full)
    return editable, vendored


def infer_contract(workload: Path) -> tuple[Contract, list[str]]:
    """A contract for a workload without a manifest, and the decisions that made it, one line each."""
    decision = roots.discover_root(workload)
    base = Path(decision.root)
    here = decision.workload_rel
    own = workspace.source_files(workload)
    files = workspace.source_files(base) if decision.is_ancestor else own
    decisions: list[str] = []
    if decision.is_ancestor:
        decisions.append(f"root: {decision.reason} -> copy {base} (no .git, no build outputs) and build and run "
                         f"from {here}/ inside it")
    name = slug(workload.resolve().name)
    if "Makefile" in own or "makefile" in own:
        build, run = _make_steps(workload, base, files, here, decisions)
    elif "CMakeLists.txt" in own:
        build, run = _cmake_steps(workload, base, files, here, decisions)
    else:
        build, run = _lone_program_steps(workload, decision, own, decisions)
    source = _inferred_source(workload, decision, decisions)
    decisions.append("metric: whole-process wall time")
    decisions.append(
        f"oracle: inferred (exit status 0 and stdout, stderr and files the run creates stable across two "
        f"baseline runs, rtol {INFERRED_RTOL:g})"
    )
    contract = Contract(
        version=1,
        name=name,
        source=source,
        build=build,
        run=run,
        metric=Metric(kind="wall"),
        oracle=Oracle(kind="stable", rtol=INFERRED_RTOL, atol=0.0),
    )
    return contract, decisions


def _make_steps(workload: Path, base: Path, files: list[str], here: str,
                decisions: list[str]) -> tuple[list[Step], Step]:
    """`make`, then its `run` target or the one executable a trial build produced."""
    build = [Step(argv=["make"], cwd=here, timeout_s=BUILD_TIMEOUT_S)]
    decisions.append("build: Makefile found -> `make`")
    if _has_make_target(base, files, "run", here):
        decisions.append("run: Makefile has a `run` target -> `make -s run`")
        return build, Step(argv=["make", "-s", "run"], cwd=here, timeout_s=RUN_TIMEOUT_S)
    exe = _pick_executable(_trial_build(base, files, build, here), workload)
    decisions.append(f"run: no `run` target; the build produced {exe} -> `./{exe}` with no arguments")
    return build, Step(argv=[f"./{exe}"], cwd=here, timeout_s=RUN_TIMEOUT_S)


def _cmake_steps(workload: Path, base: Path, files: list[str], here: str,
                 decisions: list[str]) -> tuple[list[Step], Step]:
    """Configure and build in build/, then the one executable a trial build produced."""
    build = [
        Step(argv=["cmake", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], cwd=here,
             timeout_s=BUILD_TIMEOUT_S),
        Step(argv=["cmake", "--build", "build", "--parallel"], cwd=here, timeout_s=BUILD_TIMEOUT_S),
    ]
    decisions.append("build: CMakeLists.txt found -> configure and build in build/ (RelWithDebInfo)")
    exe = _pick_executable(_trial_build(base, files, build, here), workload)
    decisions.append(f"run: the build produced {exe} -> `./{exe}` with no arguments")
    return build, Step(argv=[f"./{exe}"], cwd=here, timeout_s=RUN_TIMEOUT_S)


def _lone_program_steps(workload: Path, decision: roots.RootDecision, own: list[str],
                        decisions: list[str]) -> tuple[list[Step], Step]:
    """No build system: one C/C++ file compiled as it stands, a Python entry point, or a src/ package."""
    here = decision.workload_rel
    c_files = [f for f in own if f.endswith(C_SUFFIXES) and "/" not in f]
    cxx_files = [f for f in own if f.endswith(CXX_SUFFIXES) and "/" not in f]
    py_entry = next((f for f in ("main.py", "__main__.py") if f in own), None)
    py_files = [f for f in own if f.endswith(".py") and "/" not in f]
    src_pkgs = sorted({f.split("/")[1] for f in own if re.fullmatch(r"src/[A-Za-z_]\w*/__main__\.py", f)})
    if len(c_files) + len(cxx_files) == 1:
        src = (c_files or cxx_files)[0]
        cc = _compiler(("cc", "gcc", "clang")) if c_files else _compiler(("c++", "g++", "clang++"))
        if cc is None:
            raise InputError(f"{workload}: found {src} but no C/C++ compiler on PATH")
        exe = Path(src).stem
        build = [Step(argv=[cc, "-O2", "-g", "-o", exe, src, "-lm"], cwd=here, timeout_s=BUILD_TIMEOUT_S)]
        decisions.append(f"build: lone source file {src} -> `{cc} -O2 -g -o {exe} {src} -lm`")
        decisions.append(f"run: `./{exe}` with no arguments")
        return build, Step(argv=[f"./{exe}"], cwd=here, timeout_s=RUN_TIMEOUT_S)
    if py_entry or len(py_files) == 1:
        entry = py_entry or py_files[0]
        # A package inside a parent package imports through it: its path entry is the root.
        env = {"PYTHONPATH": os.path.relpath(".", here)} if any(
            r.kind == "python parent package" for r in decision.references) else {}
        decisions.append(f"run: Python entry point {entry} -> `python3 {entry}` with no arguments"
                         + (f" (PYTHONPATH={env['PYTHONPATH']}, the root)" if env else ""))
        return [], Step(argv=["python3", entry], cwd=here, env=env, timeout_s=RUN_TIMEOUT_S)
    if len(src_pkgs) == 1:
        pkg = src_pkgs[0]
        decisions.append(f"run: src/ layout package {pkg} with a __main__.py -> `python3 -m {pkg}` from src/, "
                         "no arguments")
        return [], Step(argv=["python3", "-m", pkg], cwd=(PurePosixPath(here) / "src").as_posix(),
                        timeout_s=RUN_TIMEOUT_S)
    raise InputError(
        f"{workload}: no profileweaver.json and nothing to infer from "
        "(expected a Makefile, a CMakeLists.txt, one C/C++ file, a Python entry point or a src/ package "
        "with __main__.py)"
    )


def _inferred_source(workload: Path, decision: roots.RootDecision, decisions: list[str]) -> Source:
    """What may be edited: the workload's own files when its root is an ancestor (never the shared
    ones, nor copies of them), else every source glob the workload has."""
    base = Path(decision.root)
    if decision.is_ancestor:
        editable, vendored = _own_sources(workload, decision)
        if not editable:
            raise InputError(f"{workload}: found no source file of its own to edit (only shared ones)")
        shared_dirs = sorted({os.path.relpath(r.resolved, base) for r in decision.references})
        decisions.append(f"source: editable files are the workload's own: {', '.join(editable)}")
        decisions.append("source: never editable: the shared files outside it (" + ", ".join(shared_dirs)
                         + ")" + (f" and the copies of them inside it ({', '.join(vendored)})" if vendored else ""))
        return Source(editable=editable, root=os.path.relpath(base, workload.resolve()))
    editable = sorted({g for g in EDITABLE_GLOBS if any(workload.glob(g))} or {"*"})
    decisions.append(f"source: editable files are {', '.join(editable)}")
    return Source(editable=editable)

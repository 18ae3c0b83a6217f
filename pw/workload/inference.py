"""A conservative contract for a workload without `profileweaver.json`.

Rules, in order: a Makefile (its `run` target when one exists, else the executable the build
produced), a CMakeLists.txt (configure and build in `build/`), a lone C/C++ source file (compiled
with the compiler found, -O2 -g), a Python entry point. No argument is ever invented. The oracle
is `stable`: exit status 0 and output equal across two baseline runs within a relative 1e-6.
Every decision is one line in `decisions`, recorded in the ledger and printed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ledger.contract import Contract, Metric, Oracle, Source, Step
from ledger.errors import InputError
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


def _has_make_target(workload: Path, files: list[str], target: str) -> bool:
    # In a throwaway copy: even `make -n` remakes included makefiles (e.g. generated .d files).
    # `-r`: a built-in rule (run.sh -> run) is not a `run` target; and a target that would run
    # nothing (a file or directory named `run` that is "up to date") is not one either.
    with tempfile.TemporaryDirectory(prefix="pw-infer-") as tmp:
        workspace.copy_files(workload, Path(tmp), files)
        try:
            proc = subprocess.run(
                ["make", "-n", "-r", target], cwd=tmp, capture_output=True, timeout=30, stdin=subprocess.DEVNULL
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


def _trial_build(workload: Path, files: list[str], steps: list[Step]) -> list[str]:
    """Build a throwaway copy to learn which executable the build produces."""
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
        return _new_executables(before, root)


def _pick_executable(exes: list[str], workload: Path) -> str:
    if not exes:
        raise InputError(f"{workload}: the build produced no executable; add a profileweaver.json with a run step")
    if len(exes) > 1:
        listed = ", ".join(exes[:5])
        raise InputError(
            f"{workload}: the build produced several executables ({listed}); add a profileweaver.json naming one"
        )
    return exes[0]


def infer_contract(workload: Path) -> tuple[Contract, list[str]]:
    files = workspace.source_files(workload)
    decisions: list[str] = []
    build: list[Step] = []
    name = slug(workload.resolve().name)
    if "Makefile" in files or "makefile" in files:
        build = [Step(argv=["make"], timeout_s=BUILD_TIMEOUT_S)]
        decisions.append("build: Makefile found -> `make`")
        if _has_make_target(workload, files, "run"):
            run = Step(argv=["make", "-s", "run"], timeout_s=RUN_TIMEOUT_S)
            decisions.append("run: Makefile has a `run` target -> `make -s run`")
        else:
            exe = _pick_executable(_trial_build(workload, files, build), workload)
            run = Step(argv=[f"./{exe}"], timeout_s=RUN_TIMEOUT_S)
            decisions.append(f"run: no `run` target; the build produced {exe} -> `./{exe}` with no arguments")
    elif "CMakeLists.txt" in files:
        build = [
            Step(argv=["cmake", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], timeout_s=BUILD_TIMEOUT_S),
            Step(argv=["cmake", "--build", "build", "--parallel"], timeout_s=BUILD_TIMEOUT_S),
        ]
        decisions.append("build: CMakeLists.txt found -> configure and build in build/ (RelWithDebInfo)")
        exe = _pick_executable(_trial_build(workload, files, build), workload)
        run = Step(argv=[f"./{exe}"], timeout_s=RUN_TIMEOUT_S)
        decisions.append(f"run: the build produced {exe} -> `./{exe}` with no arguments")
    else:
        c_files = [f for f in files if f.endswith(C_SUFFIXES) and "/" not in f]
        cxx_files = [f for f in files if f.endswith(CXX_SUFFIXES) and "/" not in f]
        py_entry = next((f for f in ("main.py", "__main__.py") if f in files), None)
        py_files = [f for f in files if f.endswith(".py") and "/" not in f]
        if len(c_files) + len(cxx_files) == 1:
            src = (c_files or cxx_files)[0]
            cc = _compiler(("cc", "gcc", "clang")) if c_files else _compiler(("c++", "g++", "clang++"))
            if cc is None:
                raise InputError(f"{workload}: found {src} but no C/C++ compiler on PATH")
            exe = Path(src).stem
            build = [Step(argv=[cc, "-O2", "-g", "-o", exe, src, "-lm"], timeout_s=BUILD_TIMEOUT_S)]
            run = Step(argv=[f"./{exe}"], timeout_s=RUN_TIMEOUT_S)
            decisions.append(f"build: lone source file {src} -> `{cc} -O2 -g -o {exe} {src} -lm`")
            decisions.append(f"run: `./{exe}` with no arguments")
        elif py_entry or len(py_files) == 1:
            entry = py_entry or py_files[0]
            run = Step(argv=["python3", entry], timeout_s=RUN_TIMEOUT_S)
            decisions.append(f"run: Python entry point {entry} -> `python3 {entry}` with no arguments")
        else:
            raise InputError(
                f"{workload}: no profileweaver.json and nothing to infer from "
                "(expected a Makefile, a CMakeLists.txt, one C/C++ file or a Python entry point)"
            )
    editable = sorted({g for g in EDITABLE_GLOBS if any(workload.glob(g))} or {"*"})
    decisions.append(f"source: editable files are {', '.join(editable)}")
    decisions.append("metric: whole-process wall time")
    decisions.append(
        f"oracle: inferred (exit status 0 and stdout, stderr and files the run creates stable across two "
        f"baseline runs, rtol {INFERRED_RTOL:g})"
    )
    contract = Contract(
        version=1,
        name=name,
        source=Source(editable=editable),
        build=build,
        run=run,
        metric=Metric(kind="wall"),
        oracle=Oracle(kind="stable", rtol=INFERRED_RTOL, atol=0.0),
    )
    return contract, decisions

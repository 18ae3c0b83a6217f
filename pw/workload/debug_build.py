"""A second build of the same sources with debug info, for profiling only.

Timing and the oracle always use the user's build exactly as it is. A build without `-g` (a
suite's `CFLAGS=-O2`) leaves a profiler with symbols only, and an inlined kernel shows up as
`main`. So the profile may come from a second build where every compiler call also gets `-g`,
through wrapper scripts named like the compilers (cc, gcc, clang, c++, g++, clang++) put first on
PATH: that reaches `CC=gcc` in a shared config.mk, a CMake configure and a plain `cc` call alike,
without knowing which variable the build uses. `-g` must not change the generated code; this is
checked, not assumed: the disassembled `.text` of every executable of both builds is compared
(`objdump -d`), and a difference is recorded and said in the brief.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import msgspec
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from ledger.contract import Contract
from ledger.evidence import EvidenceStore
from pw.workload import steps, workspace

WRAPPED = ("cc", "gcc", "clang", "c++", "g++", "clang++")
PROFILED_NOTE = "profiled a second build with -g (compiler wrapper)"
SUFFIX = "-profile"  # build/baseline-profile/ next to build/baseline/


class DebugBuild(msgspec.Struct, frozen=True):
    target: steps.Target | None  # where to profile; None: profile the timed build
    note: str  # one line for the ledger and the brief
    same_code: bool | None = None  # None: not compared


def _elf_executables(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*")):
        if "CMakeFiles" in path.parts or not path.is_file() or path.is_symlink():
            continue
        if path.stat().st_mode & 0o111 and workspace.is_build_output(path) and path.suffix not in (".o", ".a"):
            out.append(path.relative_to(root).as_posix())
    return out


def has_debug_info(path: Path) -> bool:
    """Whether the ELF file carries DWARF line tables (a `.debug_line` section). Read in-process
    (pyelftools): every campaign asks it of every executable of every arm."""
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            return any(elf.get_section_by_name(name) is not None for name in (".debug_line", ".zdebug_line"))
    except (OSError, ELFError, ValueError):
        return False


def text_disassembly(path: Path) -> str | None:
    """The `.text` section disassembled without raw bytes or the file name: equal text, equal code."""
    try:
        proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", str(path)], capture_output=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    lines = proc.stdout.decode(errors="replace").splitlines()
    return "\n".join(line for line in lines if "file format" not in line)


def compare_code(timed: Path, debug: Path, exes: list[str]) -> tuple[bool | None, str]:
    same, differ = [], []
    for rel in exes:
        a, b = text_disassembly(timed / rel), text_disassembly(debug / rel)
        if a is None or b is None:
            return None, f"objdump could not disassemble {rel}"
        (same if a == b else differ).append(rel)
    if differ:
        return False, f".text differs from the timed build in {', '.join(differ)} (objdump -d)"
    return True, f".text identical to the timed build in {', '.join(same)} (objdump -d)"


def write_wrappers(where: Path) -> list[str]:
    """Scripts that call the real compiler with `-g` appended; returns the names wrapped."""
    where.mkdir(parents=True, exist_ok=True)
    done = []
    for name in WRAPPED:
        real = shutil.which(name)
        if real is None:
            continue
        script = where / name
        script.write_text(f'#!/bin/sh\n# ProfileWeaver: {real} with debug info, for profiling only\nexec {real} "$@" -g\n')
        script.chmod(0o755)
        done.append(name)
    return done


def needs_debug_build(target: steps.Target) -> list[str]:
    """The timed build's executables that lack line tables (empty: profile it as it is)."""
    return [rel for rel in _elf_executables(target.build_dir) if not has_debug_info(target.build_dir / rel)]


def used_for(captured_note: str | None) -> bool:
    """Whether a recorded profile came from a second build (a candidate is then profiled alike)."""
    return bool(captured_note and captured_note.startswith(PROFILED_NOTE))


def make(contract: Contract, timed: steps.Target, evidence: EvidenceStore, logs: Path, scratch: Path) -> DebugBuild:
    """Build the timed target's sources again with `-g`, or say why the timed build is profiled."""
    if not contract.build:
        return DebugBuild(None, "no build steps: the profile uses the program as it runs")
    missing = needs_debug_build(timed)
    if not missing:
        return DebugBuild(None, "the timed build has debug info: profiled as built")
    wrappers = scratch / "pw-debug-cc"
    wrapped = write_wrappers(wrappers)
    if not wrapped:
        return DebugBuild(None, f"no debug info in {', '.join(missing)} and no compiler to wrap: symbols only")
    path = f"{wrappers.absolute()}:{os.environ.get('PATH', '/usr/local/bin:/usr/bin:/bin')}"
    dbg_contract = msgspec.structs.replace(
        contract, build=[msgspec.structs.replace(s, env={**s.env, "PATH": path}) for s in contract.build])
    # Same label: the profile is the target's own, only its tree is another. Its sandbox hides what
    # the timed build's hides, and shows the wrappers read-only: they sit in the run directory
    # (hidden) and often under /tmp (a fresh tmpfs inside), where `gcc` would be the bare compiler.
    target = msgspec.structs.replace(timed, build_dir=timed.build_dir.with_name(timed.build_dir.name + SUFFIX),
                                     tools=[str(wrappers.resolve())])
    built = steps.build(dbg_contract, target, evidence, logs)
    if built.outcome != "ok":
        return DebugBuild(None, f"the debug build ({', '.join(wrapped)} with -g) failed: symbols only")
    still = [rel for rel in missing if not has_debug_info(target.build_dir / rel)]
    if still:  # an absolute compiler path in the build bypasses the wrappers
        shutil.rmtree(target.build_dir, ignore_errors=True)
        return DebugBuild(None, f"-g did not reach {', '.join(still)} (compiler called by absolute path?): "
                                "symbols only")
    same, detail = compare_code(timed.build_dir, target.build_dir, missing)
    note = f"{PROFILED_NOTE}: {detail}"
    return DebugBuild(target, note, same)


def twin(contract: Contract, timed: steps.Target, evidence: EvidenceStore, logs: Path, scratch: Path) -> Path | None:
    """The directory of a debug twin of ``timed`` whose code is the timed build's (None: the timed
    build has its own debug info, or no twin with the same code could be made). Every timed run is
    profiled (one kind of run) and is the user's build, so its lines are read from the twin: a twin
    left by an earlier call (the baseline's from `pw start`) is kept while its `.text` still equals
    the timed build's, and built again otherwise (a candidate's tree may have changed since)."""
    missing = needs_debug_build(timed)
    if not missing:
        return None
    where = timed.build_dir.with_name(timed.build_dir.name + SUFFIX)
    if where.is_dir() and all(has_debug_info(where / rel) for rel in missing) \
            and compare_code(timed.build_dir, where, missing)[0]:
        return where
    built = make(contract, timed, evidence, logs, scratch)
    if built.target is None:
        return None
    if not built.same_code:
        shutil.rmtree(built.target.build_dir, ignore_errors=True)
        return None
    return built.target.build_dir

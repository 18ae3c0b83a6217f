"""The running image of a built tree: what a timed run loads, debug info and build inputs aside.

A candidate whose image equals its reference's runs the same machine code on the same data, so no
speedup can come from it, whatever a campaign measured (a comment-only step was verified 1.13x on a
noisy CI host, and a no-op patch 1.058x on a busy VM). The image digest is sha256 over, per file of
the built tree, in path order:

- an ELF executable or shared object (``ET_EXEC``, ``ET_DYN``): its entry point and the name, address
  and contents of every section loaded into memory (``SHF_ALLOC``), notes excepted (the GNU build id
  hashes the debug info too); debug info, symbol tables and comments are not loaded;
- an ELF relocatable or an ``ar`` archive (objects, static libraries): nothing, they are linked, not run;
- a source or header of a compiled language (``COMPILED_SUFFIXES``) that an executable or shared
  object of the tree names as built from it (an ``STT_FILE`` symbol, a DWARF compile unit or line
  table file): nothing, it was compiled, and what it compiled to is hashed above;
- any other file (scripts, Python, data, manifests, and a source no executable names): its whole
  contents. A program that compiles a kernel's source at run time (a harness that runs `cc` on
  kernel.c and loads it, NVRTC reading a .cu) reads that source: session 8's red team had an honest
  1.6x rewrite of such a kernel.c rejected as "no effect" while sources were skipped by suffix.

A tree without an ELF executable or shared object has no image (None): an interpreted program's
sources are what runs, and a comment in them is a change of the file.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from pw.workload.workspace import file_sha256

# Compiled, never read by the program they build (C, C++, CUDA, Fortran; their headers).
COMPILED_SUFFIXES = frozenset({
    ".c", ".h", ".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".inl", ".ipp", ".tpp",
    ".cu", ".cuh", ".f", ".for", ".f77", ".f90", ".f95", ".f03", ".f08", ".F", ".F90", ".F95", ".F03", ".F08",
})
_ELF_MAGIC = b"\x7fELF"
_AR_MAGIC = b"!<arch>\n"


def _sources_named(elf: ELFFile) -> set[str]:
    """The base names of the source files an ELF says it was built from: its ``STT_FILE`` symbols
    (kept without -g, gone when stripped) and, with debug info, its compile units and the files
    of their line tables (headers included)."""
    names: set[str] = set()
    symtab = elf.get_section_by_name(".symtab")
    if symtab is not None and hasattr(symtab, "iter_symbols"):
        names |= {Path(sym.name).name for sym in symtab.iter_symbols()
                  if sym["st_info"]["type"] == "STT_FILE" and sym.name}
    if elf.has_dwarf_info():
        dwarf = elf.get_dwarf_info()
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE().attributes.get("DW_AT_name")
            if top is not None:
                names.add(Path(_text(top.value)).name)
            program = dwarf.line_program_for_CU(cu)
            for entry in (program.header.get("file_entry", []) if program is not None else []):
                names.add(Path(_text(entry.name)).name)
    return names


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _loaded_digest(path: Path, named: set[str]) -> tuple[str, str] | None:
    """("exe" or "link", digest of what is loaded) for an ELF file or archive, adding the sources
    an executable names to ``named``; None for any other file."""
    with path.open("rb") as f:
        magic = f.read(8)
        if magic.startswith(_AR_MAGIC):
            return "link", ""
        if not magic.startswith(_ELF_MAGIC):
            return None
        f.seek(0)
        try:
            elf = ELFFile(f)
            kind = elf.header["e_type"]
            if kind not in ("ET_EXEC", "ET_DYN"):
                return "link", ""
            h = hashlib.sha256(f"entry {elf.header['e_entry']}\n".encode())
            for section in elf.iter_sections():
                flags, stype = section["sh_flags"], section["sh_type"]
                if not flags & SH_FLAGS.SHF_ALLOC or stype == "SHT_NOTE":
                    continue
                data = b"" if stype == "SHT_NOBITS" else section.data()
                h.update(f"{section.name} {section['sh_addr']} {section['sh_size']} {stype}\n".encode())
                h.update(hashlib.sha256(data).digest())
            try:
                named |= _sources_named(elf)
            except (ELFError, ValueError, KeyError, IndexError, AttributeError):
                pass  # unreadable debug info names nothing: the sources are hashed whole
            return "exe", h.hexdigest()
        except (ELFError, ValueError, KeyError, OSError):
            return None  # not an ELF file we can read: hashed whole, as any other file


def image_digest(root: Path, files: list[str]) -> str | None:
    """The running image's sha256 over ``files`` (relative to ``root``), or None without an
    executable or shared object among them (module docstring)."""
    named: set[str] = set()
    loaded = {rel: _loaded_digest(root / rel, named) for rel in sorted(files)}
    if not any(found is not None and found[0] == "exe" for found in loaded.values()):
        return None
    # An executable names a source by its base name (STT_FILE keeps no directory), so a name two
    # sources share says nothing of which was compiled: src/kernel.c built in, jit/kernel.c read
    # at run time. Both are then hashed (red team, session 9, read from this code).
    shared = Counter(Path(rel).name for rel in files if Path(rel).suffix in COMPILED_SUFFIXES)
    h = hashlib.sha256()
    for rel, found in loaded.items():
        path = root / rel
        if found is not None:
            kind, digest = found
            if kind == "exe":
                h.update(f"{rel}\0exe {digest}\n".encode())
        elif path.suffix in COMPILED_SUFFIXES and path.name in named and shared[path.name] == 1:
            continue
        else:
            h.update(f"{rel}\0{file_sha256(path)}\n".encode())
    return h.hexdigest()

"""The running image of a built tree: what a timed run loads, debug info and build inputs aside.

A candidate whose image equals its reference's runs the same machine code on the same data, so no
speedup can come from it, whatever a campaign measured (a comment-only step was verified 1.13x on a
noisy CI host, and a no-op patch 1.058x on a busy VM). The image digest is sha256 over, per file of
the built tree, in path order:

- an ELF executable or shared object (``ET_EXEC``, ``ET_DYN``): its entry point and the name, address
  and contents of every section loaded into memory (``SHF_ALLOC``), notes excepted (the GNU build id
  hashes the debug info too); debug info, symbol tables and comments are not loaded;
- an ELF relocatable or an ``ar`` archive (objects, static libraries): nothing, they are linked, not run;
- a source or header of a compiled language (``COMPILED_SUFFIXES``): nothing, it is compiled, not read;
- any other file (scripts, Python, data, manifests): its whole contents.

A tree without an ELF executable or shared object has no image (None): an interpreted program's
sources are what runs, and a comment in them is a change of the file.
"""

from __future__ import annotations

import hashlib
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


def _loaded_digest(path: Path) -> tuple[str, str] | None:
    """("exe" or "link", digest of what is loaded) for an ELF file or archive; None for any other file."""
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
            return "exe", h.hexdigest()
        except (ELFError, ValueError, KeyError, OSError):
            return None  # not an ELF file we can read: hashed whole, as any other file


def image_digest(root: Path, files: list[str]) -> str | None:
    """The running image's sha256 over ``files`` (relative to ``root``), or None without an
    executable or shared object among them (module docstring)."""
    h = hashlib.sha256()
    executables = 0
    for rel in sorted(files):
        path = root / rel
        loaded = _loaded_digest(path)
        if loaded is not None:
            kind, digest = loaded
            if kind == "link":
                continue
            executables += 1
            h.update(f"{rel}\0exe {digest}\n".encode())
        elif path.suffix in COMPILED_SUFFIXES:
            continue
        else:
            h.update(f"{rel}\0{file_sha256(path)}\n".encode())
    return h.hexdigest() if executables else None

"""Source lines and inline chains for sampled addresses, resolved once per executable.

A timed run's perf profile (``adapters.perf`` with ``timed_run``) is read with ``perf script`` without
``srcline``: perf 6.1 resolves every sample's line through addr2line anew in each run, which costs
0.2-0.5 s a run, and with ``--kallsyms=/dev/null`` the whole script takes about 0.04 s. The lines are
resolved here instead: perf names each sample ``symbol+offset`` in its executable (``dso``), the
executable's symbol table gives the symbol's address, and one ``addr2line -f -i`` call per run
resolves the addresses that run saw which no earlier run of the campaign did (``Symbolizer`` keeps
what it resolved). The result is kept with the run's raw evidence (``LINES_ROLE``), so the profile is a
pure function of stored bytes, as every adapter's normalize is.

Standard library, pyelftools and binutils' addr2line; no state beyond the cache of one Symbolizer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache

LINES_ROLE = "perf-lines.json"
_ADDR2LINE_TIMEOUT_S = 60.0


@lru_cache(maxsize=64)
def _function_symbols(path: str, size: int, mtime_ns: int) -> dict[str, list[tuple[int, int]]]:
    """Function symbols of one ELF file: name -> [(address, size)] (cached by path, size and mtime)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    out: dict[str, list[tuple[int, int]]] = {}
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for name in (".symtab", ".dynsym"):
                table = elf.get_section_by_name(name)
                if table is None:
                    continue
                for sym in table.iter_symbols():
                    if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"]:
                        out.setdefault(sym.name, []).append((int(sym["st_value"]), int(sym["st_size"])))
    except (OSError, ELFError, ValueError):
        return {}
    return out


def file_address(path: str, symbol: str, offset: int) -> int | None:
    """The address in ``path`` (an ELF file) of ``symbol + offset``, or None when it has no such
    function symbol (a stripped file). Of two symbols of one name, the one whose size covers the offset."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    found = _function_symbols(path, st.st_size, st.st_mtime_ns).get(symbol)
    if not found:
        return None
    for value, size in found:
        if size == 0 or offset < size:
            return value + offset
    return found[0][0] + offset


def parse_addr2line(text: str) -> dict[int, list[list[object]]]:
    """``addr2line -f -i -C -a`` output -> {address: [[function, file, line], ...]} innermost first
    (pure). A line number of 0 or a file of '??' means unknown (None)."""
    out: dict[int, list[list[object]]] = {}
    current: int | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        row = lines[i].strip()
        if row.startswith("0x"):
            try:
                current = int(row, 16)
            except ValueError:
                current = None
            if current is not None:
                out.setdefault(current, [])
            i += 1
            continue
        if current is not None and i + 1 < len(lines):
            function, where = row, lines[i + 1].strip()
            file, _, line = where.rpartition(":")
            number = line.split(" ", 1)[0]
            ok = file and not file.startswith("??") and number.isdigit() and int(number) > 0
            out[current].append([None if function == "??" else function, file if ok else None,
                                 int(number) if ok else None])
            i += 2
            continue
        i += 1
    return out


class Symbolizer:
    """Resolves (executable, address) to inline chains, keeping every answer for the next run."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int], list[list[object]]] = {}
        self._tool = shutil.which("addr2line")
        self.twins: dict[str, str] = {}  # a timed build's directory -> its debug twin's (use_twins)

    def use_twins(self, twins: dict[str, str]) -> None:
        """Read the lines of executables under each timed build directory from the same relative path
        in its twin: a second build with debug info whose ``.text`` was checked identical
        (``pw.workload.debug_build``), so an address means the same instruction in both."""
        self.twins = {os.path.normpath(k): os.path.normpath(v) for k, v in twins.items()}
        self._known.clear()

    def _lines_file(self, path: str) -> str:
        for timed, twin in self.twins.items():
            rel = os.path.relpath(os.path.normpath(path), timed)
            if not rel.startswith(".."):
                candidate = os.path.join(twin, rel)
                if os.path.isfile(candidate):
                    return candidate
        return path

    def resolve(self, wanted: dict[str, set[int]]) -> dict[str, dict[int, list[list[object]]]]:
        """{executable: {address: chain}} for every wanted address (unknown ones get an empty chain)."""
        for path, addrs in wanted.items():
            todo = sorted(a for a in addrs if (path, a) not in self._known)
            lines_file = self._lines_file(path)
            if todo and self._tool is not None and os.path.isfile(lines_file):
                try:
                    proc = subprocess.run([self._tool, "-f", "-i", "-C", "-a", "-e", lines_file, *(hex(a) for a in todo)],
                                          capture_output=True, timeout=_ADDR2LINE_TIMEOUT_S, check=False)
                    parsed = parse_addr2line(proc.stdout.decode(errors="replace"))
                except (OSError, subprocess.TimeoutExpired):
                    parsed = {}
                for a in todo:
                    self._known[(path, a)] = parsed.get(a, [])
            for a in todo:
                self._known.setdefault((path, a), [])
        return {path: {a: self._known[(path, a)] for a in sorted(addrs)} for path, addrs in sorted(wanted.items())}

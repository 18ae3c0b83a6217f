"""A timed build without debug info gets its lines from a debug twin with the same code.

Every timed run is profiled (one kind of run) and runs the user's build as it is; a suite built
with `-O2` alone has no line tables, so an inlined kernel is only `main`. The lines come from a
second build with `-g` whose `.text` was checked identical (pw.workload.debug_build.twin), read at
the same addresses (adapters.symbolize.Symbolizer.use_twins)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from adapters.symbolize import Symbolizer, file_address
from pw.workload import debug_build

SOURCE = """
static double kernel(int n, double *a) {
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += a[i] * a[i];
    return s;
}
int main(int argc, char **argv) {
    static double a[1024];
    for (int i = 0; i < 1024; i++) a[i] = i + argc;
    return (int)kernel(1024, a) & 1;
}
"""

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("addr2line") is None
                                or shutil.which("objdump") is None, reason="needs gcc, addr2line and objdump")


def _build(where: Path, *flags: str) -> Path:
    where.mkdir(parents=True)
    (where / "k.c").write_text(SOURCE)
    subprocess.run(["gcc", "-O2", *flags, "-o", "k", "k.c"], cwd=where, check=True)
    return where / "k"


def test_the_timed_builds_addresses_are_read_in_its_twin(tmp_path):
    timed = _build(tmp_path / "build" / "baseline")
    twin = _build(tmp_path / "build" / "baseline-profile", "-g")
    assert not debug_build.has_debug_info(timed) and debug_build.has_debug_info(twin)
    assert debug_build.compare_code(timed.parent, twin.parent, ["k"])[0] is True
    address = file_address(str(timed), "main", 8)
    assert address is not None

    alone = Symbolizer().resolve({str(timed): {address}})[str(timed)][address]
    assert all(file is None for _fn, file, _line in alone)  # symbols only: no file, no line

    symbols = Symbolizer()
    symbols.use_twins({str(timed.parent): str(twin.parent)})
    chain = symbols.resolve({str(timed): {address}})[str(timed)][address]
    assert chain and all(str(file).endswith("build/baseline-profile/k.c") and line > 0 for _fn, file, line in chain)


def test_a_twin_whose_code_differs_is_not_used(tmp_path):
    timed = _build(tmp_path / "timed")
    other = _build(tmp_path / "other", "-g", "-O0")  # debug info, but not the same instructions
    same, detail = debug_build.compare_code(timed.parent, other.parent, ["k"])
    assert same is False and ".text differs" in detail

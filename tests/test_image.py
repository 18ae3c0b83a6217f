"""pw.workload.image: a build's running image, compared across real gcc builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pw.workload.image import image_digest

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("ar") is None, reason="needs gcc and ar")

SOURCE = """#include <stdio.h>
#define ROUNDS 20
static double work(int n) { double s = 0; for (int i = 0; i < n * ROUNDS; i++) s += i * 0.5; return s; }
int main(void) { printf("%g\\n", work(1000)); return 0; }
"""


def _build(root: Path, source: str, flags: tuple[str, ...] = ("-O2", "-g")) -> list[str]:
    """A tree as pw's build leaves it: the source, an object, a static library, the program, a data file."""
    root.mkdir()
    (root / "prog.c").write_text(source)
    (root / "input.txt").write_text("1000\n")
    subprocess.run(["gcc", *flags, "-c", "prog.c", "-o", "prog.o"], cwd=root, check=True)
    subprocess.run(["ar", "rcs", "libprog.a", "prog.o"], cwd=root, check=True)
    subprocess.run(["gcc", *flags, "-Wl,--build-id", "prog.o", "-o", "prog"], cwd=root, check=True)
    return sorted(p.name for p in root.iterdir())


def test_a_comment_only_change_builds_to_the_same_image_with_debug_info(tmp_path):
    """-g: the line table and the GNU build id differ; the loaded code and data do not."""
    a, b = tmp_path / "a", tmp_path / "b"
    files_a = _build(a, SOURCE)
    files_b = _build(b, "/* the next idea, before it is written */\n" + SOURCE)
    assert (a / "prog").read_bytes() != (b / "prog").read_bytes()  # debug info and build id moved
    assert image_digest(a, files_a) is not None
    assert image_digest(a, files_a) == image_digest(b, files_b)


def test_a_change_of_code_or_of_a_data_file_changes_the_image(tmp_path):
    base = _build(tmp_path / "a", SOURCE)
    code = _build(tmp_path / "b", SOURCE.replace("#define ROUNDS 20", "#define ROUNDS 19"))
    data = _build(tmp_path / "c", SOURCE)
    (tmp_path / "c" / "input.txt").write_text("999\n")
    flags = _build(tmp_path / "d", SOURCE, ("-O1", "-g"))
    digests = [image_digest(tmp_path / d, f) for d, f in zip("abcd", (base, code, data, flags))]
    assert len(set(digests)) == 4, digests


def test_objects_archives_and_sources_are_not_the_image_but_scripts_are(tmp_path):
    root = tmp_path / "a"
    files = _build(root, SOURCE)
    before = image_digest(root, files)
    (root / "prog.c").write_text("int main(void) { return 1; }\n")  # recompiled, but not relinked
    subprocess.run(["gcc", "-c", "prog.c", "-o", "prog.o"], cwd=root, check=True)
    subprocess.run(["ar", "rcs", "libprog.a", "prog.o"], cwd=root, check=True)
    assert image_digest(root, files) == before
    (root / "run.sh").write_text("#!/bin/sh\nexec ./prog\n")
    assert image_digest(root, [*files, "run.sh"]) != before


def test_a_tree_without_an_executable_has_no_image(tmp_path):
    (tmp_path / "prog.py").write_text("print(1)\n")
    assert image_digest(tmp_path, ["prog.py"]) is None


def test_a_source_no_executable_was_built_from_is_read_at_run_time_and_is_the_image(tmp_path):
    """Session 8's red team: a harness that compiles kernel.c at run time reads it, so an edit of
    kernel.c changes what runs while every ELF of the tree stays the same; sources were left out by
    their suffix, and an honest 1.6x rewrite of the kernel was rejected as no effect."""
    a, b = tmp_path / "a", tmp_path / "b"
    files_a, files_b = _build(a, SOURCE), _build(b, SOURCE)
    (a / "kernel.c").write_text("double k(double x) { return x * 2; }\n")
    (b / "kernel.c").write_text("double k(double x) { return x + x; }\n")
    assert image_digest(a, files_a + ["kernel.c"]) != image_digest(b, files_b + ["kernel.c"])
    # prog.c is named by the program (its STT_FILE symbol and its debug info): left out as before.
    (b / "kernel.c").write_text((a / "kernel.c").read_text())
    (b / "prog.c").write_text("/* edited after the build */\n" + SOURCE)
    assert image_digest(a, files_a + ["kernel.c"]) == image_digest(b, files_b + ["kernel.c"])


def test_a_source_that_shares_its_name_with_a_compiled_one_is_the_image(tmp_path):
    """The program names prog.c by its base name only (STT_FILE keeps no directory): jit/prog.c,
    read at run time, is hashed, and so is prog.c itself, since nothing says which one was built."""
    a, b = tmp_path / "a", tmp_path / "b"
    files_a, files_b = _build(a, SOURCE), _build(b, SOURCE)
    for root, body in ((a, "double k(double x) { return x * 2; }\n"), (b, "double k(double x) { return x + x; }\n")):
        (root / "jit").mkdir()
        (root / "jit" / "prog.c").write_text(body)
    assert image_digest(a, files_a + ["jit/prog.c"]) != image_digest(b, files_b + ["jit/prog.c"])


def test_without_debug_info_the_symbol_table_names_the_compiled_source_and_stripped_it_is_hashed(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    files_a = _build(a, SOURCE, flags=("-O2",))
    files_b = _build(b, "/* a comment */\n" + SOURCE, flags=("-O2",))
    assert image_digest(a, files_a) == image_digest(b, files_b)  # STT_FILE prog.c, no -g needed
    for root in (a, b):
        subprocess.run(["strip", "prog"], cwd=root, check=True)
    # Stripped, nothing says prog.c was compiled: it might be read, so it is hashed (never a false no-op).
    assert image_digest(a, files_a) != image_digest(b, files_b)

"""Source locator: roles, ranges, cross-file links, frontier, slices, determinism, errors."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from ledger.errors import InputError
from pw.agent.source import locate
from pw.agent.source.slices import MIN_TRIMMED, line_count

DATA = Path(__file__).parent / "data"
MATMUL = DATA / "source-c-matmul"
AOS = DATA / "source-c-aos"
PY = DATA / "source-py"
MATMUL_EDITABLE = ["kernels/*.c", "kernels/*.h"]


def line_of(path: Path, text: str, after: int = 0) -> int:
    """1-based number of the first line containing `text` at or after line `after`."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if number >= after and text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


def by_role(result, role):
    return [t for t in result.targets if t.role == role]


def one(result, role, symbol):
    found = [t for t in result.targets if t.role == role and t.symbol == symbol]
    assert len(found) == 1, (role, symbol, [(t.role, t.symbol) for t in result.targets])
    return found[0]


@pytest.fixture(scope="module")
def matmul():
    kernel = MATMUL / "kernels/matmul.c"
    return locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul",
                  hot_lines=[line_of(kernel, "sum += a[")])


def test_hotspot_covers_exactly_the_function_and_focus_the_loop_nest(matmul):
    kernel = MATMUL / "kernels/matmul.c"
    start = line_of(kernel, "void matmul(int n")
    end = next(n for n, line in enumerate(kernel.read_text().splitlines(), 1) if n > start and line == "}")
    hot = one(matmul, "hotspot", "matmul")
    assert (hot.file, hot.line_start, hot.line_end) == ("kernels/matmul.c", start, end)
    assert hot.focus == (line_of(kernel, "for (int i = 0"), end - 1)
    assert hot.editable and matmul.targets[0] == hot


def test_focus_is_the_loop_nest_holding_most_hot_lines(tmp_path):
    source = (
        "void two(double *x, int n) {\n"            # 1
        "    for (int i = 0; i < n; i++)\n"         # 2
        "        x[i] = 0;\n"                       # 3
        "    for (int i = 0; i < n; i++) {\n"       # 4
        "        for (int j = 0; j < n; j++)\n"     # 5
        "            x[i] += j;\n"                  # 6
        "    }\n"                                   # 7
        "    for (int r = 0; r < 3; r++)\n"         # 8
        "        x[r] *= 2;\n"                      # 9
        "}\n"                                       # 10
    )
    (tmp_path / "two.c").write_text(source)
    assert one(locate(tmp_path, ["*.c"], "two.c", "two", hot_lines=[9, 8, 3]), "hotspot", "two").focus == (8, 9)
    assert one(locate(tmp_path, ["*.c"], "two.c", "two", hot_lines=[6]), "hotspot", "two").focus == (4, 7)
    # without hot lines: the deepest nest
    assert one(locate(tmp_path, ["*.c"], "two.c", "two"), "hotspot", "two").focus == (4, 7)


def test_callees_cross_files_to_bounded_depth(matmul):
    callees = {t.symbol: t for t in by_role(matmul, "callee")}
    assert set(callees) == {"clear", "fill_value"}  # level_three is depth 3
    assert callees["clear"].file == "kernels/util.c"
    deeper = locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", callee_depth=3)
    assert "level_three" in {t.symbol for t in by_role(deeper, "callee")}
    shallow = locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", callee_depth=1)
    assert {t.symbol for t in by_role(shallow, "callee")} == {"clear"}


def test_callees_only_from_the_editable_tree():
    result = locate(MATMUL, ["kernels/matmul.c"], "kernels/matmul.c", "matmul")
    assert by_role(result, "callee") == []


def test_writers_are_the_caller_that_allocates_and_the_fill_it_calls(matmul):
    harness = MATMUL / "harness/main.c"
    fill = one(matmul, "writer", "fill")
    main = one(matmul, "writer", "main")
    assert (fill.file, fill.line_start, fill.editable) == ("harness/main.c", line_of(harness, "static void fill"),
                                                           False)
    assert main.editable is False
    lo, hi = main.focus
    assert lo <= line_of(harness, "double *a = malloc") and hi >= line_of(harness, "memcpy(b, tmp")


def test_frontier_names_producers_movers_and_consumers(matmul):
    harness = MATMUL / "harness/main.c"
    entries = {e.symbol: e for e in matmul.frontier}
    assert set(entries) == {"a", "b", "c"}
    b = entries["b"]
    assert f"memcpy@harness/main.c:{line_of(harness, 'memcpy(b')}" in b.movers
    assert f"fill@harness/main.c:{line_of(harness, 'static void fill')} (into tmp)" in b.producers
    assert f"malloc@harness/main.c:{line_of(harness, 'double *b = malloc')}" in b.producers
    assert b.consumers[0].startswith("matmul@kernels/matmul.c:")
    assert "matmul_print@kernels/matmul.c:" in " ".join(entries["c"].consumers)
    for line in matmul.frontier_lines():
        assert len(line) < 300 and "\n" not in line


def test_sibling_variant_found_and_unrelated_shapes_ignored(matmul):
    assert [t.symbol for t in by_role(matmul, "sibling")] == ["matmul_blocked"]
    assert "matmul_print" not in {t.symbol for t in by_role(matmul, "sibling")}


def test_data_struct_in_header_global_and_struct_writers():
    result = locate(AOS, ["step.c", "init.c", "particle.h"], "step.c", "step")
    header = AOS / "particle.h"
    particle = one(result, "data", "particle")
    assert (particle.file, particle.line_start, particle.line_end) == (
        "particle.h", line_of(header, "struct particle {"), line_of(header, "};"))
    damping = one(result, "data", "g_damping")
    assert damping.file == "step.c"  # the definition, not the extern declaration
    writers = {t.symbol: t for t in by_role(result, "writer")}
    assert {"init_particles", "main", "set_damping"} <= set(writers)
    assert writers["main"].editable is False and writers["init_particles"].editable is True
    entries = {e.symbol: e for e in result.frontier}
    assert entries["g_damping"].producers == ("set_damping@init.c:12",)
    assert "init_particles@init.c:3" in entries["p"].producers


def test_slices_have_header_numbered_lines_and_stay_addressable(matmul):
    assert next(iter(matmul.slices)) == "hotspot:matmul"
    text = matmul.slices["hotspot:matmul"]
    hot = one(matmul, "hotspot", "matmul")
    lines = text.splitlines()
    assert lines[0] == f"// kernels/matmul.c:{hot.line_start}-{hot.line_end} hotspot matmul"
    source = (MATMUL / "kernels/matmul.c").read_text().splitlines()
    for number, rendered in zip(range(hot.line_start, hot.line_end + 1), lines[1:]):
        label, _, code = rendered.partition("| ")
        assert int(label) == number and code == source[number - 1].rstrip()
    for target in matmul.targets:
        assert target.slice in matmul.slices
    assert matmul.slice_lines == sum(line_count(t) for t in matmul.slices.values())


def test_python_headers_use_hash(tmp_path):
    result = locate(PY, ["kernel.py"], "kernel.py", "dedupe")
    assert result.slices["hotspot:dedupe"].startswith("# kernel.py:")
    assert result.language == "python"


def test_long_function_is_windowed_around_the_hot_lines(tmp_path):
    body = [f"    x[{i}] = {i};" for i in range(150)]
    lines = ["void big(double *x, int n) {", *body[:100],
             "    for (int i = 0; i < n; i++)", "        x[i] *= 2.0;", *body[100:], "}"]
    (tmp_path / "big.c").write_text("\n".join(lines) + "\n")
    hot_line = 103
    result = locate(tmp_path, ["*.c"], "big.c", "big", hot_lines=[hot_line])
    text = result.slices["hotspot:big"]
    rendered = text.splitlines()
    assert len(rendered) <= 80
    assert any(r.startswith(f"{hot_line}| ") for r in rendered)
    assert rendered[1].startswith("  1| void big")  # the signature stays
    markers = [r for r in rendered if "elided" in r]
    assert markers and all(f"full range big.c:1-{len(lines)}" in m for m in markers)
    shown = sum(1 for r in rendered[1:] if "elided" not in r)
    elided = sum(int(m.split()[2]) for m in markers)
    assert shown + elided == len(lines)


def test_total_budget_drops_lowest_priority_first(matmul):
    small = locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", max_total_lines=40)
    assert small.slice_lines <= 40
    assert "hotspot:matmul" in small.slices
    dropped = [t for t in small.targets if t.slice is None]
    assert "sibling" in {t.role for t in dropped} and small.omitted
    order = ["hotspot", "callee", "data", "writer", "sibling"]
    # a lower-priority slice is only kept after a drop when it is too small to have mattered
    for gone in dropped:
        for kept in (t for t in small.targets if t.slice is not None):
            if order.index(kept.role) > order.index(gone.role):
                assert line_count(small.slices[kept.slice]) < MIN_TRIMMED


def test_hotspot_slice_survives_a_tiny_budget():
    result = locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", max_total_lines=5)
    assert list(result.slices) == ["hotspot:matmul"]
    assert line_count(result.slices["hotspot:matmul"]) <= 5


def test_output_is_deterministic_and_byte_identical(tmp_path):
    first = msgspec.json.encode(locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", hot_lines=[12]))
    second = msgspec.json.encode(locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", hot_lines=[12]))
    assert first == second
    # the root's absolute location does not leak into the result
    copy = tmp_path / "elsewhere"
    import shutil

    shutil.copytree(MATMUL, copy)
    third = msgspec.json.encode(locate(copy, MATMUL_EDITABLE, "kernels/matmul.c", "matmul", hot_lines=[12]))
    assert third == first


def test_python_method_class_data_and_attribute_writers():
    result = locate(PY, ["kernel.py"], "kernel.py", "Grid.total")
    kernel = PY / "kernel.py"
    hot = one(result, "hotspot", "Grid.total")
    assert hot.line_start == line_of(kernel, "def total(self)")
    grid = one(result, "data", "Grid")
    assert grid.line_start == line_of(kernel, "class Grid")
    assert one(result, "writer", "Grid.reset").focus == (line_of(kernel, "self.cells = []"),) * 2
    attributes = {e.symbol: e for e in result.frontier}
    assert "Grid.reset@kernel.py:" in " ".join(attributes["self.cells"].producers)


def test_python_writers_across_modules_and_globals():
    result = locate(PY, ["kernel.py"], "kernel.py", "dedupe")
    make_items = one(result, "writer", "make_items")
    assert (make_items.file, make_items.editable) == ("build.py", False)
    assert {e.symbol: e for e in result.frontier}["items"].producers == ("make_items@build.py:4",)
    words = locate(PY, ["kernel.py"], "kernel.py", "content_words")
    stop = one(words, "data", "STOPWORDS")
    assert stop.line_start == line_of(PY / "kernel.py", "STOPWORDS = [")
    assert [t.symbol for t in by_role(result, "sibling")] == ["dedupe_set"]


def test_cuda_kernel_and_cpp_method(tmp_path):
    (tmp_path / "k.cu").write_text(
        "__global__ void scale(float *y, const float *x, int n, int stride)\n"
        "{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    for (int k = 0; k < n; k++)\n"
        "        y[i] += x[k * stride + i];\n"
        "}\n"
        "void launch(float *y, const float *x, int n)\n"
        "{\n"
        "    scale<<<1, 32>>>(y, x, n, 32);\n"
        "}\n")
    (tmp_path / "m.cpp").write_text(
        "namespace ns {\n"
        "struct Grid { double *v; int n; double sum() const; };\n"
        "double Grid::sum() const {\n"
        "    double s = 0;\n"
        "    for (int i = 0; i < n; i++) s += v[i * n];\n"
        "    return s;\n"
        "}\n"
        "}\n")
    cuda = locate(tmp_path, ["*.cu"], "k.cu", "scale")
    assert one(cuda, "hotspot", "scale").line_start == 1 and cuda.language == "cuda"
    assert {e.symbol: e for e in cuda.frontier}["y"].movers == ("launch@k.cu:7 (passes)",)
    assert any(f.kind == "strided" and f.symbol == "x" for f in cuda.facts)
    cpp = locate(tmp_path, ["*.cpp"], "m.cpp", "Grid::sum")
    assert one(cpp, "hotspot", "Grid::sum").line_start == 3
    assert any(f.kind == "strided" and f.symbol == "v" for f in cpp.facts)


def test_errors_name_what_was_expected(tmp_path):
    with pytest.raises(InputError, match="not defined in kernels/matmul.c.*matmul_blocked"):
        locate(MATMUL, MATMUL_EDITABLE, "kernels/matmul.c", "no_such_function")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError, match="expected a C, C\\+\\+, CUDA or Python file"):
        locate(tmp_path, ["*"], "notes.txt", "f")
    with pytest.raises(InputError, match="does not exist"):
        locate(tmp_path, ["*"], "missing.c", "f")
    (tmp_path / "bad.py").write_text("def f(:\n")
    with pytest.raises(InputError, match="cannot parse"):
        locate(tmp_path, ["*.py"], "bad.py", "f")


def test_a_macro_under_ifdef_shows_the_branch_the_flags_select(tmp_path):
    """A double build (no -DDATA_TYPE_IS_FLOAT) must be shown the double SCALAR_VAL, not the float
    one that comes first in the header (issue 13)."""
    (tmp_path / "common.h").write_text(
        "#ifndef COMMON_H\n#define COMMON_H\n"
        "#ifdef DATA_TYPE_IS_FLOAT\n#  define SCALAR_VAL(x) x##f\n#  define DATA_TYPE float\n"
        "#else\n#  define SCALAR_VAL(x) x\n#  define DATA_TYPE double\n#endif\n#endif\n")
    (tmp_path / "k.c").write_text(
        '#include "common.h"\nstatic DATA_TYPE A[64];\n'
        "void kernel(int n) {\n    for (int i = 0; i < n; i++)\n        A[i] = SCALAR_VAL(0.2) * A[i];\n}\n")
    double = locate(tmp_path, ["k.c"], "k.c", "kernel", [5], defines=frozenset())
    shown = [t for t in double.targets if t.symbol in ("SCALAR_VAL", "DATA_TYPE")]
    assert shown and all(t.line_start >= 7 for t in shown), shown  # the #else branch (lines 7-8)
    single = locate(tmp_path, ["k.c"], "k.c", "kernel", [5], defines=frozenset({"DATA_TYPE_IS_FLOAT"}))
    shown = [t for t in single.targets if t.symbol in ("SCALAR_VAL", "DATA_TYPE")]
    assert all(t.line_start < 6 for t in shown), shown  # never the #else branch a float build skips

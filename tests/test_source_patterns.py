"""Access-pattern facts: detected on the right lines, and absent from contiguous loops."""

from __future__ import annotations

from pathlib import Path

import pytest

from pw.agent.source import locate

DATA = Path(__file__).parent / "data"
AOS = DATA / "source-c-aos"
PY = DATA / "source-py"
MATMUL = DATA / "source-c-matmul"


def line_of(path: Path, text: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


def facts(root: Path, file: str, function: str, editable=("*",)):
    return locate(root, list(editable), file, function).facts


def kinds(found) -> set[str]:
    return {f.kind for f in found}


def test_strided_flat_index_on_the_b_access_only():
    found = facts(MATMUL, "kernels/matmul.c", "matmul")
    strided = [f for f in found if f.kind == "strided"]
    assert [(f.symbol, f.line, f.loop_depth) for f in strided] == [
        ("b", line_of(MATMUL / "kernels/matmul.c", "sum += a["), 3)]
    assert "scaled by n" in strided[0].detail
    reduction = [f for f in found if f.kind == "reduction-dependency"]
    assert [f.symbol for f in reduction] == ["sum"] and "scalar" in reduction[0].tags


def test_ikj_order_is_contiguous():
    # matmul_blocked's innermost loop is j: b[k*n + j] and c[i*n + j] are unit stride
    found = facts(MATMUL, "kernels/matmul.c", "matmul_blocked")
    assert "strided" not in kinds(found)


def test_strided_two_dimensional_column_walk_and_row_walk_negative():
    access = AOS / "access.c"
    found = facts(AOS, "access.c", "transpose_2d")
    assert [(f.kind, f.symbol, f.line) for f in found] == [("strided", "src", line_of(access, "src[j][i]"))]
    assert "strided" not in kinds(facts(AOS, "access.c", "row_sum"))


def test_strided_through_a_function_like_macro():
    access = AOS / "access.c"
    columns = [f for f in facts(AOS, "access.c", "sweep_columns") if f.kind == "strided"]
    assert {f.symbol for f in columns} == {"dst", "src"}
    assert {f.line for f in columns} == {line_of(access, "AT(dst, i, j) = 0.5 * (AT(src, i - 1")}
    assert all("macro" in f.tags and f.detail.startswith("AT(") for f in columns)
    assert "strided" not in kinds(facts(AOS, "access.c", "sweep_rows"))


def test_indirect_index_array_and_pointer_chase():
    access = AOS / "access.c"
    gather = [f for f in facts(AOS, "access.c", "gather") if f.kind == "indirect"]
    assert [(f.symbol, f.line, f.tags) for f in gather] == [("a", line_of(access, "out[i] = a[idx[i]]"),
                                                             ("index-array",))]
    chase = [f for f in facts(AOS, "access.c", "walk_list") if f.kind == "indirect"]
    assert [(f.line, f.tags) for f in chase] == [(line_of(access, "q = q->next"), ("pointer-chase",))]


def test_aos_fields_touched_versus_declared():
    step = AOS / "step.c"
    found = [f for f in facts(AOS, "step.c", "step") if f.kind == "aos-field"]
    assert [f.line for f in found] == [line_of(step, "p[i].vx *= g_damping"), line_of(step, "p[i].x += p[i].vx")]
    assert {(f.fields_touched, f.fields_declared) for f in found} == {(2, 12)}
    assert "2 of 12 declared fields of particle" in found[0].detail


def test_struct_of_arrays_loop_has_no_layout_or_stride_facts():
    found = facts(AOS, "step.c", "step_soa")
    assert not kinds(found) & {"aos-field", "strided", "indirect"}


def test_memory_reduction_is_tagged():
    row_sum = [f for f in facts(AOS, "access.c", "row_sum") if f.kind == "reduction-dependency"]
    assert [(f.symbol, f.tags) for f in row_sum] == [("out", ("memory",))]


def test_python_linear_membership_on_list_and_index_lines():
    kernel = PY / "kernel.py"
    found = [f for f in facts(PY, "kernel.py", "dedupe") if f.kind == "linear-membership"]
    assert [(f.line, f.symbol) for f in found] == [(line_of(kernel, "if item not in seen"), "seen"),
                                                   (line_of(kernel, "seen.index(item)"), "seen")]
    assert all(f.tags == ("list",) and f.loop_depth == 1 for f in found)


def test_python_membership_in_a_set_or_small_literal_is_not_flagged():
    assert "linear-membership" not in kinds(facts(PY, "kernel.py", "dedupe_set"))
    words = [f for f in facts(PY, "kernel.py", "content_words") if f.kind == "linear-membership"]
    assert [f.symbol for f in words] == ["STOPWORDS"]  # the global list, not the ("x", "y") literal


def test_python_quadratic_nesting_only_over_sized_iterables():
    kernel = PY / "kernel.py"
    found = [f for f in facts(PY, "kernel.py", "close_pairs") if f.kind == "quadratic-nesting"]
    assert [(f.line, f.loop_depth) for f in found] == [(line_of(kernel, "for q in points"), 2)]


def test_python_repeated_attribute_lookup_in_loop():
    kernel = PY / "kernel.py"
    found = [f for f in facts(PY, "kernel.py", "Grid.total") if f.kind == "repeated-attribute-lookup"]
    assert {f.symbol for f in found} == {"self.scale.factor", "self.scale.offset.value"}
    assert {f.line for f in found} == {line_of(kernel, "acc += cell * self.scale.factor")}


def test_python_per_element_attributes_are_not_hoistable(tmp_path):
    (tmp_path / "m.py").write_text(
        "def norms(points):\n"
        "    out = []\n"
        "    for p in points:\n"
        "        out.append(p.pos.x * p.pos.x + p.pos.y * p.pos.y)\n"
        "    return out\n")
    assert "repeated-attribute-lookup" not in kinds(facts(tmp_path, "m.py", "norms"))


@pytest.mark.parametrize("body, expected", [
    ("for (int i = 0; i < n; i++) y[i] = x[i] * 2.0;", set()),
    ("for (int i = 0; i < n; i++) y[i] = x[8 * i];", {"strided"}),
    ("for (int i = 0; i < n; i++) y[i] = x[2 * i] + x[2 * i + 1];", set()),
    ("for (int i = 0; i < n; i++) y[i] = x[i << 4];", {"strided"}),
    ("for (int i = 0; i < n; i++) y[i] = x[(long)i * n];", {"strided"}),
    ("for (int i = 0; i < n; i++) y[i] = x[map[i]];", {"indirect"}),
    ("for (int i = 0; i < n; i++) y[i] = x[n - 1 - i];", set()),
])
def test_c_stride_classification(tmp_path, body, expected):
    (tmp_path / "f.c").write_text(
        f"void f(double *y, const double *x, const int *map, int n)\n{{\n    {body}\n}}\n")
    assert kinds(facts(tmp_path, "f.c", "f")) == expected

"""Property tests: slice limits hold on random long functions and many files; output is deterministic."""

from __future__ import annotations

import tempfile
from itertools import pairwise
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pw.agent.source import locate
from pw.agent.source.slices import line_count, plan_window, render, rendered_size

FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def c_trees(draw):
    """A few C files with functions of random length, loops, cross-file calls, a struct and a global."""
    n_files = draw(st.integers(1, 5))
    names = [f"f{i}_{j}" for i in range(n_files) for j in range(draw(st.integers(1, 4)))]
    files: dict[str, list[str]] = {}
    for i in range(n_files):
        lines = ["#include \"common.h\"", f"double g{i}[64];", ""]
        for name in (n for n in names if n.startswith(f"f{i}_")):
            lines.append(f"void {name}(struct rec *r, double *x, int n)")
            lines.append("{")
            for _ in range(draw(st.integers(0, 120))):
                kind = draw(st.sampled_from(["assign", "loop", "call", "field", "global"]))
                if kind == "assign":
                    lines.append("    x[0] = x[1] + 1.0;")
                elif kind == "loop":
                    lines.append("    for (int i = 0; i < n; i++)")
                    lines.append("        x[i * n] += r[i].a;")
                elif kind == "call":
                    lines.append(f"    {draw(st.sampled_from(names))}(r, x, n);")
                elif kind == "field":
                    lines.append("    r[0].b = x[0];")
                else:
                    lines.append(f"    g{i}[0] += x[0];")
            lines.append("}")
            lines.append("")
        files[f"src{i}.c"] = lines
    files["common.h"] = ["struct rec {", *[f"    double {c};" for c in "abcdefgh"], "};"]
    hotspot = draw(st.sampled_from(names))
    return files, hotspot


@st.composite
def python_trees(draw):
    n_files = draw(st.integers(1, 4))
    names = [f"f{i}_{j}" for i in range(n_files) for j in range(draw(st.integers(1, 4)))]
    files = {}
    for i in range(n_files):
        lines = [f"TABLE{i} = [1, 2, 3]", ""]
        for name in (n for n in names if n.startswith(f"f{i}_")):
            lines.append(f"def {name}(items, n):")
            lines.append("    seen = []")
            for _ in range(draw(st.integers(0, 120))):
                kind = draw(st.sampled_from(["assign", "loop", "call"]))
                if kind == "assign":
                    lines.append("    n = n + 1")
                elif kind == "loop":
                    lines.append("    for item in items:")
                    lines.append(f"        if item in seen or item in TABLE{i}:")
                    lines.append("            seen.append(item)")
                else:
                    lines.append(f"    {draw(st.sampled_from(names))}(items, n)")
            lines.append("    return seen")
            lines.append("")
        files[f"mod{i}.py"] = lines
    return files, draw(st.sampled_from(names))


def _write(root: Path, files: dict[str, list[str]]) -> None:
    for name, lines in files.items():
        (root / name).write_text("\n".join(lines) + "\n")


def _hotspot_file(files, hotspot: str) -> str:
    return next(name for name, lines in files.items() if any(f" {hotspot}(" in line and line.startswith(
        ("void", "def")) for line in lines))


def _check(result, max_slice: int, max_total: int) -> None:
    assert result.slices, "the hotspot slice is always present"
    first = next(iter(result.slices))
    assert first.startswith("hotspot:")
    counts = [line_count(text) for text in result.slices.values()]
    assert all(1 <= c <= max_slice for c in counts)
    assert sum(counts) == result.slice_lines <= max_total
    for target in result.targets:
        assert target.slice is None or target.slice in result.slices
        assert target.line_start <= target.line_end


@FAST
@given(c_trees(), st.lists(st.integers(1, 2000), max_size=6), st.integers(0, 3))
def test_c_limits_hold_and_output_is_deterministic(tree, hot_lines, depth):
    files, hotspot = tree
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, files)
        target = _hotspot_file(files, hotspot)
        first = locate(root, ["*.c", "*.h"], target, hotspot, hot_lines=hot_lines, callee_depth=depth)
        _check(first, 80, 300)
        again = locate(root, ["*.c", "*.h"], target, hotspot, hot_lines=hot_lines, callee_depth=depth)
        assert msgspec.json.encode(first) == msgspec.json.encode(again)


@FAST
@given(python_trees(), st.integers(2, 80), st.integers(2, 300))
def test_python_limits_hold_for_any_budget(tree, max_slice, max_total):
    files, hotspot = tree
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write(root, files)
        result = locate(root, ["*.py"], _hotspot_file(files, hotspot), hotspot, max_slice_lines=max_slice,
                        max_total_lines=max_total)
        _check(result, max_slice, max_total)


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(1, 500),
    length=st.integers(1, 600),
    budget=st.integers(1, 120),
    focus=st.one_of(st.none(), st.tuples(st.integers(0, 600), st.integers(0, 600))),
    hot=st.lists(st.integers(1, 1200), max_size=8),
)
def test_window_plan_fits_and_keeps_what_fits(start, length, budget, focus, hot):
    end = start + length - 1
    if focus is not None:
        lo, hi = sorted(focus)
        focus = (start + lo % length, start + hi % length)
        focus = (min(focus), max(focus))
    intervals = plan_window(start, end, budget, focus, hot)
    assert rendered_size(intervals, start, end) <= budget
    assert all(start <= a <= b <= end for a, b in intervals)
    assert all(b1 + 1 < a2 for (_, b1), (a2, _) in pairwise(intervals))  # merged, gaps marked
    if length <= budget:
        assert intervals == [(start, end)]
    elif focus is not None and focus[1] - focus[0] + 1 <= budget - 5 and budget >= 7:
        shown = {n for a, b in intervals for n in range(a, b + 1)}
        assert set(range(focus[0], focus[1] + 1)) <= shown
    source = [f"line {n}" for n in range(1, end + 1)]
    text = render("f.c", "hotspot", "f", start, end, source, budget + 1, focus, hot)
    assert line_count(text) <= budget + 1

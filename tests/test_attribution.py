"""Changed-code attribution (gate rules 19): which code counts as the hotspot's part in each arm, from
the parsers' function regions and the recorded patch; and one run's seconds split by it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.events import CodeRegion, CodeSide
from ledger.profile import LineCost, Operation, Profile
from pw.agent.source.regions import attribution, changed_lines, function_regions
from pw.app.hybrid import splice
from pw.rules.attribution import operation_seconds, side_cost, side_seconds

MATMUL = Path(__file__).parent.parent / "workloads" / "matmul-c"
DATA = Path(__file__).parent / "data" / "one-kind"


def _tree() -> dict[str, bytes]:
    return {name: (MATMUL / name).read_bytes() for name in ("matmul.c", "matmul.h")}


def _patched(patch: Path) -> dict[str, bytes]:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, data in _tree().items():
            Path(tmp, name).write_bytes(data)
        subprocess.run(["patch", "-s", "-p1", "-d", tmp, "-i", str(patch)], check=True)
        return {name: Path(tmp, name).read_bytes() for name in ("matmul.c", "matmul.h")}


def test_the_parsers_find_every_function_with_its_lines():
    regions = {r.name: r for r in function_regions(_tree())}
    assert {"matmul", "mix64", "row_key", "fill_matrix"} <= set(regions)
    assert regions["matmul"].file == "matmul.c" and regions["matmul"].start < regions["matmul"].end


def test_changed_lines_are_the_new_sides_added_lines_and_the_lines_around_a_deletion():
    patch = (MATMUL / "candidates" / "interchange.patch").read_bytes()
    lines = changed_lines(patch)
    assert list(lines) == ["matmul.c"] and 16 in lines["matmul.c"] and 1 not in lines["matmul.c"]
    deletion = b"--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,2 @@\n a\n-b\n c\n"
    assert changed_lines(deletion) == {"f.c": [1, 2]}


def test_an_interchange_touches_only_the_hotspot_so_it_needs_no_hybrid():
    patch = (MATMUL / "candidates" / "interchange.patch").read_bytes()
    a = attribution("matmul@matmul.c", "matmul", "matmul.c", _tree(), _patched(MATMUL / "candidates" / "interchange.patch"),
                    patch)
    assert a.beyond == [] and a.changed_functions == ["matmul@matmul.c"]
    assert [r.name for r in a.hotspot.regions] == ["matmul"]


def test_work_moved_into_an_existing_helper_makes_the_helper_count_with_the_hotspot():
    path = DATA / "matmul-helper-misattribution.patch"
    a = attribution("matmul@matmul.c", "matmul", "matmul.c", _tree(), _patched(path), path.read_bytes())
    assert "fill_matrix@matmul.c" in a.beyond
    assert {r.name for r in a.changed.regions} >= {"matmul", "fill_matrix"}
    assert {r.name for r in a.reach.regions} >= {"matmul", "fill_matrix"}  # the ceiling's reach
    assert [r.name for r in a.hotspot.regions] == ["matmul"]  # the reference's hotspot is its own code


def test_the_hybrid_takes_the_candidates_hotspot_and_nothing_else():
    path = DATA / "matmul-interchange-and-hoist.patch"
    cand = _patched(path)
    hybrid, functions, why = splice(_tree(), cand, "matmul", "matmul.c")
    assert why == "" and functions == ["matmul@matmul.c"]
    only = _patched(MATMUL / "candidates" / "interchange.patch")
    assert hybrid["matmul.c"] == only["matmul.c"]  # the interchange alone, the fill as the parent has it
    missing, _, why = splice(_tree(), cand, "no_such_function", None)
    assert missing is None and "not a function" in why


def _profile() -> Profile:
    ops = [Operation(id="matmul@matmul.c", name="matmul", kind="function", module="m", file="matmul.c",
                     self_metrics={"cpu_time_s": 0.6, "samples": 60}),
           Operation(id="fill_matrix@matmul.c", name="fill_matrix", kind="function", module="m", file="matmul.c",
                     self_metrics={"cpu_time_s": 0.3, "samples": 30}),
           Operation(id="clear_page@[kernel.kallsyms]", name="clear_page", kind="function", module="kernel.kallsyms",
                     self_metrics={"cpu_time_s": 0.1, "samples": 10})]
    lines = [LineCost(file="matmul.c", line=19, operation="matmul@matmul.c", self_metrics={"cpu_time_s": 0.5}),
             LineCost(file="matmul.c", line=48, operation="fill_matrix@matmul.c", self_metrics={"cpu_time_s": 0.3})]
    return Profile(tool="perf", tool_version="6.1", target="x", granularity=["function", "line"],
                   metrics=["cpu_time_s", "samples"], totals={"cpu_time_s": 1.0, "samples": 100}, operations=ops,
                   lines=lines)


def test_a_side_counts_its_lines_its_changed_lines_and_its_functions_without_lines_once():
    p = _profile()
    hot = CodeSide(regions=[CodeRegion(file="matmul.c", name="matmul", start=14, end=24)])
    # 0.5 on line 19 + the 0.1 of matmul that carried no line
    assert side_cost(p, hot) == pytest.approx(0.6)
    changed = CodeSide(regions=hot.regions, lines={"matmul.c": [48]})
    assert side_cost(p, changed) == pytest.approx(0.9)
    assert side_seconds(p, hot, 2.0) == pytest.approx(1.2)  # a share of the run's own wall time


def test_the_os_kernel_is_the_machine_never_an_operation():
    secs = operation_seconds(_profile(), 1.0)
    assert secs["[machine]"] == 0.1 and "clear_page@[kernel.kallsyms]" not in secs

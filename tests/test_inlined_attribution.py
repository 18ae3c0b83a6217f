"""Inlined kernels get their own samples and instruction counts (issue 13): perf's inline frames and,
for callgrind (which charges inlined code to the caller), the source definitions
(pw.rules.hotspot.reattribute_inlined); kernel symbols are never the hotspot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from adapters.base import CaptureRequest, read_artifacts
from adapters.callgrind import CallgrindAdapter
from ledger.profile import LineCost, Operation, Profile
from pw.agent.source import c_family
from pw.rules.hotspot import reattribute_inlined, select_hotspot, time_split

SUITE = Path(__file__).resolve().parents[1] / "workloads" / "suite"


def _profile(ops, lines) -> Profile:
    total = sum(o.self_metrics["Ir"] for o in ops)
    return Profile(tool="t", tool_version="1", target="baseline", granularity=["function", "line"], metrics=["Ir"],
                   totals={"Ir": total}, operations=ops, lines=lines, edges=[])


def test_line_costs_inside_an_inlined_function_move_to_it():
    main = Operation(id="main@g.c", name="main", kind="function", module="g", file="g.c", line_start=48,
                     line_end=66, self_metrics={"Ir": 100.0}, inclusive_metrics={"Ir": 100.0})
    lines = [LineCost(file="g.c", line=43, operation="main@g.c", self_metrics={"Ir": 80.0}),
             LineCost(file="g.c", line=55, operation="main@g.c", self_metrics={"Ir": 20.0})]
    defs = {"g.c": [("kernel_gemm", 36, 46), ("main", 48, 66)]}
    out = reattribute_inlined(_profile([main], lines), defs)
    kernel = out.operation("kernel_gemm@g.c")
    assert kernel is not None and kernel.self_metrics == {"Ir": 80.0} and (kernel.line_start, kernel.line_end) == (36, 46)
    assert out.operation("main@g.c").self_metrics == {"Ir": 20.0}
    assert out.operation("main@g.c").inclusive_metrics == {"Ir": 100.0}
    assert select_hotspot(out, {"g.c"}).name == "kernel_gemm"
    assert [(lc.line, lc.operation) for lc in out.lines] == [(43, "kernel_gemm@g.c"), (55, "main@g.c")]
    assert reattribute_inlined(out, defs) == out  # nothing left to move


def test_a_kernel_symbol_is_never_the_hotspot_but_its_share_is_reported():
    k = Operation(id="clear_page_erms@[kernel.kallsyms]", name="clear_page_erms", kind="function",
                  module="kernel.kallsyms", self_metrics={"Ir": 70.0}, inclusive_metrics={"Ir": 70.0})
    m = Operation(id="main@[gemm]", name="main", kind="function", module="gemm", self_metrics={"Ir": 30.0},
                  inclusive_metrics={"Ir": 30.0})
    prof = _profile([k, m], [])
    assert select_hotspot(prof, set()).name == "main"
    split = time_split(prof)
    assert split["kernel"] == 0.7 and split["user"] == 0.3
    assert split["kernel_causes"] == {"page faults / memory": 0.7}


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("cc") is None, reason="needs valgrind and cc")
def test_real_callgrind_on_the_inlined_gemm_kernel_names_it_after_reattribution(tmp_path):
    shutil.copytree(SUITE, tmp_path / "suite")
    gemm = tmp_path / "suite" / "linear-algebra" / "gemm"
    # Small sizes (valgrind is ~30x slower); -g as the profiling build adds it; no dump.
    subprocess.run(["cc", "-O2", "-g", "-DNI=60", "-DNJ=70", "-DNK=80", "-I../../utilities", "-o", "gemm", "gemm.c",
                    "../../utilities/common.c", "-lm"], cwd=gemm, check=True)
    out = tmp_path / "cg"
    cap = CallgrindAdapter().capture(CaptureRequest(argv=["./gemm"], cwd=str(gemm), out_dir=str(out), label="b",
                                                    env={}, timeout_s=120))
    root = str((tmp_path / "suite").resolve())
    prof = CallgrindAdapter().normalize(read_artifacts(cap), root, "b")
    rel = "linear-algebra/gemm/gemm.c"
    assert prof.operation(f"kernel_gemm@{rel}") is None  # callgrind alone: inlined into main
    index, _ = c_family.parse_file(rel, (gemm / "gemm.c").read_bytes())
    defs = {rel: [(f.name, f.line_start, f.line_end) for f in index.functions]}
    fixed = reattribute_inlined(prof, defs)
    kernel = fixed.operation(f"kernel_gemm@{rel}")
    metric = fixed.primary_metric
    assert kernel is not None and kernel.self_metrics[metric] > 0.5 * prof.totals[metric], (kernel, prof.totals)
    hot_lines = {lc.line for lc in fixed.lines if lc.operation == kernel.id}
    assert hot_lines and all(36 <= ln <= 46 for ln in hot_lines)
    assert select_hotspot(fixed, {rel}).name == "kernel_gemm"

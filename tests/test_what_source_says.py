"""What a candidate's source says beyond its functions' text (red team, session 16;
tests/data/redteam-s16/): a `#line` that moves the hotspot's samples onto a header comment, and a
`#define` inside the hotspot's braces that rewrites a helper defined further down. The first is a
refused edit and, whatever a line table says, a function's samples count by the symbol they lie in
(pw.campaign/5); the second reaches beyond the hotspot, and no hybrid splices it."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from ledger.events import CodeRegion, CodeSide
from ledger.profile import LineCost, Operation, Profile
from pw.agent.source.directives import Text
from pw.agent.source.regions import attribution, changed_lines, line_control, reaching_lines
from pw.rules.attribution import from_v5, operation_cost, side_cost

MATMUL = Path(__file__).parent.parent / "workloads" / "matmul-c"
S16 = Path(__file__).parent / "data" / "redteam-s16"


def _patched(patch: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    tree = {name: (MATMUL / name).read_bytes() for name in ("matmul.c", "matmul.h")}
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in tree.items():
            Path(tmp, name).write_bytes(data)
        subprocess.run(["patch", "-s", "-p1", "-d", tmp, "-i", str(patch)], check=True)
        return tree, {name: Path(tmp, name).read_bytes() for name in tree}


_SOURCE = b"""/* a header
   comment */
#include <stdio.h>
void f(void) {
    int x = 1; // c
    #undef Y
  /* a */ # /* b */ define Z 3
    %:define Q 1
    #line 2 "matmul.c"
# 35 "matmul.c"
    asm volatile(".loc 1 2 0");
    const char *s = "not a #define, nor .loc 1 2";
    const char *r = R"x( " /* )x";
#de\\
fine W 2
    asm("nop");
    const char *t = "a .file to write";
}
"""


def test_directives_are_read_through_comments_digraphs_and_continued_lines():
    t = Text(_SOURCE)
    assert [t.directive(k) for k in (3, 6, 7, 8, 9)] == ["include", "undef", "define", "define", "line"]
    assert t.directive(10) == "3"  # a linemarker
    assert t.directive(14) == t.directive(15) == "define"  # "#de\\\nfine": one logical line
    assert t.directive(1) is t.directive(12) is t.directive(13) is None
    # a string holding "/*" in a C++ raw string does not hide the lines after it
    assert t.directive(14) == "define"


def test_inline_assembly_and_line_control_are_found_where_they_are_written():
    t = Text(_SOURCE)
    assert t.has_asm(11) and t.has_asm(16) and not t.has_asm(12)
    assert t.line_control(9) == "#line" and "linemarker" in t.line_control(10)
    assert t.line_control(11) == "the assembler's .loc"
    # ".loc 1 2" inside an ordinary string is still an assembler line directive; "a .file to" is prose
    assert t.line_control(12) == "the assembler's .loc"
    assert t.line_control(17) is None and t.line_control(16) is None and t.line_control(7) is None


def test_a_line_directive_in_a_candidate_is_a_refused_edit():
    patch = S16 / "linememo" / "linememo.patch"
    _, cand = _patched(patch)
    refused = line_control(cand, patch.read_bytes())
    assert refused and all(r.startswith("matmul.c:") and "#line" in r for r in refused), refused
    # the honest interchange writes none
    honest = MATMUL / "candidates" / "interchange.patch"
    assert line_control(_patched(honest)[1], honest.read_bytes()) == []


def test_a_define_inside_the_hotspot_reaches_beyond_it():
    patch = S16 / "macromemo" / "macromemo.patch"
    tree, cand = _patched(patch)
    a = attribution("matmul@matmul.c", "matmul", "matmul.c", tree, cand, patch.read_bytes())
    inside = [b for b in a.beyond if b.startswith("a preprocessor directive")]
    assert inside and ":" in inside[0], a.beyond
    assert reaching_lines(cand, changed_lines(patch.read_bytes()))


def _profile() -> Profile:
    ops = [Operation(id="matmul@matmul.c", name="matmul", kind="function", module="m", file="matmul.c",
                     self_metrics={"cpu_time_s": 0.8}),
           Operation(id="row_key@matmul.c", name="row_key", kind="function", module="m", file="matmul.c",
                     self_metrics={"cpu_time_s": 0.2})]
    # a fifth of matmul's samples on line 2 (the header comment), where a #line put them
    lines = [LineCost(file="matmul.c", line=19, operation="matmul@matmul.c", self_metrics={"cpu_time_s": 0.6}),
             LineCost(file="matmul.c", line=2, operation="matmul@matmul.c", self_metrics={"cpu_time_s": 0.2}),
             LineCost(file="matmul.c", line=40, operation="row_key@matmul.c", self_metrics={"cpu_time_s": 0.2})]
    return Profile(tool="perf", tool_version="6.1", target="x", granularity=["function", "line"],
                   metrics=["cpu_time_s"], totals={"cpu_time_s": 1.0}, operations=ops, lines=lines)


def test_a_functions_samples_count_by_its_name_whatever_line_they_name():
    hot = CodeSide(regions=[CodeRegion(file="matmul.c", name="matmul", start=14, end=24)])
    p = _profile()
    assert side_cost(p, hot) == pytest.approx(0.6)  # by lines alone, the relabelled fifth is lost
    assert side_cost(p, hot, by_name=True) == pytest.approx(0.8)
    assert not from_v5("pw.campaign/4") and not from_v5(None) and from_v5("pw.campaign/5")


def test_an_operation_metric_counts_the_same_code_in_both_arms():
    # the reference's run: the operation 0.1 s, with the function the candidate changed (set-up) 0.5 s
    ref = {"hot_s": 0.1, "reach_s": 0.6}
    cand = {"hot_s": 0.5}  # the operation and the changed set-up, now faster
    assert operation_cost(ref, "reference", "pw.campaign/5") == 0.6
    assert operation_cost(cand, "candidate", "pw.campaign/5") == 0.5
    # rule 4 compared the operation alone with the operation and the set-up: "slower"
    assert operation_cost(ref, "reference", "pw.campaign/4") == 0.1


def test_code_no_symbol_names_counts_with_every_part():
    # red team s16-2: a third of kernel_lu's rows ran from copies of compiled code in memfds, which
    # perf names "[unknown] (/memfd:r1 (deleted))": under lines alone they were nobody's
    p = _profile()
    hidden = Operation(id="[unknown] (/memfd:r1 (deleted))@[unknown]", name="[unknown] (/memfd:r1 (deleted))",
                       kind="function", module="unknown", self_metrics={"cpu_time_s": 0.3})
    machine = Operation(id="[unknown]@[kernel.kallsyms]", name="[unknown]", kind="function",
                        module="kernel.kallsyms", self_metrics={"cpu_time_s": 0.1})
    p = Profile(tool=p.tool, tool_version=p.tool_version, target=p.target, granularity=p.granularity,
                metrics=p.metrics, totals={"cpu_time_s": 1.4}, operations=[*p.operations, hidden, machine],
                lines=p.lines)
    hot = CodeSide(regions=[CodeRegion(file="matmul.c", name="matmul", start=14, end=24)])
    assert side_cost(p, hot, by_name=True) == pytest.approx(0.8 + 0.3)  # the OS kernel's stays the machine's
    assert side_cost(p, hot) == pytest.approx(0.6)

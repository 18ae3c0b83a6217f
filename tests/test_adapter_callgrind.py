"""callgrind adapter: the shared contract, determinism on a real double capture, format details."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.base import CaptureRequest, read_artifacts
from adapters.callgrind import CallgrindAdapter, parse_callgrind
from ledger.profile import encode_profile
from tests.test_adapter_contract import AdapterContract, build_hot_c


class TestCallgrind(AdapterContract):
    adapter_factory = CallgrindAdapter
    fixture = "callgrind-hotc-out"

    def workload(self, tmp: Path) -> list[str]:
        return [str(build_hot_c(tmp)), "10"]  # ~1 s under callgrind

    def test_double_capture_is_byte_identical(self, adapter, usability, tmp_path):
        if not usability.usable:
            pytest.skip(f"callgrind unusable here: {usability.reason}")
        argv = [str(build_hot_c(tmp_path)), "5"]
        encoded = []
        for i in range(2):
            cap = adapter.capture(CaptureRequest(argv=argv, cwd=str(tmp_path), out_dir=str(tmp_path / f"o{i}")))
            encoded.append(encode_profile(adapter.normalize(read_artifacts(cap), str(tmp_path), "baseline")))
        assert encoded[0] == encoded[1]

    def test_fixture_exact_counts(self, fixture_profile):
        prof, _ = fixture_profile
        hot = prof.operation("hot_kernel@hot.c")
        # Ir of the hot loop: exactly linear in reps (60 reps x 100000 iterations x 16 instructions).
        lines = {lc.line: lc.self_metrics["instructions"] for lc in prof.lines_of(hot.id)}
        assert lines[16] == 60 * 100000 * 8 and lines[15] == 60 * 100000 * 4
        edge = next(e for e in prof.edges if e.callee == hot.id)
        assert edge.caller == "main@hot.c" and edge.metrics["calls"] == 1
        assert edge.metrics["instructions"] == hot.inclusive_metrics["instructions"]


COMPRESSED = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir D1mr
summary: 1000 10

ob=(1) /src/prog
fl=(1) /src/a.c
fn=(1) main
10 5 1
+2 7
cfn=(2) work
calls=3 20
* 900 9
fi=(2) /src/inc.h
3 8

fn=(2)
20 80
+1 800 9
cfn=(2)
calls=1 20
21 100
totals: 1000 10
"""


def test_compressed_names_positions_calls_and_recursion():
    parsed = parse_callgrind(COMPRESSED)
    assert parsed.events == ["Ir", "D1mr"] and parsed.version == "3.19.0"
    prof = CallgrindAdapter(cache_sim=True).normalize({"callgrind.out": COMPRESSED.encode()}, "/src", "t")
    main, work = prof.operation("main@a.c"), prof.operation("work@a.c")
    assert main.self_metrics == {"instructions": 20.0, "d1_read_misses": 1.0}
    assert main.inclusive_metrics["instructions"] == 920.0
    # the recursive call's 100 Ir are inside work's own self + other calls: not added again
    assert work.self_metrics["instructions"] == 880.0 and work.inclusive_metrics["instructions"] == 880.0
    lines = {(lc.file, lc.line): lc.self_metrics["instructions"] for lc in prof.lines}
    assert lines == {("a.c", 10): 5, ("a.c", 12): 7, ("inc.h", 3): 8, ("a.c", 20): 80, ("a.c", 21): 800}
    assert (main.line_start, main.line_end) == (10, 12)  # inlined inc.h lines are not main's span
    edges = {(e.caller, e.callee): e.metrics for e in prof.edges}
    assert edges[("main@a.c", "work@a.c")]["calls"] == 3
    assert edges[("work@a.c", "work@a.c")]["instructions"] == 100
    assert prof.totals == {"instructions": 1000.0, "d1_read_misses": 10.0}
    assert "d1_read_misses" in prof.metrics


def test_cachesim_spec_marks_simulated_metrics():
    from ledger.metrics import metric
    spec = CallgrindAdapter(cache_sim=True).spec
    assert spec.name == "callgrind-cachesim" and spec.phases == ["diagnosis"]
    assert all(metric(m).simulated for m in spec.measures if m not in ("instructions", "calls"))

"""The GPU timeline: records recorded on an H200 (CUPTI injection JSONL, nsys SQLite) and hand-made
ones, read into one shape and summarized; the CUPTI adapter's build and probe pieces.

Fixtures were recorded by tests/data/gpu-capture-raw.sh (log: tests/data/gpu-capture-raw.log).
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest

from adapters import cupti, nsys, torch_trace
from adapters.gpu_timeline import decode_jsonl, kernel_display_name, summarize, to_profile
from ledger.gpu_activity import (
    ApiActivity,
    KernelActivity,
    MemcpyActivity,
    SyncActivity,
    encode_activities,
)
from ledger.metrics import is_known

DATA = Path(__file__).parent / "data"
CUPTI_FIXTURES = sorted(DATA.glob("cupti-*-jsonl/*.jsonl*"))


def load_records(path: Path):
    data = path.read_bytes()
    return decode_jsonl(gzip.decompress(data) if path.suffix == ".gz" else data, path.name)


def fixture(name: str):
    return load_records(DATA / name)


# --- hand-checked summary --------------------------------------------------------------------------

def _k(name: str, s: int, e: int, **kw) -> KernelActivity:
    return KernelActivity(name=name, demangled=f"{name}(int)", start_ns=s, end_ns=e, **kw)


def test_summary_numbers_by_hand():
    recs = [
        MemcpyActivity(copy_kind="HtoD", bytes=4096, start_ns=0, end_ns=1_000),
        _k("a", 500, 3_000),          # overlaps the copy by 500 ns
        _k("a", 3_000, 5_000),        # back to back: no gap
        _k("b", 10_000, 11_000),      # 5,000 ns gap before it
        MemcpyActivity(copy_kind="DtoH", bytes=100, start_ns=11_500, end_ns=12_000),  # 500 ns seam: not a gap
        ApiActivity(name="cudaLaunchKernel_v7000", start_ns=0, end_ns=300),
        ApiActivity(name="cudaLaunchKernel_v7000", start_ns=400, end_ns=600),
        ApiActivity(name="cudaDeviceSynchronize_v3020", start_ns=600, end_ns=9_600),
    ]
    s = summarize(recs)
    t = s.totals
    assert t["gpu_span_ns"] == 12_000
    # union of device intervals: [0, 5000] [10000, 11000] [11500, 12000]
    assert t["gpu_busy_ns"] == 6_500 and t["gpu_idle_ns"] == 5_500
    assert t["idle_gaps"] == 1 and t["max_idle_gap_ns"] == 5_000  # the 500 ns seam is under MIN_GAP_NS
    assert t["copy_compute_overlap_ns"] == 500
    assert t["kernel_time_ns"] == 5_500 and t["kernel_launches"] == 3
    assert t["gpu_time_ns"] == 5_500 + 1_000 + 500
    assert (t["htod_bytes"], t["dtoh_bytes"], t["htod_time_ns"], t["dtoh_time_ns"]) == (4096, 100, 1_000, 500)
    assert t["launch_api_ns"] == 500 and t["launch_api_calls"] == 2
    assert t["sync_stall_ns"] == 9_000 and s.sync_source == "runtime-api"
    assert [(r.name, r.launches, r.gpu_time_ns) for r in s.kernels] == [("a", 2, 4_500), ("b", 1, 1_000)]
    assert s.top_gaps[0].before == "a" and s.top_gaps[0].after == "b" and s.top_gaps[0].start_ns == 5_000
    # Sync records win over the runtime's *Synchronize calls.
    s2 = summarize([*recs, SyncActivity(sync_kind="context", start_ns=700, end_ns=900)])
    assert s2.totals["sync_stall_ns"] == 200 and s2.sync_source == "sync-records"


def test_profile_shares_add_up_and_metrics_are_known():
    recs = fixture("cupti-cuda-transpose-jsonl/baseline.jsonl")
    p = to_profile(summarize(recs), recs, tool="cupti", tool_version="t", target="baseline")
    assert p.primary_metric == "gpu_time_ns" and p.granularity == ["kernel", "timeline"]
    assert sum(o.self_metrics["gpu_time_ns"] for o in p.operations) == pytest.approx(p.totals["gpu_time_ns"])
    assert all(is_known(m) for m in [*p.metrics, *p.totals])
    assert {o.kind for o in p.operations} == {"kernel", "memcpy"}


@pytest.mark.parametrize(("text", "short"), [
    ("transpose_kernel(float const*, float*, int, int)", "transpose_kernel"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
     "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"),
    ("void k<(anonymous namespace)::F>(int)", "k<(anonymous namespace)::F>"),
])
def test_kernel_display_name(text, short):
    assert kernel_display_name(KernelActivity(name="_Zx", demangled=text, start_ns=0, end_ns=1)) == short
    assert kernel_display_name(KernelActivity(name="_Z3fooi", start_ns=0, end_ns=1)) == "_Z3fooi"


# --- every recorded fixture ------------------------------------------------------------------------

@pytest.mark.parametrize("path", CUPTI_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_cupti_fixture_decodes_summarizes_and_reencodes(path: Path):
    recs = load_records(path)
    assert recs and any(isinstance(r, KernelActivity) for r in recs)
    s = summarize(recs)
    assert s.kernels and 0 < s.kernels[0].share <= 1
    assert s.totals["gpu_busy_ns"] <= s.totals["gpu_span_ns"]
    # The injection library's lines are exactly the ledger's shape: re-encoding reads back equal.
    assert decode_jsonl(encode_activities(recs)) == recs


def test_transpose_timeline_names_the_kernel_and_the_candidate_shrinks_it():
    base = summarize(fixture("cupti-cuda-transpose-jsonl/baseline.jsonl"))
    tiled = summarize(fixture("cupti-cuda-transpose-jsonl/tiled.jsonl"))
    kb, kt = base.kernels[0], tiled.kernels[0]
    assert kb.name == kt.name == "transpose_kernel" and kb.launches == kt.launches == 21
    assert (kb.grid, kb.block, kb.registers_per_thread) == ((256, 1024, 1), (32, 8, 1), 16)
    assert kb.mean_ns > 5 * kt.mean_ns  # ~950 us -> ~143 us per launch on the H200
    assert base.totals["dtoh_bytes"] == 8192 * 8192 * 4 + 6992  # the result plus the small matrix
    assert base.findings[0].startswith("kernel transpose_kernel takes")


def test_histogram_timeline_is_one_kernel():
    s = summarize(fixture("cupti-cuda-histogram-jsonl/baseline.jsonl"))
    assert s.kernels[0].name == "histogram_kernel" and s.kernels[0].share > 0.99 and s.kernels[0].launches == 5


def test_torch_small_ops_is_launch_bound():
    s = summarize(fixture("cupti-torch-small-ops-jsonl/baseline.jsonl.gz"))
    assert any(f.startswith("launch-bound") for f in s.findings), s.findings
    assert s.totals["kernel_launches"] >= 600 and s.totals["gpu_idle_ns"] > 0.9 * s.totals["gpu_span_ns"]


# --- nsys ------------------------------------------------------------------------------------------

NSYS = DATA / "nsys-cuda-transpose-sqlite"


def test_nsys_sqlite_reads_into_the_same_records():
    recs = nsys.read_sqlite((NSYS / "with-libs.sqlite").read_bytes())
    s = summarize(recs)
    # The nsys run was ./transpose 4096 4096 10 1: fill + 10 transposes + the small one.
    assert [(k.name, k.launches) for k in s.kernels] == [("transpose_kernel", 11), ("fill_kernel", 1)]
    assert s.totals["dtoh_bytes"] == 4096 * 4096 * 4 + 6992
    assert s.totals["launch_api_calls"] == 12
    k = next(r for r in recs if isinstance(r, KernelActivity) and "transpose" in r.name)
    assert k.name == "_Z16transpose_kernelPKfPfii" and k.block == (32, 8, 1)
    # Same kernel identity as the injection library's records of the same binary.
    cupti_kernel = next(r for r in fixture("cupti-cuda-transpose-jsonl/baseline.jsonl")
                        if isinstance(r, KernelActivity) and "transpose" in r.name)
    assert k.name == cupti_kernel.name and kernel_display_name(k) == kernel_display_name(cupti_kernel)


def test_nsys_rejects_non_sqlite():
    with pytest.raises(ValueError, match="not an SQLite database|no StringIds"):
        nsys.read_sqlite(b"this is not sqlite" * 100)


def test_nsys_failure_seen_on_the_device_is_detected():
    log = (NSYS / "without-libs.log").read_text()
    files = (NSYS / "without-libs.ls").read_text().split()
    ok, why = nsys.classify_outputs([f for f in files if f.startswith("tp.")], log, [])
    assert not ok and "only a .qdstrm" in why and "Importer error status" in why
    ok, why = nsys.classify_outputs(["tp.qdstrm"], log, ["libdw.so.1", "libelf.so.1"])
    assert "libdw.so.1, libelf.so.1" in why and nsys.LIBS_ENV in why
    files = (NSYS / "with-libs.ls").read_text().split()
    assert nsys.classify_outputs([f for f in files if f.startswith("tp.")],
                                 (NSYS / "with-libs.log").read_text(), []) == (True, "nsys profile wrote a .nsys-rep report")


def test_nsys_env_prepends_carried_libraries():
    assert nsys.nsys_env({}) == {}
    assert nsys.nsys_env({nsys.LIBS_ENV: "/tmp/dbg/lib", "LD_LIBRARY_PATH": "/x"}) == {"LD_LIBRARY_PATH": "/tmp/dbg/lib:/x"}


# --- torch profiler traces (hand-made in Kineto's format) ------------------------------------------

def test_torch_trace_reader():
    trace = {"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "void k<float>(float*)", "ts": 10.5, "dur": 2.25,
         "args": {"device": 0, "stream": 7, "correlation": 42, "grid": [1, 1, 1], "block": [128, 1, 1],
                  "registers per thread": 18, "shared memory": 0}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 1.0, "dur": 1.0,
         "args": {"bytes": 4096, "correlation": 41}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 9.0, "dur": 1.2, "tid": 5,
         "args": {"correlation": 42}},
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "ts": 13.0, "dur": 0.5, "args": {}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 8.0, "dur": 3.0},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 1.0},
    ]}
    recs = torch_trace.read_chrome_trace(msgspec.json.encode(trace))
    assert [type(r).__name__ for r in recs] == ["KernelActivity", "MemcpyActivity", "ApiActivity", "SyncActivity"]
    k = recs[0]
    assert (k.start_ns, k.end_ns, k.block, k.registers_per_thread, k.correlation_id) == (10_500, 12_750, (128, 1, 1), 18, 42)
    assert recs[1].copy_kind == "HtoD" and recs[1].bytes == 4096
    assert recs[3].sync_kind == "stream"
    assert summarize(recs).totals["launch_api_calls"] == 1
    with pytest.raises(ValueError, match="Chrome-trace JSON"):
        torch_trace.read_chrome_trace(b"[1, 2]")


# --- the CUPTI adapter's pieces --------------------------------------------------------------------

def test_header_versions_and_library_key():
    assert cupti.header_versions("#define CUDA_VERSION 13000\n", "#define CUPTI_API_VERSION 130001\n") == \
        ("13.0", "130001")
    assert cupti.header_versions("", "") == ("unknown", "unknown")
    tk = cupti.Toolkit("/opt/cuda", "13.0", "130001")
    k1, k2 = cupti.library_key(tk, b"a"), cupti.library_key(tk, b"b")
    assert k1 != k2 and k1.startswith("cuda13.0-cupti130001-")
    assert cupti.library_key(cupti.Toolkit("/x", "12.8", "1"), b"a") != k1


def test_cupti_normalize_is_pure_and_names_bad_lines():
    a = cupti.CuptiAdapter()
    data = (DATA / "cupti-cuda-histogram-jsonl/baseline.jsonl").read_bytes()
    meta = msgspec.json.encode({"adapter": "cupti", "tool_version": "cuda 13.0 cupti-api 130001"})
    p1 = a.normalize({cupti.JSONL_ROLE: data, "capture.json": meta}, "/src", "baseline")
    p2 = a.normalize({cupti.JSONL_ROLE: data, "capture.json": meta}, "/elsewhere", "baseline")
    assert p1 == p2 and p1.tool == "cupti" and p1.tool_version.startswith("cuda 13.0")
    assert p1.top_operations(1)[0].id == "histogram_kernel@[gpu]"
    with pytest.raises(ValueError, match=r"cupti.jsonl: line 2"):
        a.normalize({cupti.JSONL_ROLE: data.split(b"\n")[0] + b'\n{"type": "kernel"}\n'}, "/", "b")


TOOLKIT = cupti.find_toolkit()


@pytest.mark.skipif(TOOLKIT is None or shutil.which("gcc") is None,
                    reason="needs a CUDA toolkit with CUPTI headers and libcupti, and gcc")
def test_injection_library_builds_once_and_exports_the_entry_point(tmp_path):
    lib = cupti.build_library(TOOLKIT, cache=tmp_path)
    assert lib.is_file() and TOOLKIT.cuda_version in lib.parent.name
    nm = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True, check=True).stdout
    assert " T InitializeInjection" in nm
    mtime = lib.stat().st_mtime_ns
    assert cupti.build_library(TOOLKIT, cache=tmp_path) == lib and lib.stat().st_mtime_ns == mtime  # cached


def test_cupti_probe_says_why_not_on_a_host_without_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(cupti, "find_toolkit", lambda env=None: None)
    u = cupti.CuptiAdapter(cache=tmp_path).probe()
    assert not u.usable and "no CUDA toolkit with CUPTI" in u.reason


def _gpu_present() -> bool:
    return cupti.gpu_visible()[0]


@pytest.mark.gpu
@pytest.mark.skipif(TOOLKIT is None or shutil.which("nvcc") is None or not _gpu_present(),
                    reason="needs nvcc, a CUDA toolkit with CUPTI and a visible NVIDIA GPU")
def test_cupti_capture_of_the_transpose_workload(tmp_path):
    from adapters.base import CaptureRequest

    work = tmp_path / "w"
    shutil.copytree(Path(__file__).parents[1] / "workloads" / "cuda-transpose", work)
    subprocess.run(["make", "-s"], cwd=work, check=True)
    a = cupti.CuptiAdapter(cache=tmp_path / "cache")
    cap = a.capture(CaptureRequest(argv=["./transpose", "2048", "2048", "5", "1"], cwd=str(work),
                                   out_dir=str(tmp_path / "out"), env=dict(os.environ)))
    from adapters.base import read_artifacts

    p = a.normalize(read_artifacts(cap), str(work), "baseline")
    assert p.top_operations(1)[0].name == "transpose_kernel"


def test_a_device_time_hotspot_is_bounded_by_its_share_of_the_host_span_not_of_device_time():
    """Device work can hide behind host work: the Amdahl ceiling of a kernel uses its share of the
    host's CUDA span (here ~1/8 of the run), never its share of device time alone (~87%)."""
    from pw.rules.hotspot import amdahl_ceiling, select_hotspot

    recs = fixture("cupti-cuda-transpose-jsonl/baseline.jsonl")
    p = to_profile(summarize(recs), recs, tool="cupti", tool_version="t", target="baseline")
    span = p.totals["host_span_ns"]
    assert span >= p.totals["gpu_span_ns"] > 0
    hot = select_hotspot(p, {"[gpu]"})
    kernel_ns = next(o for o in p.operations if o.id == hot.operation).inclusive_metrics["gpu_time_ns"]
    assert hot.amdahl_ceiling == pytest.approx(1 / (1 - kernel_ns / span), rel=1e-5)
    assert hot.span_share == pytest.approx(kernel_ns / span, rel=1e-5)  # recorded for the brief to say
    assert hot.amdahl_ceiling < amdahl_ceiling(hot.share)

"""The GPU side of issue 28 in small pieces: mechanism classes and the counter each credits, the
region-aware hotspot and its findings, the class counters in Nsight Compute's capture, and the
CUDA driver settings every run of a CUDA target gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters import ncu
from ledger.profile import Operation, Profile
from pw.rules import hotspot as hs
from pw.rules.mechanisms import GPU_CLASSES, gpu_classes_of, gpu_counter_facts, gpu_counters_needed

DATA = Path(__file__).parent / "data"

# The naive and tiled GEMM's counters as the H200 measured them (tests/data/cuda-suite-h200).
NAIVE = {"global_load_sectors_per_request": 2.5, "global_store_sectors_per_request": 4.0,
         "global_load_requests": 8396800.0, "l2_bytes": 834515264.0, "dram_bytes": 3151360.0,
         "shared_load_wavefronts": 0.0}
TILED = {"global_load_sectors_per_request": 4.0, "global_store_sectors_per_request": 4.0,
         "global_load_requests": 270336.0, "l2_bytes": 26640448.0, "dram_bytes": 3150592.0,
         "shared_load_wavefronts": 6291696.0}


def test_the_class_named_first_in_the_mechanism_decides_and_a_keyword_starts_a_word():
    assert [c.id for c in gpu_classes_of("coalescing: shared-memory tiled transpose")] == ["coalescing", "data-reuse"]
    assert [c.id for c in gpu_classes_of("data reuse: tiled GEMM")] == ["data-reuse"]
    assert gpu_classes_of("remove a volatile qualifier") == []  # "tile" is not in "volatile"
    assert gpu_counter_facts("loop unrolling", NAIVE, TILED) is None
    assert all(c.counters for c in GPU_CLASSES)


def test_a_tiled_gemm_is_credited_with_the_load_requests_that_fell_not_the_sectors_that_rose():
    c = gpu_counter_facts("data reuse: shared-memory tiled GEMM", NAIVE, TILED)
    assert (c.metric, c.before, c.after, c.direction) == ("global_load_requests", 8396800.0, 270336.0, "down")
    # Named as coalescing alone, the same rewrite moves no coalescing counter its way: the closest is
    # reported, for the gate to say it did not move; a text naming both classes is credited by either.
    c = gpu_counter_facts("coalescing: consecutive threads", NAIVE, TILED)
    assert c.metric == "global_store_sectors_per_request" and c.before == c.after == 4.0
    assert gpu_counter_facts("coalescing: tiles in shared memory", NAIVE, TILED).metric == "global_load_requests"


def test_a_counter_missing_on_either_side_is_named_so_the_gate_can_say_so():
    c = gpu_counter_facts("data reuse: tiled", {}, {"global_load_requests": 1.0})
    assert (c.metric, c.before, c.after) == ("global_load_requests", None, 1.0)
    assert gpu_counters_needed("privatize the histogram's atomics") == ["global_atomic_requests"]


def _timeline(ops: list[tuple[str, str, float]], busy_ns: float) -> Profile:
    return Profile(tool="cupti", tool_version="t", target="baseline", granularity=["kernel", "timeline"],
                   metrics=["gpu_time_ns"], totals={"gpu_time_ns": sum(ns for _, _, ns in ops), "gpu_busy_ns": busy_ns,
                                                   "host_span_ns": 2e8},
                   operations=[Operation(id=f"{n}@[gpu]", name=n, kind=k, module="gpu",
                                         self_metrics={"gpu_time_ns": ns}, inclusive_metrics={"gpu_time_ns": ns})
                               for n, k, ns in ops])


def test_the_hotspot_is_the_kernel_with_its_ceiling_of_the_region_and_the_copy_a_finding():
    p = _timeline([("memcpy HtoD", "memcpy", 6.4e6), ("gesummv_kernel", "kernel", 6.9e5)], busy_ns=7.1e6)
    hot = hs.select_hotspot(p, set(), per_run_s=7.24e-4, of="region")
    assert hot.name == "gesummv_kernel" and hot.ceiling_of == "region"
    assert hot.ceiling_share == pytest.approx(6.9e5 / 1e9 / 7.24e-4, rel=1e-5)
    assert hot.amdahl_ceiling == pytest.approx(1 / (1 - hot.ceiling_share), rel=1e-4)
    findings = hs.device_findings(p, hot, per_run_s=7.24e-4, of="region", wall_s=0.39)
    assert findings[0] == "memcpy HtoD: 90% of device time (6.4 ms a run), outside the timed region"
    assert findings[1].startswith("the device is busy 1.8% of the 0.39 s run")
    # Without a timed metric the ceiling is of the host's CUDA span, as before.
    assert hs.select_hotspot(p, set()).ceiling_of == "span"
    # A timeline of copies alone keeps them.
    assert hs.select_hotspot(_timeline([("memcpy HtoD", "memcpy", 1e6)], 1e6), set()).name == "memcpy HtoD"


def test_a_region_much_longer_than_its_kernels_is_a_warning():
    p = _timeline([("gemm_kernel", "kernel", 1.5e5)], busy_ns=1.5e5)
    assert "warning" not in hs.region_check(p, 2.1e-4)
    lazy = hs.region_check(p, 3.28e-2)  # issue 28: the JIT and module loading inside the region
    assert lazy["warning"].startswith("the timed region (32.8 ms) lasts 219x the device time of all the run's kernels")


def test_ncu_asks_for_the_class_counters_and_reads_them_only_from_captures_that_did():
    from adapters.base import CaptureRequest

    req = CaptureRequest(argv=["./gemm.exe"], cwd="/tmp", out_dir="/tmp/o", label="baseline")
    adapter = ncu.NcuAdapter(kernel="gemm_kernel")
    asked = adapter.command("ncu", req, "/tmp/o/ncu")[adapter.command("ncu", req, "/tmp/o/ncu").index("--metrics") + 1]
    assert all(m in asked.split(",") for m in ncu.CLASS_METRICS)
    assert not set(ncu.CLASS_METRICS) & set(adapter.command("ncu", req, "x", classes=False)[-4].split(","))
    assert ncu.unknown_metric(b"==ERROR== Failed to find metric smsp__thread_inst_executed_per_inst_executed.ratio")
    assert not ncu.unknown_metric(b"==PROF== Disconnected from process 1")
    d = DATA / "ncu-cuda-transpose-csv"
    arts = {ncu.RAW_ROLE: (d / "baseline-raw.csv").read_bytes(), ncu.DETAILS_ROLE: (d / "baseline-details.csv").read_bytes()}
    [old] = ncu.diagnose_artifacts(arts)  # an older capture: no class counters, its profile unchanged
    assert "global_load_requests" not in old.metrics
    [km] = ncu.parse_raw_csv(arts[ncu.RAW_ROLE].decode())
    new = ncu.diagnose(km, classes=True)
    assert new.metrics["global_load_requests"] == km.values["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]


def test_a_cuda_target_runs_with_its_own_jit_cache_and_eager_loading_and_others_do_not(tmp_path):
    from ledger.contract import Step
    from pw.workload.steps import Target, base_env, cuda_jit_cache

    def target(label: str, files: list[str]) -> Target:
        return Target(label=label, src_dir=tmp_path / "src", build_dir=tmp_path / "build" / label, files=files)

    base, cand = target("baseline", ["k.cu", "k.cuh"]), target("tiled", ["k.cu"])
    env = base_env(Step(argv=["./k"]), tmp_path / "scratch", base)
    assert env["CUDA_MODULE_LOADING"] == "EAGER"
    assert Path(env["CUDA_CACHE_PATH"]) == (tmp_path / "build" / ".cuda-jit" / "baseline").resolve()
    assert Path(env["CUDA_CACHE_PATH"]).is_dir() and cuda_jit_cache(cand) != cuda_jit_cache(base)
    assert not Path(env["CUDA_CACHE_PATH"]).is_relative_to(base.build_dir)  # outside the target's tree
    assert "CUDA_CACHE_PATH" not in base_env(Step(argv=["./m"]), tmp_path / "scratch", target("c", ["m.c"]))
    # The step's own environment wins.
    mine = base_env(Step(argv=["./k"], env={"CUDA_MODULE_LOADING": "LAZY"}), tmp_path / "scratch", base)
    assert mine["CUDA_MODULE_LOADING"] == "LAZY"

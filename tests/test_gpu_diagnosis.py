"""Nsight Compute diagnosis and roofline from CSVs recorded on an H200; routing from recorded probe
results; the GPU counter rule of the mechanism gate; the GPU workloads' oracles on recorded stdout."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest

from adapters import ncu
from adapters.base import Usability
from adapters.gpu_timeline import decode_jsonl, summarize, to_profile
from adapters.registry import installed_specs
from ledger.metrics import is_known
from pw.rules import gates_reprofiled as gates
from pw.rules.routing import discovery_needs, escalate, route
from pw.rules.rulesets import rule_set
from pw.workload.compare import compare_text

DATA = Path(__file__).parent / "data"
WORKLOADS = Path(__file__).parents[1] / "workloads"
NCU_FIXTURES = sorted(DATA.glob("ncu-*-csv/*-raw.csv"))


def arts(workload: str, name: str) -> dict[str, bytes]:
    d = DATA / f"ncu-{workload}-csv"
    return {ncu.RAW_ROLE: (d / f"{name}-raw.csv").read_bytes(), ncu.DETAILS_ROLE: (d / f"{name}-details.csv").read_bytes()}


def diag(workload: str, name: str) -> ncu.Diagnostic:
    [d] = ncu.diagnose_artifacts(arts(workload, name))
    return d


def raw(workload: str, name: str) -> ncu.KernelMetrics:
    [k] = ncu.parse_raw_csv(arts(workload, name)[ncu.RAW_ROLE].decode())
    return k


# --- parsing ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "unit", "want"), [
    ("292.391424", "Mbyte", (292_391_424.0, "B")),
    ("992.64", "us", (992_640.0, "ns")),
    ("1,980,000", "", (1_980_000.0, "")),
    ("1.504", "Kbyte/cycle", (1504.0, "B/cycle")),
    ("3.2", "Ghz", (3.2e9, "Hz")),
    ("5", "block/SM", (5.0, "block/SM")),  # a unit with no rule is kept as printed, never guessed
    ("PolicySpread", "", ("PolicySpread", "")),
])
def test_scale_value(value, unit, want):
    got = ncu.scale_value(value, unit)
    assert got[1] == want[1]
    assert got[0] == (pytest.approx(want[0]) if isinstance(want[0], float) else want[0])


@pytest.mark.parametrize("path", NCU_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_ncu_fixture_parses_diagnoses_and_normalizes(path: Path):
    name = path.name.removesuffix("-raw.csv")
    workload = path.parent.name.removeprefix("ncu-").removesuffix("-csv")
    d = diag(workload, name)
    assert d.missing == [], d.missing
    assert d.duration_ns and d.duration_ns > 1_000 and d.rules
    assert all(is_known(m) for m in d.metrics)
    p = ncu.NcuAdapter().normalize(arts(workload, name), "/", name)
    assert p.tool == "ncu" and p.primary_metric == "gpu_time_ns" and len(p.operations) == 1
    assert p.operations[0].id == d.operation
    rf = ncu.roofline(raw(workload, name), share=0.5)
    assert rf.missing == [] and rf.bound == "memory" and rf.kernel_ceiling and rf.kernel_ceiling >= 1.0


def test_raw_csv_rejects_other_csv():
    with pytest.raises(ValueError, match="Kernel Name"):
        ncu.parse_raw_csv("a,b\n1,2\n")
    with pytest.raises(ValueError, match="Rule Name"):
        ncu.parse_details_csv("a,b\n1,2\n")


def test_transpose_diagnosis_names_uncoalesced_stores_and_the_candidate_fixes_them():
    base, tiled = diag("cuda-transpose", "baseline"), diag("cuda-transpose", "tiled")
    assert base.operation == tiled.operation == "transpose_kernel@[gpu]"
    # 32 sectors per store request: every lane of a warp writes its own 32-byte sector.
    assert base.metrics["global_store_sectors_per_request"] == 32.0
    assert base.metrics["global_load_sectors_per_request"] == 4.0
    assert tiled.metrics["global_store_sectors_per_request"] == 4.0
    assert base.limiter.startswith("uncoalesced global stores: 32.0 sectors/request")
    assert base.metrics["registers_per_thread"] == 16 and base.occupancy_limiter == "warps"
    assert base.metrics["achieved_occupancy_pct"] == pytest.approx(74.73, abs=0.01)
    assert base.top_stalls[0][0] == "drain" and base.top_stalls[1][0] == "long_scoreboard"
    rule = next(r for r in base.rules if r.rule == "MemoryCacheAccessPattern")
    assert rule.speedup_pct == pytest.approx(45.94) and rule.speedup_type == "global"
    assert "4.0 of the 32 bytes" in rule.description
    assert base.duration_ns == pytest.approx(992_640) and tiled.duration_ns == pytest.approx(145_728)
    assert set(base.groups) == {"memory", "occupancy", "stalls", "compute"}


def test_histogram_diagnosis_names_atomics_and_privatization_removes_them():
    base, priv = diag("cuda-histogram", "baseline"), diag("cuda-histogram", "privatized")
    assert base.limiter.startswith("global atomics")
    assert base.metrics["global_atomic_requests"] == 2_097_152  # one per load request: per element
    assert priv.metrics["global_atomic_requests"] == 8_448  # per block and bin, at the end
    assert not priv.limiter.startswith("global atomics")


def test_roofline_by_hand_for_the_naive_transpose():
    rf = ncu.roofline(raw("cuda-transpose", "baseline"), share=0.9)
    k = raw("cuda-transpose", "baseline").values
    sm_hz, dram_hz = k["sm__cycles_elapsed.avg.per_second"], k["dram__cycles_elapsed.avg.per_second"]
    assert rf.peak_fp32_flops == pytest.approx(2 * 16_896 * sm_hz)  # 132 SMs x 128 FFMA lanes x 2 FLOP
    assert rf.peak_dram_bw == pytest.approx(1504 * dram_hz)
    assert 4.7e12 < rf.peak_dram_bw < 4.9e12  # the H200's HBM3e, ~4.8 TB/s
    assert rf.flop == {"fp32": 0.0, "fp64": 0.0, "fp16": 0.0} and rf.arithmetic_intensity == 0.0
    assert rf.dram_bytes == pytest.approx(292_391_424 + 272_349_696)
    floor_s = rf.dram_bytes / rf.peak_dram_bw
    assert rf.kernel_ceiling == pytest.approx(992_640e-9 / floor_s)
    assert rf.program_ceiling == pytest.approx(1 / (0.1 + 0.9 / rf.kernel_ceiling))


def test_roofline_names_missing_inputs_instead_of_guessing():
    k = raw("cuda-transpose", "baseline")
    values = {n: v for n, v in k.values.items() if not n.startswith(("dram__bytes", "sm__cycles_elapsed"))}
    rf = ncu.roofline(ncu.KernelMetrics(id=k.id, kernel=k.kernel, values=values))
    assert rf.dram_bytes is None and rf.peak_dram_bw is None and rf.kernel_ceiling is None and rf.bound is None
    for name in ("dram__bytes_read.sum", "dram__bytes.sum.peak_sustained", "sm__cycles_elapsed.avg.per_second",
                 "timeline share of the kernel (no timeline capture)"):
        assert name in rf.missing


def test_sections_follow_the_question():
    assert ncu.sections_for("memory") == ["SpeedOfLight", "MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables"]
    assert ncu.sections_for(["stalls", "occupancy"]) == ["SpeedOfLight", "Occupancy", "LaunchStats",
                                                         "SchedulerStats", "WarpStateStats"]
    assert ncu.sections_for("why-slow")[0] == "SpeedOfLight" and "ComputeWorkloadAnalysis" in ncu.sections_for()
    with pytest.raises(ValueError, match="unknown ncu question"):
        ncu.sections_for("cache")
    # Every section we ask for exists in the recorded `ncu --list-sections`.
    listed = (DATA / "ncu-cuda-transpose-csv/ncu-list-sections.txt").read_text()
    assert all(s in listed for s in ncu.sections_for())


def test_capture_command_is_filtered_and_leaves_clocks_alone():
    from adapters.base import CaptureRequest

    a = ncu.NcuAdapter()
    a.focus("transpose_kernel", launches=21)
    cmd = a.command("/usr/bin/ncu", CaptureRequest(argv=["./transpose", "8192"], cwd=".", out_dir="o"), "o/ncu")
    assert cmd[1:3] == ["--clock-control", "none"]
    assert cmd[cmd.index("-k") + 1] == "regex:^transpose_kernel$"
    assert cmd[cmd.index("-s") + 1] == "2" and cmd[cmd.index("-c") + 1] == "1"
    assert cmd[-3:] == ["--", "./transpose", "8192"]
    assert ncu.kernel_regex("at::native::vectorized_elementwise_kernel<4, F>") == \
        "regex:^vectorized_elementwise_kernel$"
    unfocused = ncu.NcuAdapter()
    with pytest.raises(Exception, match="timeline must name"):
        unfocused.command("/usr/bin/ncu", CaptureRequest(argv=["./x"], cwd=".", out_dir="o"), "o/ncu")


def test_ncu_report_module_agrees_with_the_csv():
    """The recorded `ncu_report` dump (python module of Nsight Compute) and the raw CSV agree."""
    dump = json.loads(gzip.decompress((DATA / "ncu-cuda-transpose-csv/baseline-ncu_report.json.gz").read_bytes()))
    k = raw("cuda-transpose", "baseline").values
    assert dump["kernel"] == "transpose_kernel"
    for name in ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
                 "launch__registers_per_thread"):
        assert float(dump["metrics"][name]) == pytest.approx(k[name], rel=1e-6)


# --- routing from recorded probe results -----------------------------------------------------------

OK = Usability(usable=True, reason="probed", version="1")
# What the probes said on the device machine (tests/data/gpu-capture-raw.log): nsys without the
# carried libraries wrote only a .qdstrm; CUPTI injection and ncu worked.
DEVICE = {s.name: OK for s in installed_specs()} | {
    "nsys": Usability(usable=False, reason=("nsys wrote only a .qdstrm, no .nsys-rep: the QDSTRM import failed "
                                            "(Importer error status: An unknown error occurred.)")),
    "perf": Usability(usable=False, reason="perf not found on PATH"),
}


def _timeline(name: str):
    path = DATA / name
    data = path.read_bytes()
    recs = decode_jsonl(gzip.decompress(data) if path.suffix == ".gz" else data)
    return to_profile(summarize(recs), recs, tool="cupti", tool_version="1", target="baseline")


def test_cuda_discovery_is_the_timeline_and_nsys_failure_routes_to_cupti():
    d = route("discovery", discovery_needs("cuda"), 0.85, installed_specs(), DEVICE, "cuda")
    assert d.chosen == "cupti" and d.rung == "gpu-timeline"
    why = {r.adapter: r.reason for r in d.rejected}
    assert why["nsys"].startswith("unusable: nsys wrote only a .qdstrm")
    assert why["ncu"] == "phase: does not serve discovery"  # never merely because CUDA is present
    with_libs = DEVICE | {"nsys": OK}
    d2 = route("discovery", discovery_needs("cuda"), 0.85, installed_specs(), with_libs, "cuda")
    assert d2.chosen == "cupti" and {r.adapter: r.reason for r in d2.rejected}["nsys"].startswith("cost:")
    only_nsys = with_libs | {"cupti": Usability(usable=False, reason="no CUDA toolkit with CUPTI")}
    assert route("discovery", discovery_needs("cuda"), 0.85, installed_specs(), only_nsys, "cuda").chosen == "nsys"


def test_timeline_kernel_hotspot_escalates_to_ncu():
    prof = _timeline("cupti-cuda-transpose-jsonl/baseline.jsonl")
    d = route("discovery", discovery_needs("cuda"), 0.85, installed_specs(), DEVICE, "cuda")
    esc = escalate(d, prof, "transpose_kernel@[gpu]")
    assert esc.to_rung == "kernel-counters" and "transpose_kernel" in esc.reason
    diag_route = route("diagnosis", esc.needs, 0.85, installed_specs(), DEVICE, "cuda", rung=esc.to_rung)
    assert diag_route.chosen == "ncu"
    assert {r.adapter: r.reason for r in diag_route.rejected}["cupti"] == "insight: does not measure sm_throughput_pct"
    # A copy as the hotspot is not a kernel question.
    assert escalate(d, prof, "[memcpy DtoH]@[gpu]").to_rung is None


def test_launch_bound_timeline_does_not_escalate():
    prof = _timeline("cupti-torch-small-ops-jsonl/baseline.jsonl.gz")
    d = route("discovery", discovery_needs("cuda"), 4.0, installed_specs(), DEVICE, "cuda")
    hot = prof.top_operations(1)[0]
    esc = escalate(d, prof, hot.id)
    assert esc.to_rung is None and esc.reason.startswith("launch-bound")


def test_without_a_gpu_cuda_programs_get_no_gpu_adapter():
    cpu_only = {s.name: OK for s in installed_specs()} | {
        n: Usability(usable=False, reason="no NVIDIA GPU visible (no nvidia-smi, no /dev/nvidia0)")
        for n in ("cupti", "nsys", "ncu")}
    d = route("discovery", discovery_needs("cuda"), 1.0, installed_specs(), cpu_only, "cuda")
    assert d.chosen is None and "no NVIDIA GPU visible" in {r.adapter: r.reason for r in d.rejected}["cupti"]


def test_language_of_sees_cuda_sources():
    from pw.app.profile_baseline import language_of

    assert language_of(["./transpose"], ["transpose.cu"]) == "cuda"
    assert language_of(["./matmul"], ["matmul.c"]) == "native"
    assert language_of(["python3", "main.py"], ["ops.py"]) == "python"


# --- the mechanism gate's GPU counter rule ---------------------------------------------------------

def test_counter_rule_on_recorded_candidates():
    tb, tt = diag("cuda-transpose", "baseline").metrics, diag("cuda-transpose", "tiled").metrics
    c = gates.gpu_counter_facts("coalescing: shared-memory tiled transpose", tb, tt)
    assert c.metric == "global_store_sectors_per_request" and (c.before, c.after) == (32.0, 4.0)
    ok, detail = gates.gpu_counter_check(c)
    assert ok and "32 -> 4" in detail
    hb, hp = diag("cuda-histogram", "baseline").metrics, diag("cuda-histogram", "privatized").metrics
    ok, _ = gates.gpu_counter_check(gates.gpu_counter_facts("privatized shared-memory atomics", hb, hp))
    assert ok
    # The same candidate judged by a mechanism whose counter did not move: not verified.
    ok, detail = gates.gpu_counter_check(gates.gpu_counter_facts("privatize the atomics", tb, tt))
    assert not ok and "global_atomic_requests 0 -> 0" in detail  # the transpose has no atomics to remove
    ok, detail = gates.gpu_counter_check(gates.gpu_counter_facts("raise occupancy", hb, hp))
    assert not ok and "achieved_occupancy_pct" in detail
    assert gates.gpu_counter_facts("rename variables", tb, tt) is None
    ok, detail = gates.gpu_counter_check(None)
    assert not ok and "no counter" in detail


def test_mechanism_gate_requires_the_counter_for_gpu_hotspots():
    from projections.profile_diff import diff_profiles

    before = _timeline("cupti-cuda-transpose-jsonl/baseline.jsonl")
    after = _timeline("cupti-cuda-transpose-jsonl/tiled.jsonl")
    d = diff_profiles(before, after, hotspot="transpose_kernel@[gpu]")
    tb, tt = diag("cuda-transpose", "baseline").metrics, diag("cuda-transpose", "tiled").metrics
    base = gates.GateInputs(
        candidate="a",
        hotspot=gates.HotspotFacts(operation="transpose_kernel@[gpu]", metric="gpu_time_ns", share=0.56,
                                   amdahl_ceiling=None),
        profile_diff=d,
        adapter=gates.AdapterFacts(name="cupti", can_reprofile=True, usable=True, measured=["gpu_time_ns"]),
    )
    mech = next(g for g in gates.evaluate_gates(base) if g.name == "mechanism")
    assert not mech.passed and "no counter" in mech.detail
    good = gates.GateInputs(**{**{f: getattr(base, f) for f in base.__struct_fields__},
                               "counter": gates.gpu_counter_facts("coalescing", tb, tt)})
    mech = next(g for g in gates.evaluate_gates(good) if g.name == "mechanism")
    assert mech.passed, mech.detail
    assert "global_store_sectors_per_request 32 -> 4" in mech.detail
    # Rules 3 (before the GPU counter rule) did not ask for the counter: old verdicts recompute as judged.
    assert next(g for g in gates.evaluate_gates(base, rules=3) if g.name == "mechanism").passed


# --- oracles of the GPU workloads on recorded stdout -----------------------------------------------

def _oracle(workload: str) -> dict:
    return json.loads((WORKLOADS / workload / "profileweaver.json").read_text())["oracle"]


def test_recorded_candidates_against_the_oracles():
    o = _oracle("cuda-transpose")
    ref = (WORKLOADS / "cuda-transpose" / o["reference"]).read_text()
    tiled = (DATA / "oracle-cuda-gpu-stdout/transpose-tiled.txt").read_text()
    assert compare_text(tiled, ref, rtol=o["rtol"], atol=o["atol"]).passed
    hold = (WORKLOADS / "cuda-transpose/reference/holdout-1000-3000-7.txt").read_text()
    assert compare_text((DATA / "oracle-cuda-gpu-stdout/transpose-tiled-holdout-1000-3000-7.txt").read_text(),
                        hold, rtol=0.0, atol=0.0).passed
    o = _oracle("cuda-histogram")
    ref = (WORKLOADS / "cuda-histogram" / o["reference"]).read_text()
    assert compare_text((DATA / "oracle-cuda-gpu-stdout/histogram-privatized.txt").read_text(), ref,
                        rtol=0.0, atol=0.0).passed
    naive = compare_text((DATA / "oracle-cuda-gpu-stdout/histogram-noatomic.txt").read_text(), ref, rtol=0.0, atol=0.0)
    assert not naive.passed and naive.detail  # the race loses updates: rejected by correctness, with a reason
    o = _oracle("torch-small-ops")
    ref = (WORKLOADS / "torch-small-ops" / o["reference"]).read_text()
    assert compare_text((DATA / "oracle-cuda-gpu-stdout/torch-cudagraph.txt").read_text(), ref,
                        rtol=o["rtol"], atol=o["atol"]).passed


def test_workload_outputs_are_full_not_checksums():
    ref = (WORKLOADS / "cuda-histogram/reference/stdout.txt").read_text().splitlines()
    assert len(ref) == 1 + 256 + 1 and ref[-1] == "total 67108864"  # every bin, cleared before each rep
    small = (WORKLOADS / "cuda-transpose/reference/stdout.txt").read_text().splitlines()
    rows = [r for r in small[3:] if r.strip()]
    assert small[2].startswith("small ") and len(rows) == int(small[2].split()[1])
    assert all(len(r.split()) == int(small[2].split()[3]) for r in rows)
    assert len(list(csv.reader(io.StringIO((WORKLOADS / "torch-small-ops/reference/stdout.txt").read_text())))) == 65


# --- the brief of a GPU run, from the recorded timeline and ncu capture -----------------------------

def test_gpu_brief_names_kernel_share_and_limiter_within_budget():
    from pw.agent.brief import TOKEN_BUDGET, render_brief
    from pw.agent.tokens import count_tokens
    from pw.app.profile_baseline import gpu_summary
    from pw.rules.hotspot import select_hotspot

    timeline = _timeline("cupti-cuda-transpose-jsonl/baseline.jsonl")
    hot = select_hotspot(timeline, {"transpose.cu"})
    assert hot.operation == "transpose_kernel@[gpu]" and hot.file is None
    gpu = gpu_summary(arts("cuda-transpose", "baseline"), hot.share)
    assert gpu["kernel"] == "transpose_kernel" and gpu["limiter"].startswith("uncoalesced global stores")
    rf = gpu["roofline"]
    numbers = {
        "run_id": "20261130-000000-cuda-transpose", "run_dir": "runs/20261130-000000-cuda-transpose",
        "workload": "cuda-transpose", "metric": "wall time", "baseline_mean_s": 0.83, "baseline_runs": 5,
        "baseline_cv": 0.02, "oracle": "stdout", "adapter": "cupti", "adapter_mode": "injection",
        "hotspot": {"name": hot.name, "file": None, "line_start": None, "line_end": None, "share": hot.share,
                    "metric": hot.metric, "ceiling": hot.amdahl_ceiling, "operation": hot.operation},
        "hot_lines": [], "mechanisms": [], "slices": [], "frontier": [], "editable": ["transpose.cu"],
        "gpu": {"kernel": gpu["kernel"], "limiter": gpu["limiter"], "bound": rf["bound"],
                "kernel_ceiling": rf["kernel_ceiling"], "program_ceiling": rf["program_ceiling"]},
    }
    text, tokens = render_brief(numbers, count_tokens)
    assert tokens <= TOKEN_BUDGET and tokens == count_tokens(text)
    assert "transpose_kernel = 55.8% of gpu_time_ns" in text
    assert "Limiter of transpose_kernel (ncu): uncoalesced global stores: 32.0 sectors/request" in text
    assert "roofline: memory-bound" in text


def test_judge_reads_the_counter_the_stated_mechanism_names():
    """The judge's GPU counter: the hotspot kernel's ncu metrics (parent vs candidate, from the
    recorded captures) under the mechanism the agent named at `pw prepare`."""
    import hashlib

    from ledger import events as ev
    from ledger.profile import encode_profile
    from pw.rules import judge

    def stored(p):
        data = encode_profile(p)
        return hashlib.sha256(data).hexdigest(), data

    (sb, db), (sc, dc) = (stored(ncu.NcuAdapter().normalize(arts("cuda-transpose", n), "/", n))
                          for n in ("baseline", "tiled"))

    def normalized(target, sha):
        return (7, ev.ProfileNormalized(adapter="ncu", target=target, profile_sha256=sha,
                                        primary_metric="gpu_time_ns", total=1.0))

    hot = ev.HotspotSelected(operation="transpose_kernel@[gpu]", name="transpose_kernel", file=None, line_start=None,
                             line_end=None, metric="gpu_time_ns", share=0.56, amdahl_ceiling=2.26)
    prepared = ev.CandidatePrepared(id="a", parent="baseline", resolved_parent="baseline",
                                    mechanism="coalescing: shared-memory tiled transpose", workspace="w",
                                    parent_source_sha256="0" * 64, parent_manifest_sha256="0" * 64,
                                    editable=["transpose.cu"], targets=[])
    empty = {f: None for f in judge.Selection.__struct_fields__}
    s = judge.Selection(**{**empty, "hotspot": (3, hot), "prepared": (5, prepared),
                           "baseline_counters": normalized("baseline", sb), "candidate_counters": normalized("a", sc)})
    tb = _timeline("cupti-cuda-transpose-jsonl/baseline.jsonl")
    tt = _timeline("cupti-cuda-transpose-jsonl/tiled.jsonl")
    c = judge._gpu_counter(s, {sb: db, sc: dc}, tb, tt, rule_set(18))
    assert (c.metric, c.before, c.after, c.direction) == ("global_store_sectors_per_request", 32.0, 4.0, "down")
    # No candidate capture: the counter is named missing, so the gate cannot pass.
    c = judge._gpu_counter(msgspec_replace(s, candidate_counters=None), {sb: db}, tb, tt, rule_set(18))
    assert c.after is None and not gates.gpu_counter_check(c)[0]
    # A CPU hotspot never asks for a counter.
    cpu = msgspec_replace(s, hotspot=(3, msgspec_replace(hot, metric="cpu_time_s")))
    assert judge._gpu_counter(cpu, {}, None, None, rule_set(18)) is None


def msgspec_replace(obj, **kw):
    import msgspec

    return msgspec.structs.replace(obj, **kw)


def test_the_timeline_kernel_is_found_in_the_editable_source():
    from pw.agent.source.locator import locate
    from pw.app.profile_baseline import kernel_file

    root = WORKLOADS / "cuda-transpose"
    assert kernel_file(root, ["transpose.h", "transpose.cu"], "transpose_kernel") == "transpose.cu"
    assert kernel_file(WORKLOADS / "cuda-histogram", ["histogram.cu"], "make_data") is None  # harness, not editable
    assert kernel_file(root, ["transpose.cu"], "at::native::vectorized_elementwise_kernel<4, F>") is None
    located = locate(root, ["transpose.cu"], "transpose.cu", "transpose_kernel", [])
    hot = next(t for t in located.targets if t.role == "hotspot")
    assert (hot.file, hot.line_start, hot.line_end) == ("transpose.cu", 6, 12)
    assert "out[(long)x * rows + y] = in[(long)y * cols + x];" in located.slices[hot.slice]


def test_launch_bound_brief_says_so():
    from pw.agent.brief import render_brief
    from pw.agent.tokens import count_tokens

    prof = _timeline("cupti-torch-small-ops-jsonl/baseline.jsonl.gz")
    d = route("discovery", discovery_needs("cuda"), 4.0, installed_specs(), DEVICE, "cuda")
    hot = prof.top_operations(1)[0]
    esc = escalate(d, prof, hot.id)
    numbers = {"run_id": "R", "run_dir": "runs/R", "workload": "torch-small-ops", "metric": "wall time",
               "baseline_mean_s": 3.8, "baseline_runs": 5, "baseline_cv": 0.01, "oracle": "stdout", "adapter": "cupti",
               "adapter_mode": "injection",
               "hotspot": {"name": hot.name, "file": None, "line_start": None, "line_end": None, "share": 0.26,
                           "metric": "gpu_time_ns", "ceiling": 1.35, "operation": hot.id},
               "editable": ["ops.py"], "gpu": {"timeline": esc.reason}}
    text, tokens = render_brief(numbers, count_tokens)
    assert tokens <= 320 and "Timeline: launch-bound: mean kernel 0.9 us < mean launch call 18.2 us" in text

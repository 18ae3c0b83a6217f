"""Nsight Compute adapter: diagnosis of ONE named kernel (why is it slow?), plus its roofline.

Routing reaches this adapter only after a timeline named the kernel (see ``pw.routing``): ncu replays
each profiled launch tens of times (33 passes for the full section set here), so it is filtered to
the hotspot by name (``-k regex:``), launch skip (``-s``) and count (``-c``), and runs with
``--clock-control none`` (the device's clocks are left as they are; METHOD.md).

Sections are chosen by the question (``sections_for``): SpeedOfLight always first, then Memory
(MemoryWorkloadAnalysis + its tables), Occupancy (+ LaunchStats), Stalls (SchedulerStats +
WarpStateStats), Compute (ComputeWorkloadAnalysis), Roofline (the roofline chart's counters). A few
metrics the sections do not print are added with ``--metrics`` (sectors and requests per global
op, per-type FLOP counts, DRAM bytes).

Normalize reads ``ncu --import R --csv --page raw`` (every metric with its unit; one row per kernel)
and ``--page details`` (the rule findings with their estimated speedups); both are plain CSV, so CI
parses them without ncu. Units are scaled to base units (``Mbyte`` -> bytes, ``us`` -> ns).
``diagnose`` gives the bounded diagnostic and ``roofline`` the ceiling; any input a number needs and
the capture lacks is named in ``missing``, never guessed.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
from collections.abc import Mapping, Sequence

import msgspec

from adapters.base import (
    Adapter,
    AdapterSpec,
    Capture,
    CaptureError,
    CaptureRequest,
    Usability,
    decode_meta,
    last_line,
    require_artifact,
    run_tool,
)
from adapters.cupti import gpu_visible
from adapters.gpu_timeline import GPU_MODULE
from ledger.profile import Operation, Profile

RAW_ROLE = "ncu-raw.csv"
DETAILS_ROLE = "ncu-details.csv"
REPORT_ROLE = "ncu.ncu-rep"

QUESTIONS: dict[str, list[str]] = {
    "memory": ["MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables"],
    "occupancy": ["Occupancy", "LaunchStats"],
    "stalls": ["SchedulerStats", "WarpStateStats"],
    "compute": ["ComputeWorkloadAnalysis"],
    "roofline": ["SpeedOfLight_RooflineChart"],
}
_ORDER = ("memory", "occupancy", "stalls", "compute", "roofline")
EXTRA_METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
    *(f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum"
      for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma", "hadd", "hmul", "hfma")),
    "gpu__time_duration.sum",
]
# What the mechanism classes beyond coalescing need (pw.rules.mechanisms.GPU_CLASSES): data reuse
# (shared-memory traffic; global load requests and L2/DRAM bytes are above), atomics, divergence.
# Asked for in the same capture; a tool that does not know one of them (another ncu, another GPU)
# gets the capture again without them, and the counters are then missing, never the capture.
CLASSES_OPTION = "class_counters"  # in capture.json: the capture asked for CLASS_METRICS
CLASS_METRICS = [
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio", "smsp__sass_average_branch_targets_threads_uniform.pct",
]

SPEC = AdapterSpec(
    name="ncu",
    tool="ncu",
    measures=["gpu_time_ns", "registers_per_thread", "theoretical_occupancy_pct", "achieved_occupancy_pct",
              "eligible_warps_per_cycle", "issue_active_pct", "global_load_sectors_per_request",
              "global_store_sectors_per_request", "global_atomic_requests", "dram_bytes", "dram_read_bytes",
              "dram_write_bytes", "l2_bytes", "l1_hit_rate_pct", "l2_hit_rate_pct", "sm_throughput_pct",
              "memory_throughput_pct", "dram_throughput_pct", "fp32_flop", "fp64_flop", "fp16_flop",
              "achieved_flops", "arithmetic_intensity", "global_load_requests", "global_store_requests",
              "shared_load_wavefronts", "shared_store_wavefronts", "threads_per_instruction",
              "branch_uniformity_pct"],
    granularity=["kernel"],
    phases=["diagnosis"],
    targets=["cuda"],
    can_reprofile=True,
    partial=False,
    overhead_factor=1.0,
    setup_s=5.0,
    cost_note=("measured on H200, one filtered launch, all sections (33 replay passes): 4.1-5.0 s "
               "per capture for 150 us-23 ms kernels, plus the program's own run"),
)


def sections_for(question: str | Sequence[str] = "why-slow") -> list[str]:
    """The sections a question needs, SpeedOfLight first; 'why-slow' (or 'all') takes every group."""
    groups = [question] if isinstance(question, str) else list(question)
    if any(g in ("why-slow", "all") for g in groups):
        groups = list(_ORDER)
    bad = [g for g in groups if g not in QUESTIONS]
    if bad:
        raise ValueError(f"unknown ncu question {bad}; expected 'why-slow' or some of {list(_ORDER)}")
    out = ["SpeedOfLight"]
    for g in _ORDER:
        if g in groups:
            out += QUESTIONS[g]
    return out


def kernel_regex(display_name: str) -> str:
    """ncu's ``-k regex:`` for a timeline kernel name: its last identifier (ncu matches the function
    name without namespaces' templates or parameters), anchored, escaped."""
    base = re.split(r"[<(]", display_name, maxsplit=1)[0]
    ident = base.rsplit("::", 1)[-1].strip() or display_name
    return f"regex:^{re.escape(ident)}$"


# --- parsing (pure) ----------------------------------------------------------------------------------

_PREFIX = {"n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def scale_value(value: str, unit: str) -> tuple[float | str, str]:
    """A CSV cell in base units: ('292,391,424', '') from ('292.391424', 'Mbyte'). Times go to ns,
    bytes to B, frequencies to Hz; other units are kept as printed. Non-numbers stay strings."""
    text = value.replace(",", "").strip()
    try:
        x = float(text)
    except ValueError:
        return value, unit
    u = unit.strip()
    if u in _TIME:
        return x * _TIME[u], "ns"
    m = re.fullmatch(r"([numkKMGT]?)(byte|hz|Hz)(/.*)?", u)
    if m:
        return x * _PREFIX[m.group(1)], ("B" if m.group(2) == "byte" else "Hz") + (m.group(3) or "")
    m = re.fullmatch(r"(cycle|inst|warp|sector|request)/([numkKMGT]?)(second|s)", u)
    if m:  # per-time rates: into per-second
        return x / _PREFIX[m.group(2)], f"{m.group(1)}/s"
    return x, u


class KernelMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """One profiled launch from the raw page: identity plus every metric in base units."""

    id: str
    kernel: str
    block: str = ""
    grid: str = ""
    device: str = ""
    cc: str = ""
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    text: dict[str, str] = {}


_IDENT_COLS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
               "Block Size", "Grid Size", "Device", "CC")


def parse_raw_csv(text: str) -> list[KernelMetrics]:
    """``ncu --csv --page raw``: a header row, a units row, then one row per profiled launch."""
    rows = list(csv.reader(io.StringIO(text)))
    rows = [r for r in rows if r and not r[0].startswith("==")]  # ncu's own ==PROF== lines
    if len(rows) < 2 or "Kernel Name" not in rows[0]:
        raise ValueError("ncu raw CSV: expected a header row with 'Kernel Name' and a units row")
    header, units = rows[0], rows[1]
    out = []
    for row in rows[2:]:
        cells = dict(zip(header, row))
        values: dict[str, float] = {}
        unit_of: dict[str, str] = {}
        text_of: dict[str, str] = {}
        for i, name in enumerate(header):
            if name in _IDENT_COLS or i >= len(row):
                continue
            v, u = scale_value(row[i], units[i] if i < len(units) else "")
            if isinstance(v, float):
                values[name] = v
                unit_of[name] = u
            elif row[i]:
                text_of[name] = row[i]
        out.append(KernelMetrics(id=cells.get("ID", ""), kernel=cells.get("Kernel Name", ""),
                                 block=cells.get("Block Size", ""), grid=cells.get("Grid Size", ""),
                                 device=cells.get("Device", ""), cc=cells.get("CC", ""),
                                 values=values, units=unit_of, text=text_of))
    return out


class RuleFinding(msgspec.Struct, frozen=True, kw_only=True):
    section: str
    rule: str
    kind: str  # OPT / WRN / INF
    description: str
    speedup_pct: float | None = None
    speedup_type: str = ""  # "local" (this kernel's part) or "global" (the kernel)


def parse_details_csv(text: str) -> dict[str, list[RuleFinding]]:
    """Rule findings of ``--page details --csv`` by launch ID (rows whose 'Rule Name' is set)."""
    out: dict[str, list[RuleFinding]] = {}
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "Rule Name" not in reader.fieldnames:
        raise ValueError("ncu details CSV: expected the columns of `--page details --csv` with 'Rule Name'")
    for r in reader:
        if not r.get("Rule Name"):
            continue
        sp = (r.get("Estimated Speedup") or "").replace(",", "")
        out.setdefault(r.get("ID", ""), []).append(RuleFinding(
            section=r.get("Section Name", ""), rule=r["Rule Name"], kind=r.get("Rule Type", ""),
            description=" ".join((r.get("Rule Description") or "").split()),
            speedup_pct=float(sp) if re.fullmatch(r"[0-9.]+", sp) else None,
            speedup_type=r.get("Estimated Speedup Type") or ""))
    return out


# --- the diagnostic and the roofline (pure) ----------------------------------------------------------

class Diagnostic(msgspec.Struct, frozen=True, kw_only=True):
    kernel: str
    operation: str
    duration_ns: float | None
    metrics: dict[str, float]  # ledger.metrics ids
    occupancy_limiter: str | None
    top_stalls: list[tuple[str, float]]  # (reason, warps stalled per issued instruction)
    pipes: list[tuple[str, float]]  # (pipe, % of peak, active cycles)
    rules: list[RuleFinding]
    limiter: str  # one line: what bounds this kernel, from the numbers
    missing: list[str] = []
    groups: dict[str, dict[str, float | str]] = {}


class Roofline(msgspec.Struct, frozen=True, kw_only=True):
    kernel: str
    flop: dict[str, float]  # fp32 / fp64 / fp16 counted operations
    dram_bytes: float | None
    duration_ns: float | None
    achieved_flops: float | None
    achieved_dram_bw: float | None  # B/s
    arithmetic_intensity: float | None  # FLOP/B
    peak_fp32_flops: float | None
    peak_fp64_flops: float | None
    peak_dram_bw: float | None
    ridge_intensity: float | None
    bound: str | None  # "memory" | "compute"
    kernel_ceiling: float | None  # this kernel's duration / its time at the roof it sits under
    share: float | None  # the kernel's share of device time, from the timeline
    program_ceiling: float | None  # Amdahl through that share
    peak_source: str = ""
    missing: list[str] = []


def _get(v: Mapping[str, float], name: str, missing: list[str]) -> float | None:
    if name in v:
        return v[name]
    missing.append(name)
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_PIPE = re.compile(r"^sm__inst_executed_pipe_(\w+?)\.avg\.pct_of_peak_sustained_active$")


def diagnose(km: KernelMetrics, rules: Sequence[RuleFinding] = (), *, classes: bool = False) -> Diagnostic:
    """The bounded diagnostic of one launch: registers, occupancy and its limiter, eligible warps,
    issue activity, leading stalls, sectors per request, DRAM/L2 bytes, hit rates, pipes, rules.
    ``classes``: also the counts the mechanism classes read (a capture that asked for them, said by
    its capture.json; an older capture's profile stays what it was, so its audit still holds)."""
    v = km.values
    miss: list[str] = []
    m: dict[str, float] = {}

    def put(mid: str, name: str) -> None:
        x = _get(v, name, miss)
        if x is not None:
            m[mid] = x

    put("gpu_time_ns", "gpu__time_duration.sum")
    put("registers_per_thread", "launch__registers_per_thread")
    put("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct")
    put("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active")
    put("eligible_warps_per_cycle", "smsp__warps_eligible.avg.per_cycle_active")
    put("issue_active_pct", "smsp__issue_active.avg.pct_of_peak_sustained_active")
    put("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed")
    put("memory_throughput_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
    put("dram_throughput_pct", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")
    put("dram_read_bytes", "dram__bytes_read.sum")
    put("dram_write_bytes", "dram__bytes_write.sum")
    put("l2_bytes", "lts__t_bytes.sum")
    put("l1_hit_rate_pct", "l1tex__t_sector_hit_rate.pct")
    put("l2_hit_rate_pct", "lts__t_sector_hit_rate.pct")
    # Counts the mechanism classes read (pw.rules.mechanisms); absent ones are simply not there, never guessed.
    for mid, name in () if not classes else (("global_load_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
                      ("global_store_requests", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
                      ("shared_load_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"),
                      ("shared_store_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
                      ("threads_per_instruction", "smsp__thread_inst_executed_per_inst_executed.ratio"),
                      ("branch_uniformity_pct", "smsp__sass_average_branch_targets_threads_uniform.pct")):
        if name in v:
            m[mid] = v[name]
    if "dram_read_bytes" in m and "dram_write_bytes" in m:
        m["dram_bytes"] = m["dram_read_bytes"] + m["dram_write_bytes"]
    for op, mid in (("ld", "global_load_sectors_per_request"), ("st", "global_store_sectors_per_request")):
        sec = _get(v, f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum", miss)
        req = _get(v, f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum", miss)
        if sec is not None and req:
            m[mid] = sec / req
    atom = [v.get(f"l1tex__t_requests_pipe_lsu_mem_global_op_{o}.sum") for o in ("atom", "red")]
    if any(a is not None for a in atom):
        m["global_atomic_requests"] = sum(a or 0.0 for a in atom)
    loads = v.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    atomic_per_load = _ratio(m.get("global_atomic_requests"), loads)
    flop = _flops(v, [])
    for k, x in flop.items():
        m[f"{k}_flop"] = x
    limits = {k: v[f"launch__occupancy_limit_{k}"] for k in ("blocks", "registers", "shared_mem", "warps", "barriers")
              if f"launch__occupancy_limit_{k}" in v}
    limiter = min(limits, key=lambda k: (limits[k], k)) if limits else None
    if limiter is None:
        miss.append("launch__occupancy_limit_*")
    stalls = sorted(((mm.group(1), x) for n, x in v.items() if (mm := _STALL.match(n))
                     and mm.group(1) not in ("selected",)), key=lambda t: (-t[1], t[0]))[:4]
    pipes = sorted(((mm.group(1), x) for n, x in v.items() if (mm := _PIPE.match(n))),
                   key=lambda t: (-t[1], t[0]))[:4]
    groups: dict[str, dict[str, float | str]] = {
        "memory": {k: m[k] for k in ("global_load_sectors_per_request", "global_store_sectors_per_request",
                                     "global_atomic_requests", "dram_read_bytes", "dram_write_bytes",
                                     "l2_bytes", "l1_hit_rate_pct", "l2_hit_rate_pct", "memory_throughput_pct",
                                     "dram_throughput_pct") if k in m},
        "occupancy": {**{k: m[k] for k in ("registers_per_thread", "theoretical_occupancy_pct",
                                           "achieved_occupancy_pct") if k in m},
                      **({"limiter": limiter} if limiter else {})},
        "stalls": {**{k: m[k] for k in ("eligible_warps_per_cycle", "issue_active_pct") if k in m},
                   **{f"stall_{r}": x for r, x in stalls}},
        "compute": {**{k: m[k] for k in ("sm_throughput_pct", "fp32_flop", "fp64_flop", "fp16_flop") if k in m},
                    **{f"pipe_{p}_pct": x for p, x in pipes}},
    }
    op_name = re.split(r"\(", km.kernel, maxsplit=1)[0].strip() or km.kernel
    return Diagnostic(kernel=km.kernel, operation=f"{op_name}@[{GPU_MODULE}]", duration_ns=m.get("gpu_time_ns"),
                      metrics=m, occupancy_limiter=limiter, top_stalls=stalls, pipes=pipes,
                      rules=sorted(rules, key=lambda r: (-(r.speedup_pct or 0.0), r.rule)),
                      limiter=limiter_line(m, stalls, atomic_per_load), missing=sorted(set(miss)), groups=groups)


def limiter_line(m: Mapping[str, float], stalls: Sequence[tuple[str, float]],
                 atomic_per_load: float | None = None) -> str:
    """One line naming what bounds the kernel, from the numbers (pure; thresholds in the text).

    Atomics are named only when there is at least one global atomic request per four global load
    requests (a per-element atomic, not a per-block flush) and the leading stall waits on memory."""
    st = m.get("global_store_sectors_per_request")
    ld = m.get("global_load_sectors_per_request")
    mem, sm = m.get("memory_throughput_pct"), m.get("sm_throughput_pct")
    if st is not None and st > 8:
        return f"uncoalesced global stores: {st:.1f} sectors/request (4 is ideal for 4-byte words)"
    if ld is not None and ld > 8:
        return f"uncoalesced global loads: {ld:.1f} sectors/request (4 is ideal for 4-byte words)"
    if (atomic_per_load or 0.0) >= 0.25 and stalls and stalls[0][0] in ("lg_throttle", "long_scoreboard",
                                                                               "membar", "drain"):
        return (f"global atomics: {m['global_atomic_requests']:.3g} atomic requests, leading stall "
                f"{stalls[0][0]} ({stalls[0][1]:.1f} warps per issue)")
    if mem is not None and sm is not None:
        if mem >= 60 and mem > sm:
            return f"memory-throughput bound: {mem:.0f}% of memory speed-of-light vs {sm:.0f}% SM"
        if sm >= 60:
            return f"compute-throughput bound: {sm:.0f}% of SM speed-of-light vs {mem:.0f}% memory"
        lead = f", leading stall {stalls[0][0]}" if stalls else ""
        return f"latency bound: {mem:.0f}% memory and {sm:.0f}% SM speed-of-light{lead}"
    return "not enough counters to name a limiter"


def _flops(v: Mapping[str, float], missing: list[str]) -> dict[str, float]:
    out = {}
    for kind, (a, mul, fma) in {"fp32": ("fadd", "fmul", "ffma"), "fp64": ("dadd", "dmul", "dfma"),
                                "fp16": ("hadd", "hmul", "hfma")}.items():
        names = [f"sm__sass_thread_inst_executed_op_{o}_pred_on.sum" for o in (a, mul, fma)]
        if all(n in v for n in names):
            out[kind] = v[names[0]] + v[names[1]] + 2.0 * v[names[2]]
        else:
            missing += [n for n in names if n not in v]
    return out


def roofline(km: KernelMetrics, share: float | None = None) -> Roofline:
    """Achieved FLOP/s and DRAM bytes against the device's peaks; the bound and the ceilings.

    Peaks come from the counters' own ``peak_sustained`` (per cycle) times the measured clocks of the
    same capture: FP32 = 2 x ffma peak x SM Hz, FP64 likewise with dfma, DRAM = dram bytes peak per
    cycle x DRAM Hz. Tensor-core FLOP are not counted by these metrics and are named missing when the
    tensor pipes were active. ``kernel_ceiling`` = duration / max(bytes / peak BW, FLOP / peak FLOP/s);
    ``program_ceiling`` = 1 / ((1 - share) + share / kernel_ceiling) with the timeline's share."""
    v = km.values
    miss: list[str] = []
    flop = _flops(v, miss)
    rd = _get(v, "dram__bytes_read.sum", miss)
    wr = _get(v, "dram__bytes_write.sum", miss)
    dram = rd + wr if rd is not None and wr is not None else None
    dur = _get(v, "gpu__time_duration.sum", miss)
    sm_hz = v.get("sm__cycles_elapsed.avg.per_second")
    dram_hz = v.get("dram__cycles_elapsed.avg.per_second")
    if sm_hz is None:
        miss.append("sm__cycles_elapsed.avg.per_second")
    if dram_hz is None:
        miss.append("dram__cycles_elapsed.avg.per_second")
    ffma_pk = _get(v, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", miss)
    dfma_pk = _get(v, "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained", miss)
    dram_pk = _get(v, "dram__bytes.sum.peak_sustained", miss)
    peak32 = 2.0 * ffma_pk * sm_hz if ffma_pk is not None and sm_hz else None
    peak64 = 2.0 * dfma_pk * sm_hz if dfma_pk is not None and sm_hz else None
    peak_bw = dram_pk * dram_hz if dram_pk is not None and dram_hz else None
    tensor_active = max((x for n, x in v.items() if n.startswith("sm__pipe_tensor") and
                         n.endswith("avg.pct_of_peak_sustained_active")), default=0.0)
    if tensor_active > 0:
        miss.append("tensor-core FLOP (not counted by sass_thread_inst_executed; tensor pipes were active)")
    total_flop = sum(flop.values()) if flop else None
    dur_s = dur / 1e9 if dur else None
    achieved = _ratio(total_flop, dur_s)
    bw = _ratio(dram, dur_s)
    ai = _ratio(total_flop, dram)
    # The roof the kernel sits under: FP64 work is bounded by the FP64 peak, the rest by FP32.
    peak = peak64 if flop.get("fp64", 0.0) > flop.get("fp32", 0.0) + flop.get("fp16", 0.0) else peak32
    ridge = _ratio(peak, peak_bw)
    bound = None
    ceiling = None
    if ai is not None and ridge is not None:
        bound = "memory" if ai < ridge else "compute"
    if dur_s and peak_bw and peak and dram is not None and total_flop is not None:
        floor = max(dram / peak_bw, total_flop / peak)
        ceiling = dur_s / floor if floor > 0 else None
    prog = None
    if share is None:
        miss.append("timeline share of the kernel (no timeline capture)")
    elif ceiling:
        prog = 1.0 / ((1.0 - share) + share / ceiling)
    return Roofline(kernel=km.kernel, flop=flop, dram_bytes=dram, duration_ns=dur, achieved_flops=achieved,
                    achieved_dram_bw=bw, arithmetic_intensity=ai, peak_fp32_flops=peak32, peak_fp64_flops=peak64,
                    peak_dram_bw=peak_bw, ridge_intensity=ridge, bound=bound, kernel_ceiling=ceiling, share=share,
                    program_ceiling=prog, missing=sorted(set(miss)),
                    peak_source="counter peak_sustained x measured clocks of this capture")


def to_profile(diags: Sequence[Diagnostic], *, tool_version: str, target: str) -> Profile:
    """One kernel operation per profiled launch name (metrics of its last profiled launch)."""
    by_op: dict[str, Diagnostic] = {}
    for d in diags:
        by_op[d.operation] = d
    ops = [Operation(id=op, name=op.rsplit("@", 1)[0], kind="kernel", module=GPU_MODULE,
                     self_metrics=dict(d.metrics), inclusive_metrics=dict(d.metrics))
           for op, d in sorted(by_op.items())]
    metric_ids = ["gpu_time_ns"] + sorted({k for d in by_op.values() for k in d.metrics} - {"gpu_time_ns"})
    totals = {"gpu_time_ns": sum(d.metrics.get("gpu_time_ns", 0.0) for d in by_op.values())}
    return Profile(tool="ncu", tool_version=tool_version, target=target, granularity=["kernel"],
                   metrics=metric_ids, totals=totals, operations=ops)


def diagnose_artifacts(artifacts: Mapping[str, bytes]) -> list[Diagnostic]:
    raw = parse_raw_csv(require_artifact(artifacts, RAW_ROLE, "ncu").decode(errors="replace"))
    rules = parse_details_csv(artifacts[DETAILS_ROLE].decode(errors="replace")) if DETAILS_ROLE in artifacts else {}
    classes = "capture.json" in artifacts and bool(decode_meta(artifacts).options.get(CLASSES_OPTION))
    return [diagnose(k, rules.get(k.id, []), classes=classes) for k in raw]


# --- the adapter -------------------------------------------------------------------------------------

_UNKNOWN_METRIC = re.compile(rb"(failed to find metric|metric[^\n]*not found|unknown metric|invalid metric)", re.I)


def unknown_metric(output: bytes) -> bool:
    """Whether ncu's output says a requested metric does not exist here (pure)."""
    return bool(_UNKNOWN_METRIC.search(output))


def find_ncu(tool_path: str | None = None) -> str | None:
    if tool_path:
        return shutil.which(tool_path)
    return shutil.which("ncu") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/ncu")) +
                                            sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))), None)


class NcuAdapter(Adapter):
    spec = SPEC

    def __init__(self, tool_path: str | None = None, *, kernel: str | None = None, skip: int = 0, count: int = 1,
                 question: str | Sequence[str] = "why-slow") -> None:
        super().__init__(tool_path)
        self.kernel = kernel  # the timeline's name of the hotspot kernel; required to capture
        self.skip = skip
        self.count = count
        self.question = question

    def resolve_tool(self) -> str | None:
        return find_ncu(self.tool_path)

    def focus(self, operation: str, launches: int = 0) -> None:
        """Profile ``operation`` (the timeline's kernel name); skip up to two warm-up launches."""
        self.kernel = operation
        self.skip = min(2, max(launches - 1, 0))
        self.count = 1

    def probe(self) -> Usability:
        exe = self.resolve_tool()
        if exe is None:
            return Usability(usable=False, reason="ncu not found on PATH, /usr/local/cuda*/bin or "
                                                  "/opt/nvidia/nsight-compute/*")
        try:
            ver = run_tool([exe, "--version"], timeout_s=30)
        except CaptureError as exc:
            return Usability(usable=False, reason=f"ncu --version failed: {exc}")
        version = last_line(ver.stdout).removeprefix("Version ").strip()
        ok, how = gpu_visible()
        if not ok:
            return Usability(usable=False, version=version, reason=how)
        return Usability(usable=True, version=version, mode="clock-control-none", reason=f"ncu {version}; {how}",
                         notes=["counter access is checked by the first capture (ERR_NVGPUCTRPERM is reported)"])

    def command(self, exe: str, req: CaptureRequest, report_base: str, *, classes: bool = True) -> list[str]:
        if not self.kernel:
            raise CaptureError("ncu needs the kernel to profile: a timeline must name the hotspot kernel first")
        secs = [a for s in sections_for(self.question) for a in ("--section", s)]
        metrics = EXTRA_METRICS + [m for m in CLASS_METRICS if classes and m not in EXTRA_METRICS]
        return [exe, "--clock-control", "none", "--target-processes", "all", "-k", kernel_regex(self.kernel),
                "-s", str(self.skip), "-c", str(self.count), *secs, "--metrics", ",".join(metrics),
                "-f", "-o", report_base, "--", *req.argv]

    def capture(self, req: CaptureRequest) -> Capture:
        exe = self.require_tool()
        os.makedirs(req.out_dir, exist_ok=True)
        version = last_line(run_tool([exe, "--version"], timeout_s=30).stdout).removeprefix("Version ").strip()
        base = os.path.join(req.out_dir, "ncu")
        cmd = self.command(exe, req, base)
        stdout = os.path.join(req.out_dir, "stdout.txt")
        r = run_tool(cmd, cwd=req.cwd, env=req.env, timeout_s=req.timeout_s, stdout_path=stdout)
        log = open(stdout, "rb").read()
        if b"ERR_NVGPUCTRPERM" in log or b"ERR_NVGPUCTRPERM" in r.stderr:
            raise CaptureError("ncu: no permission to read GPU performance counters (ERR_NVGPUCTRPERM)")
        report = base + ".ncu-rep"
        dropped: list[str] = []
        if (r.returncode != 0 or not os.path.isfile(report)) and unknown_metric(log + r.stderr):
            # A counter the classes ask for that this ncu or GPU does not have: the capture again
            # without the class counters, which are then missing from it (named in capture.json).
            dropped = list(CLASS_METRICS)
            cmd = self.command(exe, req, base, classes=False)
            r = run_tool(cmd, cwd=req.cwd, env=req.env, timeout_s=req.timeout_s, stdout_path=stdout)
            log = open(stdout, "rb").read()
        if r.returncode != 0 or not os.path.isfile(report):
            raise CaptureError(f"ncu exited {r.returncode} without a report: {last_line(r.stderr or log)}")
        raw = os.path.join(req.out_dir, RAW_ROLE)
        details = os.path.join(req.out_dir, DETAILS_ROLE)
        cmds = [cmd]
        for page, path, extra in (("raw", raw, []), ("details", details, ["--print-units", "base"])):
            imp = [exe, "--import", report, "--csv", "--page", page, *extra]
            out = run_tool(imp, timeout_s=120, stdout_path=path)
            if out.returncode != 0:
                raise CaptureError(f"ncu --import --page {page} exited {out.returncode}: {last_line(out.stderr)}")
            cmds.append(imp)
        meta = self.write_meta(req.out_dir, tool_version=version, cwd=req.cwd, argv=list(req.argv),
                               options={"kernel": self.kernel or "", "skip": self.skip, "count": self.count,
                                        "sections": ",".join(sections_for(self.question)),
                                        CLASSES_OPTION: True,
                                        **({"dropped_metrics": ",".join(dropped)} if dropped else {})})
        return Capture(adapter=self.spec.name, label=req.label, wall_s=r.wall_s, tool_version=version, commands=cmds,
                       artifacts={REPORT_ROLE: report, RAW_ROLE: raw, DETAILS_ROLE: details, "capture.json": meta,
                                  "stdout.txt": stdout})

    def normalize(self, artifacts: Mapping[str, bytes], source_root: str, target: str) -> Profile:
        meta = decode_meta(artifacts)
        return to_profile(diagnose_artifacts(artifacts), tool_version=meta.tool_version, target=target)

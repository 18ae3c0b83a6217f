"""Metric ids and units: the one place they are defined.

Every number in a normalized profile is keyed by one of these ids. Adapters say which ids they
measure (``AdapterSpec.measures``) and routing reasons about the same ids, so a metric named here
means the same thing whichever tool produced it. Self and inclusive values are kept in separate
fields of the profile (``Operation.self_metrics`` / ``inclusive_metrics``); the id never encodes that.

``simulated`` marks numbers that come from a model of the machine (valgrind's cache simulator), not
from this machine's hardware: an attribution claim must say so.
"""

from __future__ import annotations

from typing import Literal

import msgspec

MetricKind = Literal["time", "count", "bytes", "ratio"]


class MetricSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    unit: str
    description: str
    kind: MetricKind
    simulated: bool = False


def _m(id: str, unit: str, kind: MetricKind, description: str, simulated: bool = False) -> MetricSpec:
    return MetricSpec(id=id, unit=unit, description=description, kind=kind, simulated=simulated)


_ALL = (
    # --- CPU, sampled -------------------------------------------------------------------------
    _m("cpu_time_s", "s", "time",
       "CPU time attributed by sampling. perf: sum of cpu-clock sample periods (ns) / 1e9. "
       "py-spy: samples / sampling rate (non-idle Python stacks only)."),
    _m("samples", "1", "count", "Number of stack samples attributed."),
    _m("wall_time_s", "s", "time", "Elapsed wall-clock time of the whole process."),
    _m("cycles", "1", "count", "CPU cycles from a hardware counter (perf 'cycles' event)."),
    # --- CPU, exact (valgrind/callgrind) ------------------------------------------------------
    _m("instructions", "1", "count",
       "Instructions executed (callgrind 'Ir'); exact, counted under valgrind's virtual CPU."),
    _m("calls", "1", "count", "Number of calls along a call edge (callgrind 'calls=')."),
    _m("d1_read_misses", "1", "count", "L1 data-cache read misses (callgrind 'D1mr').", simulated=True),
    _m("d1_write_misses", "1", "count", "L1 data-cache write misses (callgrind 'D1mw').", simulated=True),
    _m("i1_misses", "1", "count", "L1 instruction-cache misses (callgrind 'I1mr').", simulated=True),
    _m("ll_misses", "1", "count",
       "Last-level cache misses, instruction + data read + data write (callgrind ILmr+DLmr+DLmw).",
       simulated=True),
    # --- GPU (room for the ncu / CUPTI / nsys adapters) ---------------------------------------
    _m("gpu_time_ns", "ns", "time", "GPU kernel or activity duration."),
    _m("kernel_launches", "1", "count", "Number of GPU kernel launches."),
    _m("dram_bytes", "B", "bytes", "Bytes moved to and from device DRAM."),
    _m("sm_throughput_pct", "%", "ratio", "Streaming-multiprocessor throughput, percent of peak."),
    _m("achieved_occupancy_pct", "%", "ratio", "Achieved warp occupancy, percent of peak."),
    # --- GPU timeline (CUPTI activity records: injection library, torch profiler, nsys SQLite) --
    _m("transfer_bytes", "B", "bytes", "Bytes moved by memcpy/memset activities (CUPTI 'bytes')."),
    _m("transfers", "1", "count", "Number of memcpy/memset activities."),
    _m("gpu_busy_ns", "ns", "time",
       "Length of the union of all kernel, memcpy and memset intervals (device busy, any engine)."),
    _m("gpu_idle_ns", "ns", "time",
       "Gaps inside the device's first-to-last activity span where no kernel/copy/memset ran."),
    _m("gpu_span_ns", "ns", "time", "First activity start to last activity end on the device."),
    _m("kernel_time_ns", "ns", "time", "Sum of kernel durations (concurrent kernels counted each)."),
    _m("htod_time_ns", "ns", "time", "Summed duration of host-to-device copies."),
    _m("dtoh_time_ns", "ns", "time", "Summed duration of device-to-host copies."),
    _m("htod_bytes", "B", "bytes", "Bytes copied host to device."),
    _m("dtoh_bytes", "B", "bytes", "Bytes copied device to host."),
    _m("launch_api_ns", "ns", "time",
       "Host time inside kernel-launch runtime calls (cudaLaunchKernel and variants)."),
    _m("launch_api_calls", "1", "count", "Number of kernel-launch runtime calls."),
    _m("sync_stall_ns", "ns", "time",
       "Host time blocked in synchronization (CUPTI synchronization records, else the runtime's "
       "*Synchronize calls)."),
    _m("copy_compute_overlap_ns", "ns", "time",
       "Time during which a memcpy and a kernel ran at once (intersection of their unions)."),
    _m("idle_gaps", "1", "count", "Number of device idle gaps of at least 1 microsecond."),
    _m("max_idle_gap_ns", "ns", "time", "Longest device idle gap."),
    _m("host_span_ns", "ns", "time", "First to last recorded CUDA call or device activity: the host's span around the device work."),
    # --- GPU diagnosis (Nsight Compute, one filtered kernel launch) ---------------------------
    _m("registers_per_thread", "1", "count", "Registers per thread (launch__registers_per_thread)."),
    _m("theoretical_occupancy_pct", "%", "ratio",
       "Theoretical occupancy, percent of the SM's warp slots (sm__maximum_warps_per_active_cycle_pct)."),
    _m("eligible_warps_per_cycle", "1", "ratio",
       "Warps eligible to issue per scheduler per active cycle (smsp__warps_eligible.avg.per_cycle_active)."),
    _m("issue_active_pct", "%", "ratio",
       "Cycles a scheduler issued an instruction (smsp__issue_active.avg.pct_of_peak_sustained_active)."),
    _m("global_load_sectors_per_request", "1", "ratio",
       "32-byte sectors per global load request (l1tex sectors / requests, op_ld); 4 is fully coalesced fp32."),
    _m("global_store_sectors_per_request", "1", "ratio",
       "32-byte sectors per global store request (l1tex sectors / requests, op_st); 4 is fully coalesced fp32."),
    _m("global_atomic_requests", "1", "count",
       "Global atomic + reduction requests at L1 (l1tex__t_requests_pipe_lsu_mem_global_op_atom + _red)."),
    _m("dram_read_bytes", "B", "bytes", "Bytes read from device DRAM (dram__bytes_read.sum)."),
    _m("dram_write_bytes", "B", "bytes", "Bytes written to device DRAM (dram__bytes_write.sum)."),
    _m("l2_bytes", "B", "bytes", "Bytes through the L2 (lts__t_bytes.sum)."),
    _m("global_load_requests", "1", "count",
       "Global load requests at L1 (l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum); falls when data is reused."),
    _m("global_store_requests", "1", "count",
       "Global store requests at L1 (l1tex__t_requests_pipe_lsu_mem_global_op_st.sum)."),
    _m("shared_load_wavefronts", "1", "count",
       "Shared-memory load wavefronts (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum)."),
    _m("shared_store_wavefronts", "1", "count",
       "Shared-memory store wavefronts (l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum)."),
    _m("threads_per_instruction", "1", "ratio",
       "Active threads per executed warp instruction (smsp__thread_inst_executed_per_inst_executed.ratio); "
       "32 is no divergence."),
    _m("branch_uniformity_pct", "%", "ratio",
       "Branch targets taken uniformly by the warp (smsp__sass_average_branch_targets_threads_uniform.pct)."),
    _m("l1_hit_rate_pct", "%", "ratio", "L1/TEX sector hit rate (l1tex__t_sector_hit_rate.pct)."),
    _m("l2_hit_rate_pct", "%", "ratio", "L2 sector hit rate (lts__t_sector_hit_rate.pct)."),
    _m("memory_throughput_pct", "%", "ratio",
       "Speed-of-light memory throughput (gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed)."),
    _m("dram_throughput_pct", "%", "ratio",
       "DRAM throughput, percent of peak (dram__throughput.avg.pct_of_peak_sustained_elapsed)."),
    _m("fp32_flop", "1", "count", "FP32 floating-point operations (fadd + fmul + 2 x ffma, thread level)."),
    _m("fp64_flop", "1", "count", "FP64 floating-point operations (dadd + dmul + 2 x dfma, thread level)."),
    _m("fp16_flop", "1", "count", "FP16 floating-point operations (hadd + hmul + 2 x hfma, thread level)."),
    _m("achieved_flops", "FLOP/s", "ratio", "Achieved FLOP/s of the kernel (counted FLOP / kernel duration)."),
    _m("arithmetic_intensity", "FLOP/B", "ratio", "Counted FLOP per DRAM byte."),
    # --- imported from HPC tools that do not run here (partial adapters, `pw import`) -----------
    # None of these is a time: the *_count ids are numbers of memory accesses, the *_bytes ids are
    # device memory sizes, the advice_* ids are a model's estimates. A gate that needs time (the
    # mechanism gate) cannot be passed on them.
    _m("gpu_pc_samples", "1", "count",
       "HPCToolkit GINS: GPU instruction samples from PC sampling (hpcrun -e gpu=nvidia,pc), per line."),
    _m("redundant_accesses_count", "1", "count",
       "GVProf: memory accesses that read or wrote a value already seen (spatial + temporal, reads + "
       "writes); a proxy for wasted work with no time dimension."),
    _m("spatial_redundant_reads_count", "1", "count",
       "GVProf spatial_read: reads at one PC that loaded the most frequent value of that PC (redundant_access_count)."),
    _m("spatial_redundant_writes_count", "1", "count",
       "GVProf spatial_write: writes at one PC that stored the most frequent value of that PC."),
    _m("temporal_redundant_reads_count", "1", "count",
       "GVProf temporal_read: reads by a thread of the value it last read at the same address."),
    _m("temporal_redundant_writes_count", "1", "count",
       "GVProf temporal_write: writes by a thread of the value it last wrote at the same address."),
    _m("monitored_accesses_count", "1", "count",
       "GVProf: memory accesses the instrumentation observed (total_access_count), reads + writes."),
    _m("device_peak_bytes", "B", "bytes",
       "DrGPUM current_memory_peak: the largest sum of live device allocations during the run."),
    _m("device_min_peak_bytes", "B", "bytes",
       "DrGPUM optimal_memory_peak: the largest sum of objects one kernel touched, a lower bound on the peak."),
    _m("allocated_bytes", "B", "bytes", "DrGPUM: size of one device allocation (memory_size_list)."),
    _m("unaccessed_bytes", "B", "bytes",
       "DrGPUM: bytes of allocations that no kernel, memset or copy touched between allocation and free."),
    _m("advice_stall_ratio", "1", "ratio",
       "GPA: share of the kernel's sampled instruction stalls an optimizer's matched code accounts for (0-1).",
       simulated=True),
    _m("advice_estimated_speedup", "1", "ratio",
       "GPA: the speedup its PC-sampling performance model estimates for an optimizer; a model, not a "
       "measurement.", simulated=True),
)

KNOWN_METRICS: dict[str, MetricSpec] = {m.id: m for m in _ALL}


def metric(metric_id: str) -> MetricSpec:
    """The spec of ``metric_id``; raises KeyError naming the valid ids when unknown."""
    try:
        return KNOWN_METRICS[metric_id]
    except KeyError:
        raise KeyError(f"unknown metric {metric_id!r}; expected one of {sorted(KNOWN_METRICS)}") from None


def is_known(metric_id: str) -> bool:
    return metric_id in KNOWN_METRICS

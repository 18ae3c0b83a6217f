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

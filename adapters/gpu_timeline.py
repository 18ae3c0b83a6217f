"""The GPU timeline: CUPTI activity records in, a timeline summary and a ``Profile`` out (pure).

Every timeline backend (our injection library's JSON lines, the torch profiler's trace, Nsight
Systems' SQLite export) is first read into ``ledger.gpu_activity`` records by its own reader; this
module is the one place that turns records into numbers, so the three backends cannot disagree on
what "idle" or "overlap" means.

Definitions (all on CUPTI's nanosecond clock, within one capture):
- **busy**: length of the union of every kernel, memcpy and memset interval (any engine);
  **span**: first activity start to last activity end; **idle** = span - busy. An idle gap is a
  stretch of the span covered by no activity; gaps shorter than ``MIN_GAP_NS`` are not counted
  (back-to-back launches leave sub-microsecond seams that say nothing).
- **launch overhead**: host time inside kernel-launch runtime calls (``cudaLaunchKernel*``,
  ``cuLaunchKernel*``, ``cudaGraphLaunch*``) against the device time of the kernels.
- **sync stalls**: durations of CUPTI synchronization records; when a backend has none (torch,
  nsys without ``--cuda-event-trace``), the runtime's ``*Synchronize`` calls stand in, and the
  summary says which was used.
- **copy/compute overlap**: length of (union of memcpy intervals) ∩ (union of kernel intervals).

Operations of the profile: one per kernel name (kind "kernel"), one per copy direction
("memcpy HtoD", ...) and one for memsets; each with ``gpu_time_ns`` (the primary metric) and a
count. ``totals["gpu_time_ns"]`` is the sum over those operations, so shares add up to 1.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

import msgspec

from ledger.gpu_activity import (
    ApiActivity,
    GpuActivity,
    KernelActivity,
    MemcpyActivity,
    MemsetActivity,
    SyncActivity,
)
from ledger.profile import Operation, Profile

# What a timeline measures, whichever backend recorded it (cupti, nsys): the ids `to_profile` and
# `summarize` fill, declared once for both adapters' specs.
TIMELINE_METRICS: tuple[str, ...] = (
    "gpu_time_ns", "kernel_launches", "transfer_bytes", "transfers", "kernel_time_ns",
    "gpu_busy_ns", "gpu_idle_ns", "gpu_span_ns", "htod_time_ns", "dtoh_time_ns", "htod_bytes",
    "dtoh_bytes", "launch_api_ns", "launch_api_calls", "sync_stall_ns", "copy_compute_overlap_ns",
    "idle_gaps", "max_idle_gap_ns", "host_span_ns",
)

MIN_GAP_NS = 1_000
GPU_MODULE = "gpu"
_LAUNCH_API = re.compile(r"^cu(da)?(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|LaunchKernelEx)")
_SYNC_API = re.compile(r"^cu(da)?\w*Synchronize")


class KernelRow(msgspec.Struct, frozen=True, kw_only=True):
    operation: str
    name: str
    launches: int
    gpu_time_ns: int
    share: float  # of all device activity time (kernels + copies + memsets)
    mean_ns: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int


class Gap(msgspec.Struct, frozen=True, kw_only=True):
    start_ns: int  # offset from the first activity
    length_ns: int
    before: str  # the activity that ended the busy stretch before the gap
    after: str


class TimelineSummary(msgspec.Struct, frozen=True, kw_only=True):
    kernels: list[KernelRow]
    totals: dict[str, float]
    sync_source: str  # "sync-records" | "runtime-api" | "none"
    top_gaps: list[Gap] = []
    findings: list[str] = []


def kernel_display_name(k: KernelActivity) -> str:
    """The kernel's qualified name without its parameter list: 'transpose_kernel' for
    'transpose_kernel(float const*, float*, int, int)'. Templates keep their arguments, so two
    instantiations stay two operations; a leading return type (templates print one) is dropped."""
    text = (k.demangled or k.name).strip()
    if not k.demangled:
        return text
    depth = 0
    cut = len(text)
    for i in range(len(text) - 1, -1, -1):  # the parameter list is the last top-level "(...)"
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    head = text[:cut].strip() or text
    depth = 0
    for i, c in enumerate(head):  # "void ns::f<...>" -> "ns::f<...>": first top-level space
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == " " and depth == 0:
            return head[i + 1:].strip() or head
    return head


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if e < s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged]


def _length(union: Sequence[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union)


def _intersection_length(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> int:
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _label(rec: GpuActivity) -> str:
    if isinstance(rec, KernelActivity):
        return kernel_display_name(rec)
    if isinstance(rec, MemcpyActivity):
        return f"memcpy {rec.copy_kind}"
    return "memset"


def summarize(records: Iterable[GpuActivity], *, top_gaps: int = 5) -> TimelineSummary:
    """The timeline numbers of one capture (see the module docstring for each definition)."""
    kernels: list[KernelActivity] = []
    copies: list[MemcpyActivity] = []
    sets: list[MemsetActivity] = []
    syncs: list[SyncActivity] = []
    apis: list[ApiActivity] = []
    for r in records:
        {KernelActivity: kernels, MemcpyActivity: copies, MemsetActivity: sets,
         SyncActivity: syncs, ApiActivity: apis}[type(r)].append(r)
    device = [*kernels, *copies, *sets]
    activity_ns = sum(r.end_ns - r.start_ns for r in device)
    rows = _kernel_rows(kernels, activity_ns)
    all_union = _union((r.start_ns, r.end_ns) for r in device)
    k_union = _union((k.start_ns, k.end_ns) for k in kernels)
    c_union = _union((c.start_ns, c.end_ns) for c in copies)
    span = (all_union[-1][1] - all_union[0][0]) if all_union else 0
    busy = _length(all_union)
    gaps = _idle_gaps(all_union)
    launch = [a for a in apis if _LAUNCH_API.match(a.name)]
    sync_ns, sync_source = _sync_time(syncs, apis)
    kernel_ns = sum(k.end_ns - k.start_ns for k in kernels)
    # The host's CUDA span (first recorded call or activity to the last): the wall-clock stretch
    # the device work sits in. A kernel's share of it, not of device time, bounds what making the
    # kernel faster can save the program (device work can hide behind host work).
    marks = [(r.start_ns, r.end_ns) for r in (*apis, *syncs, *device)]
    host_span = (max(e for _, e in marks) - min(s for s, _ in marks)) if marks else 0
    totals: dict[str, float] = {
        "gpu_time_ns": float(activity_ns),
        "kernel_time_ns": float(kernel_ns),
        "kernel_launches": float(len(kernels)),
        "gpu_busy_ns": float(busy),
        "gpu_span_ns": float(span),
        "host_span_ns": float(host_span),
        "gpu_idle_ns": float(span - busy),
        "idle_gaps": float(len(gaps)),
        "max_idle_gap_ns": float(max((g[0] for g in gaps), default=0)),
        "htod_time_ns": float(sum(c.end_ns - c.start_ns for c in copies if c.copy_kind == "HtoD")),
        "dtoh_time_ns": float(sum(c.end_ns - c.start_ns for c in copies if c.copy_kind == "DtoH")),
        "htod_bytes": float(sum(c.bytes for c in copies if c.copy_kind == "HtoD")),
        "dtoh_bytes": float(sum(c.bytes for c in copies if c.copy_kind == "DtoH")),
        "transfer_bytes": float(sum(c.bytes for c in copies) + sum(s.bytes for s in sets)),
        "launch_api_ns": float(sum(a.end_ns - a.start_ns for a in launch)),
        "launch_api_calls": float(len(launch)),
        "sync_stall_ns": float(sync_ns),
        "copy_compute_overlap_ns": float(_intersection_length(k_union, c_union)),
    }
    gap_rows = _gap_rows(device, all_union, gaps, top_gaps)
    summary = TimelineSummary(kernels=rows, totals=totals, sync_source=sync_source, top_gaps=gap_rows)
    return msgspec.structs.replace(summary, findings=findings(summary))


def _kernel_rows(kernels: list[KernelActivity], activity_ns: int) -> list[KernelRow]:
    """One row per kernel name, the most device time first; its launch shape from its first launch."""
    by_name: dict[str, list[KernelActivity]] = defaultdict(list)
    for k in kernels:
        by_name[kernel_display_name(k)].append(k)
    rows = []
    for name, ks in by_name.items():
        t = sum(k.end_ns - k.start_ns for k in ks)
        first = ks[0]
        rows.append(KernelRow(operation=f"{name}@[{GPU_MODULE}]", name=name, launches=len(ks), gpu_time_ns=t,
                              share=round(t / activity_ns, 6) if activity_ns else 0.0,
                              mean_ns=round(t / len(ks), 1), grid=first.grid, block=first.block,
                              registers_per_thread=first.registers_per_thread))
    rows.sort(key=lambda r: (-r.gpu_time_ns, r.name))
    return rows


def _idle_gaps(busy: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(length, start, index of the stretch after) of each idle gap of at least MIN_GAP_NS between
    the device's busy stretches."""
    gaps: list[tuple[int, int, int]] = []
    for i in range(1, len(busy)):
        g = busy[i][0] - busy[i - 1][1]
        if g >= MIN_GAP_NS:
            gaps.append((g, busy[i - 1][1], i))
    return gaps


def _sync_time(syncs: list[SyncActivity], apis: list[ApiActivity]) -> tuple[int, str]:
    """The time the host stalled in synchronization, and where it was read: the sync records, else
    the runtime API's sync calls."""
    sync_api = [a for a in apis if _SYNC_API.match(a.name)]
    if syncs:
        return sum(s.end_ns - s.start_ns for s in syncs), "sync-records"
    if sync_api:
        return sum(a.end_ns - a.start_ns for a in sync_api), "runtime-api"
    return 0, "none"


def _gap_rows(device: list, busy: list[tuple[int, int]], gaps: list[tuple[int, int, int]], top: int) -> list[Gap]:
    """The ``top`` longest gaps, from the first activity, with the activities on either side."""
    # Which activity bounds each busy stretch, to name the two sides of a gap.
    ends: dict[int, str] = {}
    starts: dict[int, str] = {}
    for r in sorted(device, key=lambda r: r.end_ns):
        ends[r.end_ns] = _label(r)
    for r in sorted(device, key=lambda r: -r.start_ns):
        starts[r.start_ns] = _label(r)
    origin = busy[0][0] if busy else 0
    return [Gap(start_ns=s - origin, length_ns=g, before=ends.get(busy[i - 1][1], "?"),
                after=starts.get(busy[i][0], "?"))
            for g, s, i in sorted(gaps, key=lambda x: (-x[0], x[1]))[:top]]


def findings(s: TimelineSummary) -> list[str]:
    """Plain statements the numbers support, strongest first (pure; thresholds in the text)."""
    t = s.totals
    out: list[str] = []
    span = t.get("gpu_span_ns", 0.0)
    if s.kernels:
        top = s.kernels[0]
        out.append(f"kernel {top.name} takes {top.share:.1%} of device activity time over "
                   f"{top.launches} launches (mean {top.mean_ns / 1e3:.1f} us)")
    calls = t.get("launch_api_calls", 0.0)
    launches = t.get("kernel_launches", 0.0)
    if calls and launches:
        api_mean = t["launch_api_ns"] / calls
        k_mean = t["kernel_time_ns"] / launches
        if k_mean < api_mean and span and t["gpu_idle_ns"] / span > 0.5:
            out.append(f"launch-bound: a kernel runs {k_mean / 1e3:.1f} us on average but its launch call "
                       f"takes {api_mean / 1e3:.1f} us on the host; the device idles "
                       f"{t['gpu_idle_ns'] / span:.0%} of its active span")
    copy_ns = t.get("htod_time_ns", 0.0) + t.get("dtoh_time_ns", 0.0)
    if copy_ns > t.get("kernel_time_ns", 0.0) > 0:
        out.append(f"transfer-bound: host<->device copies take {copy_ns / 1e6:.2f} ms against "
                   f"{t['kernel_time_ns'] / 1e6:.2f} ms of kernels")
    if copy_ns and t.get("copy_compute_overlap_ns", 0.0) < 0.05 * copy_ns:
        out.append(f"copies do not overlap compute ({t.get('copy_compute_overlap_ns', 0.0) / 1e6:.2f} ms "
                   f"of {copy_ns / 1e6:.2f} ms overlapped)")
    if span and t.get("sync_stall_ns", 0.0) > 0.25 * span:
        out.append(f"host blocked in synchronization for {t['sync_stall_ns'] / 1e6:.2f} ms "
                   f"({s.sync_source})")
    return out


def to_profile(summary: TimelineSummary, records: Iterable[GpuActivity], *, tool: str, tool_version: str,
               target: str) -> Profile:
    """The timeline as a ``Profile``: kernels, copy directions and memsets as operations."""
    ops = [Operation(id=r.operation, name=r.name, kind="kernel", module=GPU_MODULE,
                     self_metrics={"gpu_time_ns": float(r.gpu_time_ns), "kernel_launches": float(r.launches)},
                     inclusive_metrics={"gpu_time_ns": float(r.gpu_time_ns),
                                        "kernel_launches": float(r.launches)})
           for r in summary.kernels]
    moves: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    kinds: dict[str, str] = {}
    for r in records:
        if isinstance(r, (MemcpyActivity, MemsetActivity)):
            label = _label(r)
            kinds[label] = "memcpy" if isinstance(r, MemcpyActivity) else "memset"
            m = moves[label]
            m[0] += r.end_ns - r.start_ns
            m[1] += r.bytes
            m[2] += 1
    for label, (ns, nbytes, count) in sorted(moves.items()):
        metrics = {"gpu_time_ns": ns, "transfer_bytes": nbytes, "transfers": count}
        ops.append(Operation(id=f"[{label}]@[{GPU_MODULE}]", name=label, kind=kinds[label],  # type: ignore[arg-type]
                             module=GPU_MODULE, self_metrics=metrics, inclusive_metrics=dict(metrics)))
    return Profile(tool=tool, tool_version=tool_version, target=target, granularity=["kernel", "timeline"],
                   metrics=["gpu_time_ns", "kernel_launches", "transfer_bytes", "transfers"],
                   totals=dict(summary.totals), operations=ops)


def decode_jsonl(data: bytes, source: str = "activity JSON lines") -> list[GpuActivity]:
    """Records from JSON lines (``ledger.gpu_activity`` shape); a bad line raises ValueError naming it."""
    from ledger.gpu_activity import decode_activity_line

    out: list[GpuActivity] = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(decode_activity_line(line))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise ValueError(f"{source}: line {n}: {exc}") from None
    return out

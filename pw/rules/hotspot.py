"""Choose the hotspot from a normalized profile: the costliest operation in the editable tree.

Pure. The share is the operation's inclusive cost over the program total in the profile's primary
metric; the Amdahl ceiling is the whole-program speedup if that cost fell to zero, 1 / (1 - share).

Operating-system time (samples whose leaf is a kernel symbol: page clearing, `write`) is never the
user's hotspot, however large; `time_split` reports it separately so the brief can state a large
kernel share as a finding (allocation, page faults, I/O behind the user's code).
"""

from __future__ import annotations

import statistics

import msgspec

from ledger import events as ev
from ledger.profile import CallEdge, LineCost, Operation, Profile


def amdahl_ceiling(share: float) -> float | None:
    return None if share >= 1.0 else 1.0 / (1.0 - share)


# Device-time profiles (a GPU timeline) measure the device only; the program's wall clock also holds
# host work that device time can hide behind. Their ceiling uses the kernel's share of the host's
# CUDA span instead, where the profile records it (`HotspotSelected.span_share`). The one place that
# knows which metrics are device time.
DEVICE_METRICS = frozenset({"gpu_time_ns"})
HOST_SPAN = "host_span_ns"


def wall_share(profile: Profile, cost: float) -> float | None:
    """The operation's share of the program's wall-clock span, for device-time profiles; None else."""
    span = profile.totals.get(HOST_SPAN, 0.0)
    if profile.primary_metric not in DEVICE_METRICS or span <= 0:
        return None
    return min(1.0, cost / span)


KERNEL_MODULES = frozenset({"kernel.kallsyms", "kernel", "vmlinux", "guest.kernel.kallsyms"})


def is_kernel(op: Operation) -> bool:
    return op.module in KERNEL_MODULES


def _kernel_cause(name: str) -> str:
    n = name.lower()
    if "page" in n or "fault" in n or "folio" in n or "mm_" in n:
        return "page faults / memory"
    if "write" in n or "read" in n or "syscall" in n or "vfs" in n or "tty" in n or "pipe" in n:
        return "system calls / I/O"
    return "other"


def time_split(profile: Profile, top: int = 3) -> dict:
    """User and kernel shares of the primary metric (by leaf frame), and the costliest kernel symbols
    with the cause each suggests."""
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0)
    if total <= 0:
        return {"user": 0.0, "kernel": 0.0, "top_kernel": []}
    kernel_ops = sorted((op for op in profile.operations if is_kernel(op)),
                        key=lambda o: (-o.self_metrics.get(metric, 0.0), o.id))
    kernel = sum(op.self_metrics.get(metric, 0.0) for op in kernel_ops)
    causes: dict[str, float] = {}
    for op in kernel_ops:
        cause = _kernel_cause(op.name)
        causes[cause] = causes.get(cause, 0.0) + op.self_metrics.get(metric, 0.0) / total
    return {
        "user": round(1.0 - kernel / total, 4),
        "kernel": round(kernel / total, 4),
        "top_kernel": [{"name": op.name, "share": round(op.self_metrics.get(metric, 0.0) / total, 4)}
                       for op in kernel_ops[:top]],
        "kernel_causes": {k: round(v, 4) for k, v in sorted(causes.items(), key=lambda kv: -kv[1])},
    }


def accounted_split(user_s: list[float], sys_s: list[float]) -> dict | None:
    """User and kernel shares from the kernel's own CPU accounting of the timed runs (medians of
    rusage user and system time), for a profile that cannot see the kernel: perf without
    privileges, as in the sandbox, samples user space only (`cpu-clock:u`). None without data."""
    if not user_s or len(user_s) != len(sys_s):
        return None
    u, s = statistics.median(user_s), statistics.median(sys_s)
    if u + s <= 0:
        return None
    return {"user": round(u / (u + s), 4), "kernel": round(s / (u + s), 4), "top_kernel": [], "kernel_causes": {},
            "source": "rusage of the timed runs (the profile samples user space only)"}


# What a device-time ceiling can be of: the region the program times (a region-of-interest metric),
# the program's wall time (a wall metric), or the host's CUDA span (neither known).
CEILING_OF = ("region", "wall", "span")
NS_PER_S = 1e9


def _device_kernels(profile: Profile, ops: list[Operation]) -> list[Operation]:
    """In a device-time profile, the kernels among ``ops`` when there are any: a memcpy or memset is
    called from host code (often outside the region a program times), so it is a finding beside the
    hotspot, never the hotspot itself; a timeline of copies alone keeps them."""
    if profile.primary_metric not in DEVICE_METRICS:
        return ops
    return [op for op in ops if op.kind == "kernel"] or ops


def select_hotspot(profile: Profile, editable_files: set[str], *, per_run_s: float | None = None,
                   of: str | None = None) -> ev.HotspotSelected:
    """The editable operation with the largest self cost (ties by id); falls back to any operation.

    For a device-time profile (one run's GPU timeline) the hotspot is a kernel, and with
    ``per_run_s`` (the timed metric of one run in seconds: the region's median for a region-of-interest
    metric, ``of="region"``, or the run's wall time, ``of="wall"``) its Amdahl ceiling is of that
    metric: its device time per run over ``per_run_s``. Without it the ceiling is of the host's CUDA
    span, as before. The chosen share is recorded (``ceiling_of``, ``ceiling_share``) so that readers
    say it and never re-derive it."""
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0)
    ops = [op for op in profile.operations if op.file in editable_files] or \
        [op for op in profile.operations if not is_kernel(op)] or list(profile.operations)
    ops = _device_kernels(profile, ops)
    if not ops or total <= 0:
        raise ValueError("the profile has no operations with cost; cannot choose a hotspot")
    hot: Operation = min(ops, key=lambda o: (-o.self_metrics.get(metric, 0.0), o.id))
    # Inclusive cost bounds what a rewrite of this function (and what it calls) can save.
    inclusive = hot.inclusive_metrics.get(metric, hot.self_metrics.get(metric, 0.0))
    share = min(1.0, inclusive / total)
    span = wall_share(profile, inclusive)  # recorded: readers (the brief) say it, never re-derive it
    ceiling_of = ceiling_share = None
    if metric in DEVICE_METRICS and per_run_s is not None and per_run_s > 0 and of in ("region", "wall"):
        ceiling_of, ceiling_share = of, min(1.0, inclusive / NS_PER_S / per_run_s)
    elif span is not None:
        ceiling_of, ceiling_share = "span", span
    ceiling = amdahl_ceiling(share if ceiling_share is None else ceiling_share)
    return ev.HotspotSelected(
        operation=hot.id,
        name=hot.name,
        file=hot.file,
        line_start=hot.line_start,
        line_end=hot.line_end,
        metric=metric,
        share=round(share, 6),
        amdahl_ceiling=None if ceiling is None else round(ceiling, 6),
        span_share=None if span is None else round(span, 6),
        ceiling_of=ceiling_of,
        ceiling_share=None if ceiling_share is None else round(ceiling_share, 6),
    )


def select_named(profile: Profile, name: str) -> ev.HotspotSelected:
    """The operation the user named (``metric.operation``: a function or kernel) as the hotspot,
    whatever its share; raises ValueError when no operation of that name took any cost."""
    metric = profile.primary_metric
    total = profile.totals.get(metric, 0.0)

    def base(op: Operation) -> str:
        return op.name.split("(", 1)[0].split("<", 1)[0].strip().rsplit(" ", 1)[-1]

    found = [op for op in profile.operations if name in (op.name, base(op))]
    if not found or total <= 0:
        raise ValueError(f"the operation {name!r} took no cost in the baseline's profile")
    hot = min(found, key=lambda o: (-o.inclusive_metrics.get(metric, o.self_metrics.get(metric, 0.0)), o.id))
    inclusive = hot.inclusive_metrics.get(metric, hot.self_metrics.get(metric, 0.0))
    share = min(1.0, inclusive / total)
    ceiling = amdahl_ceiling(share)
    return ev.HotspotSelected(operation=hot.id, name=hot.name, file=hot.file, line_start=hot.line_start,
                              line_end=hot.line_end, metric=metric, share=round(share, 6),
                              amdahl_ceiling=None if ceiling is None else round(ceiling, 6))
def device_findings(profile: Profile, hot: ev.HotspotSelected, *, per_run_s: float | None, of: str | None,
                    wall_s: float | None, min_share: float = 0.10) -> list[str]:
    """What a GPU timeline shows beside its hotspot kernel, one statement each (pure): the copies and
    memsets that take a large share of device time (host code issues them; with a region metric,
    the ones that cannot fit in the region lie outside it), and the share of the run in which the
    device does nothing (host work: set-up, a CPU reference)."""
    if profile.primary_metric not in DEVICE_METRICS:
        return []
    total = profile.totals.get("gpu_time_ns", 0.0)
    out: list[str] = []
    for op in sorted(profile.operations, key=lambda o: (-o.self_metrics.get("gpu_time_ns", 0.0), o.id)):
        ns = op.self_metrics.get("gpu_time_ns", 0.0)
        if op.kind not in ("memcpy", "memset") or total <= 0 or ns / total < min_share:
            continue
        where = "issued by host code, not a kernel"
        if of == "region" and per_run_s:
            # Longer than the whole region: it cannot be inside it.
            where = "outside the timed region" if ns / NS_PER_S > per_run_s else "in or outside the timed region"
        out.append(f"{op.name}: {ns / total:.0%} of device time ({ns / 1e6:.3g} ms a run), {where}")
    busy = profile.totals.get("gpu_busy_ns", 0.0)
    if wall_s and busy > 0 and busy / NS_PER_S / wall_s < 0.5:
        out.append(f"the device is busy {busy / NS_PER_S / wall_s:.1%} of the {wall_s:.3g} s run; host work "
                   "(set-up, copies, a CPU reference) is the rest")
    return out


def region_check(profile: Profile, region_s: float | None) -> dict | None:
    """For a region-of-interest metric, the region's time against the device time of every kernel
    in one run (pure). A region far longer than all of its program's kernels times something else
    too (driver start-up, a JIT, allocation, host work); said as a warning, never judged."""
    if profile.primary_metric not in DEVICE_METRICS or not region_s:
        return None
    kernels_s = sum(o.self_metrics.get("gpu_time_ns", 0.0) for o in profile.operations if o.kind == "kernel") / NS_PER_S
    out = {"region_s": round(region_s, 9), "kernels_s": round(kernels_s, 9)}
    if kernels_s > 0 and region_s > 3 * kernels_s and region_s - kernels_s > 1e-3:
        out["warning"] = (f"the timed region ({region_s * 1e3:.3g} ms) lasts {region_s / kernels_s:.0f}x the device "
                          f"time of all the run's kernels ({kernels_s * 1e3:.3g} ms): it times something else too "
                          "(driver start-up, a PTX JIT, allocation or host work)")
    return out


def hot_lines(profile: Profile, operation: str, *, top: int = 8) -> list[int]:
    """The operation's costliest source lines (for the locator's focus window)."""
    metric = profile.primary_metric
    lines = sorted(profile.lines_of(operation), key=lambda lc: (-lc.self_metrics.get(metric, 0.0), lc.line))
    return sorted(lc.line for lc in lines[:top])


def reattribute_inlined(profile: Profile, definitions: dict[str, list[tuple[str, int, int]]]) -> Profile:
    """Charge line costs to the innermost source function that defines those lines.

    callgrind (and perf without inline frames) charges an inlined function's instructions to the
    function it was inlined into: `kernel_gemm`'s loop shows up as `main`'s lines 42-43. With the
    definitions the source parser found (file -> (name, first line, last line)), a line cost outside
    its operation's own definition but inside another function's moves to that function (created
    as `name@file` when the profile has no such operation), with the self cost it carries; the outer
    function keeps it in its inclusive cost, and a call edge outer -> inner says where it came from.
    """
    metric_ops = {op.id: op for op in profile.operations}

    def innermost(file: str, line: int) -> tuple[str, int, int] | None:
        around = [d for d in definitions.get(file, []) if d[1] <= line <= d[2]]
        return min(around, key=lambda d: d[2] - d[1]) if around else None

    moved: dict[tuple[str, str], dict[str, float]] = {}  # (outer id, inner id) -> metrics moved
    new_lines: list[LineCost] = []
    inner_info: dict[str, tuple[str, str, int, int, str]] = {}
    for lc in profile.lines:
        op = metric_ops.get(lc.operation)
        found = innermost(lc.file, lc.line)
        if op is None or found is None or found[0] == op.name:
            new_lines.append(lc)
            continue
        inner_id = f"{found[0]}@{lc.file}"
        inner_info.setdefault(inner_id, (found[0], lc.file, found[1], found[2], op.module))
        new_lines.append(LineCost(file=lc.file, line=lc.line, operation=inner_id, self_metrics=dict(lc.self_metrics)))
        acc = moved.setdefault((op.id, inner_id), {})
        for m, v in lc.self_metrics.items():
            acc[m] = acc.get(m, 0.0) + v
    if not moved:
        return profile
    self_out: dict[str, dict[str, float]] = {op.id: dict(op.self_metrics) for op in profile.operations}
    incl: dict[str, dict[str, float]] = {op.id: dict(op.inclusive_metrics) for op in profile.operations}
    for (outer, inner), metrics in moved.items():
        self_out.setdefault(inner, {})
        incl.setdefault(inner, {})
        for m, v in metrics.items():
            self_out[outer][m] = max(0.0, self_out[outer].get(m, 0.0) - v)
            self_out[inner][m] = self_out[inner].get(m, 0.0) + v
            incl[inner][m] = incl[inner].get(m, 0.0) + v
    ops = []
    for op in profile.operations:
        ops.append(Operation(id=op.id, name=op.name, kind=op.kind, module=op.module, file=op.file,
                             line_start=op.line_start, line_end=op.line_end, self_metrics=self_out[op.id],
                             inclusive_metrics=incl[op.id], line_span=op.line_span))
    for inner_id, (name, file, start, end, module) in sorted(inner_info.items()):
        if inner_id in metric_ops:
            continue
        ops.append(Operation(id=inner_id, name=name, kind="function", module=module, file=file, line_start=start,
                             line_end=end, self_metrics=self_out[inner_id], inclusive_metrics=incl[inner_id],
                             line_span="definition"))
    edges = list(profile.edges) + [CallEdge(caller=outer, callee=inner, metrics=dict(m))
                                   for (outer, inner), m in sorted(moved.items())]
    return msgspec.structs.replace(profile, operations=ops, lines=new_lines, edges=edges)

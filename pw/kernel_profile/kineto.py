"""Reads the torch profiler's (Kineto's) CUPTI kernel records into `ledger.gpu_activity` records.

Kineto hands every CUPTI activity it collected to Python as `_KinetoEvent` objects; kernel records
are the device-side events that are neither memcpy/memset records nor user annotations. Their
start and end are CUPTI's GPU timestamps in ns. This is the one reader the cache's timer uses, so
a sum over one logical invocation reads the same record shape as the GPU timeline of `pw start`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ledger.gpu_activity import KernelActivity

_NOT_KERNELS = ("Memcpy", "Memset")


def _ns(ev, name: str, us_name: str) -> int:
    got = getattr(ev, name, None)
    if got is not None:
        return int(got())
    return int(round(float(getattr(ev, us_name)()) * 1000))  # older torch: microseconds


def raw_fields(ev) -> dict:
    """The plain fields of one Kineto event that the reader uses (kept as CI fixtures)."""
    start = _ns(ev, "start_ns", "start_us")
    dur = _ns(ev, "duration_ns", "duration_us")
    return {
        "name": ev.name(),
        "device_type": str(ev.device_type()),
        "device_index": int(ev.device_index()),
        "stream": int(getattr(ev, "device_resource_id", lambda: 0)()),
        "correlation_id": int(getattr(ev, "correlation_id", lambda: 0)()),
        "start_ns": start,
        "duration_ns": dur,
        "user_annotation": bool(getattr(ev, "is_user_annotation", lambda: False)()),
    }


def kernels_from_raw(events: Iterable[dict]) -> list[KernelActivity]:
    """Kernel records, in GPU start order, from `raw_fields` dicts."""
    out = []
    for ev in events:
        if not ev["device_type"].endswith("CUDA") or ev["user_annotation"] or ev["name"].startswith(_NOT_KERNELS):
            continue
        out.append(KernelActivity(name=ev["name"], start_ns=ev["start_ns"], end_ns=ev["start_ns"] + ev["duration_ns"],
                                  device=ev["device_index"], stream=ev["stream"],
                                  correlation_id=ev["correlation_id"]))
    out.sort(key=lambda k: (k.start_ns, k.end_ns))
    return out


def kernels(prof) -> list[KernelActivity]:
    """Kernel records of a finished `torch.profiler.profile` session."""
    return kernels_from_raw(raw_fields(ev) for ev in prof.profiler.kineto_results.events())


def per_invocation(records: list[KernelActivity], *, per_call: int, separator: int, n: int,
                   names: set[str] | None = None) -> list[int]:
    """Sum each logical invocation's kernel time (ns).

    The window holds `n` repetitions of [`separator` kernels we launched ourselves (the L2 flush),
    then `per_call` kernels of the invocation], in GPU order on one stream; the flush kernels are
    excluded. A launch sequence that does not repeat that way is an error, not a guess. With
    `names` (the kernels calibration saw), records of any other kernel are dropped first.
    """
    if names is not None:
        records = [r for r in records if r.name in names]
    step = separator + per_call
    if len(records) != n * step:
        raise ValueError(f"expected {n} x ({separator} flush + {per_call} invocation) = {n * step} kernels, "
                         f"CUPTI recorded {len(records)}: the invocation's launch sequence is not stable")
    return [sum(r.end_ns - r.start_ns for r in records[i * step + separator:(i + 1) * step]) for i in range(n)]

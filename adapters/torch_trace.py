"""PyTorch profiler (Kineto) traces read into ``ledger.gpu_activity`` records (pure).

Kineto takes its GPU events from CUPTI's activity API and writes them in the Chrome trace format
(``prof.export_chrome_trace``; ``adapters/torch_trace_run.py`` runs a script under the profiler and
writes one). Complete events (``"ph": "X"``) carry ``ts``/``dur`` in microseconds with nanosecond
decimals; the category says what they are:

| cat | record | from args |
| --- | --- | --- |
| ``kernel`` | KernelActivity | device, stream, correlation, grid, block, registers per thread, shared memory |
| ``gpu_memcpy`` | MemcpyActivity | kind from the name ("Memcpy HtoD (Pageable -> Device)"), bytes |
| ``gpu_memset`` | MemsetActivity | bytes |
| ``cuda_runtime`` / ``cuda_driver`` | ApiActivity | name, tid, correlation |
| ``cuda_sync`` | SyncActivity | kind from the name ("Stream Sync", "Event Sync", "Context Sync") |

Kineto writes kernel names demangled, so ``name`` and ``demangled`` are both that name.
"""

from __future__ import annotations

import re

import msgspec

from ledger.gpu_activity import (
    ApiActivity,
    GpuActivity,
    KernelActivity,
    MemcpyActivity,
    MemsetActivity,
    SyncActivity,
)

_COPY = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP)\b")
_SYNC = {"stream": "stream", "event": "event", "context": "context", "wait": "stream_wait_event"}


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: float = 0.0
    dur: float = 0.0
    tid: int | str = 0
    args: dict = {}


class _Trace(msgspec.Struct):
    traceEvents: list[_Event] = []  # noqa: N815 (the format's own key)


def _ns(us: float) -> int:
    return int(round(us * 1000.0))


def _triple(v: object) -> tuple[int, int, int]:
    if isinstance(v, list) and len(v) == 3 and all(isinstance(x, int) for x in v):
        return (v[0], v[1], v[2])
    return (0, 0, 0)


def read_chrome_trace(data: bytes) -> list[GpuActivity]:
    """The CUPTI-backed events of a torch profiler Chrome trace, as activity records."""
    try:
        trace = msgspec.json.decode(data, type=_Trace)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(f"torch trace: expected Chrome-trace JSON with traceEvents ({exc})") from None
    out: list[GpuActivity] = []
    for e in trace.traceEvents:
        if e.ph != "X":
            continue
        a = e.args
        start, end = _ns(e.ts), _ns(e.ts + e.dur)
        corr = int(a.get("correlation", 0) or 0)
        if e.cat == "kernel":
            out.append(KernelActivity(name=e.name, demangled=e.name, start_ns=start, end_ns=end,
                                      device=int(a.get("device", 0) or 0), stream=int(a.get("stream", 0) or 0),
                                      correlation_id=corr, grid=_triple(a.get("grid")), block=_triple(a.get("block")),
                                      registers_per_thread=int(a.get("registers per thread", 0) or 0),
                                      static_shared_bytes=int(a.get("shared memory", 0) or 0)))
        elif e.cat == "gpu_memcpy":
            m = _COPY.search(e.name)
            out.append(MemcpyActivity(copy_kind=m.group(1) if m else "other", bytes=int(a.get("bytes", 0) or 0),  # type: ignore[arg-type]
                                      start_ns=start, end_ns=end, device=int(a.get("device", 0) or 0),
                                      stream=int(a.get("stream", 0) or 0), correlation_id=corr))
        elif e.cat == "gpu_memset":
            out.append(MemsetActivity(bytes=int(a.get("bytes", 0) or 0), start_ns=start, end_ns=end,
                                      device=int(a.get("device", 0) or 0), stream=int(a.get("stream", 0) or 0),
                                      correlation_id=corr))
        elif e.cat in ("cuda_runtime", "cuda_driver"):
            tid = e.tid if isinstance(e.tid, int) else 0
            out.append(ApiActivity(name=e.name, start_ns=start, end_ns=end, thread=tid, correlation_id=corr))
        elif e.cat == "cuda_sync":
            kind = next((v for k, v in _SYNC.items() if k in e.name.lower()), "other")
            out.append(SyncActivity(sync_kind=kind, start_ns=start, end_ns=end,  # type: ignore[arg-type]
                                    stream=int(a.get("stream", 0) or 0), correlation_id=corr))
    return out
